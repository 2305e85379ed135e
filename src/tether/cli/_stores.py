"""Opening tether stores named on the command line, and the read-only queries the CLI needs.

A store is named by a file path or ``sqlite:///path`` (:class:`tether.SqliteSaver`)
or by ``postgresql://...`` with an optional ``?schema=`` (:class:`tether.PostgresSaver`),
as :func:`tether.stores.parse_store_url` reads them.

The saver does the operations (``list``, ``get_tuple``, ``prune``, ...). A
few questions a saver does not answer -- which threads exist, how many rows
and bytes a store holds -- are asked of the backend's inspection functions
(``backends/sqlite/_inspect.py``, ``backends/postgres/_inspect.py``) over a
separate read-only connection, so they cost no decoding of stored values;
this module names no table of tether's. Nothing in
this module imports click: it is the library side of the CLI.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shlex
import sqlite3
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from tether.backends._inspect import HeadInfo, OrphanWrites, TableStats, ThreadInfo
from tether.backends.sqlite import _inspect
from tether.base import BaseCheckpointSaver
from tether.errors import (
    ConfigError,
    SchemaVersionError,
    StorageUnavailable,
)
from tether.importer import source_serializer
from tether.stores import StoreURL, parse_store_url

__all__ = [
    "HeadInfo",
    "OrphanWrites",
    "Store",
    "TableStats",
    "ThreadInfo",
    "open_store",
    "opened",
    "same_store",
]


class Store(abc.ABC):
    """A tether saver with the inspection queries of its backend."""

    url: StoreURL
    saver: BaseCheckpointSaver

    @abc.abstractmethod
    def threads(self) -> list[ThreadInfo]:
        """Every thread, sorted by id."""

    def thread(self, thread_id: str) -> ThreadInfo | None:
        """One thread, or ``None`` when the store has no checkpoint of it."""
        for info in self.threads_named([thread_id]):
            return info
        return None

    def threads_named(self, thread_ids: Collection[str]) -> list[ThreadInfo]:
        want = set(thread_ids)
        return [t for t in self.threads() if t.thread_id in want]

    @abc.abstractmethod
    def stats(self) -> tuple[list[TableStats], int | None]:
        """Per-table rows and bytes, and the store's total bytes."""

    @abc.abstractmethod
    def heads(
        self,
        thread_id: str,
        ns: str | None = None,
        *,
        checkpoint_id: str | None = None,
        limit: int | None = None,
    ) -> list[HeadInfo]:
        """Checkpoints of a thread without their values, newest first.

        Args:
            ns: only this namespace (``None``: every namespace).
            checkpoint_id: only this checkpoint.
            limit: at most this many.
        """

    @abc.abstractmethod
    def orphan_writes(self) -> list[OrphanWrites]:
        """Pending writes stored for checkpoints the store does not hold."""

    @abc.abstractmethod
    def close(self) -> None:
        """Each subclass implements this."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: tether's own runtime types a store it wrote holds (a compiled graph allows
#: them on its saver): the CLI reads them like LangGraph's own.
RUNTIME_TYPES: tuple[tuple[str, str], ...] = (("tether.graph._types", "Send"),)


def _serializer(allowlist: Collection[tuple[str, ...]]) -> Any:
    return source_serializer([*RUNTIME_TYPES, *allowlist])


# --- SQLite ---------------------------------------------------------------------------


def _sqlite_state(path: Path) -> Any:
    """What the file holds (tether.backends.sqlite._schema.FileState), read read-only."""
    from tether.backends.sqlite._conn import translate_errors
    from tether.backends.sqlite._schema import file_state

    where = str(path)
    with translate_errors(where):
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    try:
        return file_state(conn, where)
    finally:
        conn.close()


def _official_error(url: StoreURL, path: Path) -> ConfigError:
    import shlex

    quoted = shlex.quote(str(path))
    return ConfigError(
        f"{path} is a LangGraph SqliteSaver store, not a tether one (its threads are in the "
        "official tables checkpoints and writes, and it has no tether checkpoints); import "
        f"them into tether's tables in the same file: tether import {quoted} {quoted} "
        f"(the official tables stay as they are), or into a new file: tether import {url} NEW.db"
    )


class _SqliteStore(Store):
    def __init__(self, url: StoreURL, saver: Any) -> None:
        from tether.backends.sqlite._conn import translate_errors

        self.url = url
        self.saver = saver
        self._close_saver = saver.close
        self._translate = translate_errors
        self.where = saver.path
        with translate_errors(self.where):
            self._conn = sqlite3.connect(
                Path(self.where).as_uri() + "?mode=ro", uri=True, check_same_thread=False
            )

    def threads(self) -> list[ThreadInfo]:
        return _inspect.threads(self._conn, self.saver.serde, self.where)

    def heads(
        self,
        thread_id: str,
        ns: str | None = None,
        *,
        checkpoint_id: str | None = None,
        limit: int | None = None,
    ) -> list[HeadInfo]:
        return _inspect.heads(
            self._conn,
            self.saver.serde,
            self.where,
            thread_id,
            ns,
            checkpoint_id=checkpoint_id,
            limit=limit,
        )

    def stats(self) -> tuple[list[TableStats], int | None]:
        return _inspect.table_stats(self._conn, self.where)

    def orphan_writes(self) -> list[OrphanWrites]:
        return _inspect.orphan_writes(self._conn, self.where)

    def close(self) -> None:
        self._conn.close()
        self._close_saver()


def _open_sqlite(
    url: StoreURL, *, create: bool, allowlist: Collection[tuple[str, ...]], read_only: bool
) -> Store:
    from tether.backends.sqlite import SqliteSaver

    path = Path(url.location).expanduser()
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; name a database file")
    if not create:
        # Commands that inspect or manage a store never create one: not in a
        # missing file, an empty one, nor a database without tether's tables.
        if not path.is_file():
            raise ConfigError(
                f"no tether store at {path}: no such file (check the path; `tether import` "
                "creates a store)"
            )
        if path.stat().st_size == 0:
            raise ConfigError(
                f"no tether store at {path}: the file is empty (check the path; "
                "`tether import` creates a store)"
            )
        state = _sqlite_state(path)
        if state.official_rows and not state.tether_rows:
            raise _official_error(url, path)
        if state.version == 0:
            raise ConfigError(
                f"no tether store at {path}: the database has no tether tables (check the "
                "path; `tether import` creates a store)"
            )
    serde = _serializer(allowlist)
    if create:
        # An import target: official tables in the same file are what is imported.
        saver = SqliteSaver(os.fspath(path), serde=serde, import_official=False)
    else:
        saver = SqliteSaver(os.fspath(path), serde=serde, read_only=read_only)
    try:
        return _SqliteStore(url, saver)
    except BaseException:
        saver.close()
        raise


# --- Postgres -------------------------------------------------------------------------


class _PostgresStore(Store):
    def __init__(self, url: StoreURL, saver: Any, conn: Any) -> None:
        self.url = url
        self.saver = saver
        self._close_saver = saver.close
        self._conn = conn
        self.schema = url.schema

    def threads(self) -> list[ThreadInfo]:
        from tether.backends.postgres._inspect import threads  # psycopg: an extra

        return threads(self._conn, self.schema, str(self.url))

    def heads(
        self,
        thread_id: str,
        ns: str | None = None,
        *,
        checkpoint_id: str | None = None,
        limit: int | None = None,
    ) -> list[HeadInfo]:
        from tether.backends.postgres._inspect import heads

        return heads(
            self._conn,
            self.schema,
            str(self.url),
            thread_id,
            ns,
            checkpoint_id=checkpoint_id,
            limit=limit,
        )

    def stats(self) -> tuple[list[TableStats], int | None]:
        from tether.backends.postgres._inspect import table_stats

        return table_stats(self._conn, self.schema, str(self.url))

    def orphan_writes(self) -> list[OrphanWrites]:
        from tether.backends.postgres._inspect import orphan_writes

        return orphan_writes(self._conn, self.schema, str(self.url))

    def close(self) -> None:
        try:
            self._conn.close()
        finally:
            self._close_saver()


def _pg_has(conn: Any, schema: str, table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.{table}",)).fetchone()
    return bool(row and row[0])


def _connect_failed(url: StoreURL, exc: Exception) -> StorageUnavailable:
    """One line saying what could not be reached (issue #20.1c), password hidden."""
    from tether.backends.postgres._errors import connect_failed

    return connect_failed(url.location, str(url), exc)


def _pg_version(conn: Any, url: StoreURL, schema: str) -> int:
    """The tether schema version recorded in ``schema`` (0: none recorded)."""
    import psycopg

    from tether.backends.postgres import _schema
    from tether.backends.postgres._errors import translate

    try:
        row = conn.execute(_schema.CURRENT_VERSION.format(schema=f'"{schema}"')).fetchone()
    except psycopg.Error as exc:
        raise translate(exc, f"reading the schema version of {url}") from exc
    return int(row[0] if row and row[0] is not None else 0)


def _check_readable(conn: Any, url: StoreURL, schema: str) -> None:
    """A store a read-only command may read as it is: the version this tether reads.

    Read-only commands never create or migrate (issue #18.5): an older store is
    refused, not read, because the queries here and the saver's reads expect
    the current tables (a table or column added since would be missing).
    """
    from tether.backends.postgres._schema import SCHEMA_VERSION

    found = _pg_version(conn, url, schema)
    if found == 0:
        raise ConfigError(
            f"no tether store in schema {schema!r} of {url} (tether_migrations records no "
            "version); check the URL and ?schema=, or create one with `tether import`"
        )
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"schema {schema!r} of {url} is at tether schema version {found}, newer than "
            f"version {SCHEMA_VERSION} this tether supports; upgrade tether (nothing was changed)",
            found=found,
            supported=SCHEMA_VERSION,
        )
    if found < SCHEMA_VERSION:
        raise SchemaVersionError(
            f"schema {schema!r} of {url} is at tether schema version {found} and this tether "
            f"reads version {SCHEMA_VERSION}; the reading commands (threads, history, show, "
            "diff, stats, verify) never migrate a store. Migrate it once, by a command that "
            "writes to it (tether prune, delete or copy) or with "
            "PostgresSaver.from_conn_string(url).setup(), then read it (nothing was changed)",
            found=found,
            supported=SCHEMA_VERSION,
        )


def _read_only_options(location: str) -> str:
    """libpq ``options`` for a connection on which Postgres refuses every write.

    The URL's own ``options`` (or ``PGOPTIONS``) are kept: the keyword given to
    ``connect`` replaces them.
    """
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(location).get("options") or os.environ.get("PGOPTIONS") or ""
    return f"{given} -c default_transaction_read_only=on".strip()


def _open_postgres(
    url: StoreURL, *, create: bool, allowlist: Collection[tuple[str, ...]], read_only: bool
) -> Store:
    try:
        import psycopg

        from tether.backends.postgres import PostgresSaver
        from tether.backends.postgres._errors import translate
        from tether.backends.postgres._sql import check_schema_name
    except ImportError as exc:
        raise ConfigError(
            f"{url} needs the Postgres driver: pip install 'tether[postgres]' ({exc})"
        ) from exc
    schema = check_schema_name(url.schema)
    read_only = read_only and not create
    # A read-only command's connections refuse writes: nothing it runs can
    # create, migrate or change the store (#18.5).
    extra: dict[str, Any] = {"options": _read_only_options(url.location)} if read_only else {}
    try:
        # A connection of its own, opened first: a wrong URL fails here at once,
        # not after the pool's wait for a connection.
        conn = psycopg.connect(url.location, autocommit=True, connect_timeout=10, **extra)
    except psycopg.Error as exc:
        raise _connect_failed(url, exc) from exc
    try:
        try:
            official = _pg_has(conn, schema, "checkpoint_migrations")
            ours = _pg_has(conn, schema, "tether_migrations")
        except psycopg.Error as exc:
            raise translate(exc, f"reading {url}") from exc
        if not ours and not create:
            if official:
                raise ConfigError(
                    f"no tether store in schema {schema!r} of {url}: it holds LangGraph's "
                    f"PostgresSaver tables; import their threads first (tether's tables go "
                    f"beside them): tether import {shlex.quote(str(url))} "
                    f"{shlex.quote(str(url))}"
                )
            raise ConfigError(
                f"no tether store in schema {schema!r} of {url} (no tether_migrations table); "
                "check the URL and ?schema=, or create one with `tether import`"
            )
        if read_only:
            _check_readable(conn, url, schema)
        # LangGraph's tables may sit beside tether's (distinct names): the CLI
        # works on tether's and leaves them alone (`tether import` reads them).
        saver = PostgresSaver.from_conn_string(
            url.location,
            schema=schema,
            pool_size=2,
            serde=_serializer(allowlist),
            import_official=False,
            connect_kwargs=extra,
        )
        if not read_only:
            try:
                saver.setup()
            except BaseException:
                saver.close()
                raise
    except BaseException:
        conn.close()
        raise
    return _PostgresStore(url, saver, conn)


# --- entry point ----------------------------------------------------------------------


def open_store(
    name: str,
    *,
    create: bool = False,
    allowlist: Collection[tuple[str, ...]] = (),
    read_only: bool = False,
) -> Store:
    """Open the tether store ``name`` (a path or URL).

    Args:
        name: as :func:`tether.stores.parse_store_url` reads it.
        create: create a missing store (import targets); otherwise a missing
            store is a :class:`~tether.errors.ConfigError`.
        allowlist: extra ``(module, name)`` types stored values may have, on
            top of LangGraph's own.
        read_only: the command only reads: a SQLite store is opened
            read-only, a Postgres one on connections that refuse writes, and
            neither is created or migrated (an older store is a
            :class:`~tether.errors.SchemaVersionError`).
    """
    url = parse_store_url(name)
    if url.kind == "postgres":
        return _open_postgres(url, create=create, allowlist=allowlist, read_only=read_only)
    return _open_sqlite(url, create=create, allowlist=allowlist, read_only=read_only)


def same_store(a: StoreURL, b: StoreURL) -> bool:
    """Whether an import from ``a`` into ``b`` would read and write the same tables.

    Same file for SQLite; never for Postgres, where tether's tables have names
    of their own beside LangGraph's in any schema.
    """
    if a.kind != b.kind:
        return False
    if a.kind == "sqlite":
        pa, pb = Path(a.location).expanduser(), Path(b.location).expanduser()
        with contextlib.suppress(OSError):
            if pa.exists() and pb.exists():
                return pa.samefile(pb)
        return pa.absolute() == pb.absolute()
    # An official Postgres store and a tether one never share tables (tether's
    # are tether_*), so importing within one schema reads and writes apart.
    return False


@contextlib.contextmanager
def opened(
    name: str,
    *,
    create: bool = False,
    allowlist: Collection[tuple[str, ...]] = (),
    read_only: bool = False,
) -> Iterator[Store]:
    """:func:`open_store` as a context manager that closes the store."""
    store = open_store(name, create=create, allowlist=allowlist, read_only=read_only)
    try:
        yield store
    finally:
        store.close()

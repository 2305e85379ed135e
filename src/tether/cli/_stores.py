"""Opening tether stores named on the command line, and the read-only queries the CLI needs.

A store is named by a file path or ``sqlite:///path`` (:class:`tether.SqliteSaver`)
or by ``postgresql://...`` with an optional ``?schema=`` (:class:`tether.PostgresSaver`),
as :func:`tether.stores.parse_store_url` reads them.

The saver does the operations (``list``, ``get_tuple``, ``prune``, ...). A
few questions a saver does not answer -- which threads exist, how many rows
and bytes a store holds -- are asked here with plain SQL over a separate
connection, read-only, so they cost no decoding of stored values. Nothing in
this module imports click: it is the library side of the CLI.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shlex
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.errors import (
    ConfigError,
    SchemaVersionError,
    StorageUnavailable,
    TetherError,
    shown,
)
from tether.importer import source_serializer
from tether.stores import StoreURL, parse_store_url

__all__ = [
    "HeadInfo",
    "Store",
    "TableStats",
    "ThreadInfo",
    "open_store",
    "opened",
    "same_store",
]


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread as ``tether threads`` shows it."""

    thread_id: str
    checkpoints: int
    namespaces: int
    latest_id: str
    latest_step: Any
    latest_ts: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoints": self.checkpoints,
            "namespaces": self.namespaces,
            "latest_checkpoint_id": self.latest_id,
            "latest_step": self.latest_step,
            "latest_ts": self.latest_ts,
        }


@dataclass(frozen=True, slots=True)
class HeadInfo:
    """One checkpoint without its channel values, as ``tether history`` shows it.

    Read with no value decoded, so a history lists whatever types the thread
    holds (allowed or not) at the cost of the rows' metadata only.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint: dict[str, Any]  # the checkpoint without channel_values
    metadata: dict[str, Any]
    parent_id: str | None
    pending_writes: int

    @property
    def checkpoint_id(self) -> str:
        return str(self.checkpoint["id"])


@dataclass(frozen=True, slots=True)
class TableStats:
    """Rows and bytes of one table (``bytes`` is ``None`` where the engine cannot tell)."""

    table: str
    rows: int
    bytes: int | None


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
    def close(self) -> None:
        """Each subclass implements this."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- SQLite ---------------------------------------------------------------------------

# The latest checkpoint of each thread (root namespace first), whole, so that its
# checksum is verified before its metadata and head are read.
_SQLITE_THREADS = """
SELECT c.n, s.nss, c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       c.type, c.checkpoint, c.channel_versions, c.metadata, c.checksum, c.unstored
FROM (
    SELECT *,
           count(*) OVER (PARTITION BY thread_id) AS n,
           row_number() OVER (
               PARTITION BY thread_id ORDER BY checkpoint_ns = '' DESC, checkpoint_id DESC
           ) AS rn
    FROM tether_checkpoints
) AS c
JOIN (
    SELECT thread_id AS t, count(DISTINCT checkpoint_ns) AS nss
    FROM tether_checkpoints GROUP BY thread_id
) AS s ON s.t = c.thread_id
WHERE c.rn = 1
ORDER BY c.thread_id
"""

_SQLITE_TABLES = ("tether_checkpoints", "tether_blobs", "tether_writes")

# Checkpoints of a thread with their write counts, no blob read; whole rows, so
# that each is verified against its checksum before its head is read.
_SQLITE_HEADS = """
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,
       c.checkpoint, c.channel_versions, c.metadata, c.checksum, c.unstored, c.nwrites,
       (SELECT count(*) FROM tether_writes AS w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)
FROM tether_checkpoints AS c
WHERE c.thread_id = ?1 AND (?2 IS NULL OR c.checkpoint_ns = ?2)
  AND (?3 IS NULL OR c.checkpoint_id = ?3)
ORDER BY c.checkpoint_id DESC, c.checkpoint_ns DESC
LIMIT ?4
"""


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
        from tether.backends._sqlbase import metadata_from_json
        from tether.backends.sqlite._rows import check_row
        from tether.checkpoint import Address

        out = []
        with self._translate(self.where):
            rows = self._conn.execute(_SQLITE_THREADS).fetchall()
        for n, nss, *row in rows:
            check_row(row, self.where)  # a damaged row is refused, not shown
            tid, ns, cid, _, tag, head, _, meta = row[:8]
            ts: str | None = None
            try:
                decoded = self.saver.serde.loads_typed((tag, head))
                ts = decoded.get("ts") if isinstance(decoded, dict) else None
            except TetherError:  # a listing shows what it can
                ts = None
            step = metadata_from_json(meta, address=Address(tid, ns, cid)).get("step")
            out.append(ThreadInfo(str(tid), int(n), int(nss), str(cid), step, ts))
        return out

    def heads(
        self,
        thread_id: str,
        ns: str | None = None,
        *,
        checkpoint_id: str | None = None,
        limit: int | None = None,
    ) -> list[HeadInfo]:
        from tether.backends._sqlbase import metadata_from_json, versions_from_json
        from tether.backends.sqlite._rows import check_row, check_write_count
        from tether.checkpoint import Address
        from tether.errors import DecodeError

        args = (thread_id, ns, checkpoint_id, -1 if limit is None else limit)
        with self._translate(self.where):
            rows = self._conn.execute(_SQLITE_HEADS, args).fetchall()
        out = []
        for *row, writes in rows:
            check_row(row, self.where)  # a damaged row is refused, not shown
            check_write_count(row, int(writes), self.where)
            check_write_count(row, int(writes), self.where)
            tid, row_ns, cid, parent, tag, head, _, meta = row[:8]
            address = Address(tid, row_ns, cid)
            try:  # not shown, but a row whose versions are not JSON is named here
                versions_from_json(row[6])
            except ValueError as exc:
                raise DecodeError(
                    f"stored channel_versions of a checkpoint in {self.where} is not JSON; "
                    "the row is damaged (restore it from a backup)",
                    context={
                        "thread_id": tid,
                        "checkpoint_ns": row_ns or None,
                        "checkpoint_id": cid,
                    },
                ) from exc
            decoded = self.saver.serde.loads_typed((tag, head))  # plain JSON values only
            out.append(
                HeadInfo(
                    str(tid),
                    str(row_ns),
                    dict(decoded),
                    metadata_from_json(meta, address=address),
                    parent,
                    int(writes),
                )
            )
        return out

    def stats(self) -> tuple[list[TableStats], int | None]:
        tables = []
        with self._translate(self.where):
            sizes: dict[str, int] = {}
            with contextlib.suppress(sqlite3.Error):  # dbstat is an optional SQLite module
                sizes = {
                    str(name): int(size)
                    for name, size in self._conn.execute(
                        "SELECT name, sum(pgsize) FROM dbstat GROUP BY name"
                    )
                }
            for table in _SQLITE_TABLES:
                (rows,) = self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608
                tables.append(TableStats(table, int(rows), sizes.get(table)))
            pages = int(self._conn.execute("PRAGMA page_count").fetchone()[0])
            size = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
        total = pages * size
        wal = Path(self.where + "-wal")
        if wal.exists():
            total += wal.stat().st_size
        return tables, total

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
    serde = source_serializer(allowlist)
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

# tether's tables in a Postgres schema (LangGraph's official ones may sit beside them).
_PG_TABLES = ("tether_checkpoints", "tether_blobs", "tether_writes", "tether_write_counts")

_PG_THREADS = """
SELECT t.thread_id, t.n, t.nss, l.checkpoint_id, l.step, l.ts
FROM (
    SELECT thread_id, count(*) AS n, count(DISTINCT checkpoint_ns) AS nss
    FROM {s}.tether_checkpoints GROUP BY thread_id
) AS t
CROSS JOIN LATERAL (
    SELECT c.checkpoint_id, c.metadata -> 'step' AS step, c.checkpoint ->> 'ts' AS ts
    FROM {s}.tether_checkpoints c WHERE c.thread_id = t.thread_id
    ORDER BY (c.checkpoint_ns = '') DESC, c.checkpoint_id DESC LIMIT 1
) AS l
ORDER BY t.thread_id
"""


class _PostgresStore(Store):
    def __init__(self, url: StoreURL, saver: Any, conn: Any) -> None:
        self.url = url
        self.saver = saver
        self._close_saver = saver.close
        self._conn = conn
        self.schema = url.schema

    def _rows(self, what: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        import psycopg

        from tether.backends.postgres._errors import translate

        try:
            with self._conn.cursor() as cur:
                cur.execute(query, params)
                return list(cur.fetchall())
        except psycopg.Error as exc:
            raise translate(exc, f"{what} in {self.url}") from exc

    def threads(self) -> list[ThreadInfo]:
        rows = self._rows("listing threads", _PG_THREADS.format(s=self.schema))
        return [
            ThreadInfo(str(tid), int(n), int(nss), str(cid), step, ts)
            for tid, n, nss, cid, step, ts in rows
        ]

    def heads(
        self,
        thread_id: str,
        ns: str | None = None,
        *,
        checkpoint_id: str | None = None,
        limit: int | None = None,
    ) -> list[HeadInfo]:
        query = f"""
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       c.checkpoint - 'channel_values', c.metadata,
       coalesce((SELECT wc.n FROM {self.schema}.tether_write_counts wc
                 WHERE wc.thread_id = c.thread_id AND wc.checkpoint_ns = c.checkpoint_ns
                 AND wc.checkpoint_id = c.checkpoint_id), 0),
       (SELECT count(*) FROM {self.schema}.tether_writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)
FROM {self.schema}.tether_checkpoints c
WHERE c.thread_id = %(t)s AND (%(ns)s::text IS NULL OR c.checkpoint_ns = %(ns)s)
  AND (%(cid)s::text IS NULL OR c.checkpoint_id = %(cid)s)
ORDER BY c.checkpoint_id DESC, c.checkpoint_ns DESC
LIMIT %(limit)s
"""  # noqa: S608 -- the schema is a checked identifier; values are parameters
        rows = self._rows(
            f"reading the history of thread {shown(thread_id)}",
            query,
            {"t": thread_id, "ns": ns, "cid": checkpoint_id, "limit": limit},
        )
        from tether.backends._sqlbase import check_write_count
        from tether.checkpoint import Address

        out = []
        for tid, row_ns, cid, parent, head, meta, recorded, writes in rows:
            check_write_count(Address(tid, row_ns, cid), recorded, int(writes), str(self.url))
            out.append(HeadInfo(str(tid), str(row_ns), dict(head), dict(meta), parent, int(writes)))
        return out

    def stats(self) -> tuple[list[TableStats], int | None]:
        tables = []
        total = 0
        for table in _PG_TABLES:
            name = f"{self.schema}.{table}"
            ((rows, size),) = self._rows(
                "counting rows",
                f"SELECT (SELECT count(*) FROM {name}), pg_total_relation_size(%s)",  # noqa: S608
                (name,),
            )
            tables.append(TableStats(table, int(rows), int(size)))
            total += int(size)
        return tables, total

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
            f"reads version {SCHEMA_VERSION}; threads, history, show and stats never migrate "
            "a store. Migrate it once, by a command that writes to it (tether prune, delete "
            "or copy) or with PostgresSaver.from_conn_string(url).setup(), then read it "
            "(nothing was changed)",
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
            serde=source_serializer(allowlist),
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

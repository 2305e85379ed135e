"""Export threads of a tether store to LangGraph's official stores: the way out.

The reverse of :mod:`tether.importer`. Every thread (or the ones named) is
read through the tether saver and written through the official saver of the
target, so that LangGraph's own ``SqliteSaver`` or ``PostgresSaver`` reads the
same histories:

``langgraph-checkpoint-sqlite``
    a SQLite file (a path or ``sqlite:///path``), through
    ``langgraph.checkpoint.sqlite.SqliteSaver``;
``langgraph-checkpoint-postgres``
    a ``postgresql://`` URL, through ``langgraph.checkpoint.postgres.PostgresSaver``.
    The official saver names its tables without a schema, so they live in the
    connection's ``search_path``: ``?schema=NAME`` sets it to that schema
    (created if missing); to read the export, connect with the same
    ``search_path`` (``options="-c search_path=NAME"``).

Why the official savers' ``put``/``put_writes`` and not their tables: the
format is then theirs by construction -- the serializer (LangGraph's
``JsonPlusSerializer``), which values go inline and which into blobs, the
metadata they keep, the index a write gets -- and stays right when a new
release changes it. The price is that the export needs those packages
(``pip install langgraph-checkpoint-sqlite`` / ``langgraph-checkpoint-postgres``;
a missing one is named) and writes one call at a time. Only two questions are
asked in plain SQL, because the official API has no cheap answer: whether the
target's tables are LangGraph's, and which of the threads it already holds.

What is kept: thread ids, namespaces (subgraphs), checkpoint ids, parent
links, channel versions (the originals), metadata, full channel values
(tether's append-encoded lists are read whole through the saver), and pending
writes with their task ids, task paths and indexes (read with
:meth:`~tether.base.BaseCheckpointSaver.get_writes` and replayed in
``put_writes`` batches whose positions reproduce the original indexes, as the
importer does). Values are decoded by tether -- its allowlist applies, plus
``allowlist`` -- and encoded by the official serializer.

The source is only read. A target that already holds any of the threads is
refused, naming them, unless ``overwrite=True``: each such thread is then
deleted from the target (the official ``delete_thread``) and written again,
so an export run twice gives the same target.

Example::

    from tether.exporter import export_store

    summary = export_store("chat.db", "langgraph.db")
    print(summary.checkpoints, "checkpoints exported")
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import CheckpointTuple, StoredWrite
from tether.errors import (
    CheckpointNotFound,
    ConfigError,
    DecodeError,
    EncodeError,
    SchemaVersionError,
    TetherError,
    shown,
)
from tether.importer import _batches, _Write
from tether.serde._langgraph_aes import langgraph_aes_key as langgraph_aes_key_of
from tether.serde._langgraph_aes import langgraph_encrypted_serializer
from tether.stores import StoreURL, parse_store_url

__all__ = ["ExportSummary", "ProgressCallback", "export_store"]

#: ``progress(done, total)``: called once before the first checkpoint and after each one.
ProgressCallback = Callable[[int, int], None]

#: The columns of ``langgraph-checkpoint-sqlite``'s tables (``task_path`` is
#: added by its ``setup()`` to files made before it existed).
_SQLITE_CHECKPOINTS = frozenset(
    {
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
    }
)
_SQLITE_WRITES = frozenset(
    {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "value"}
)
_PIP = {"sqlite": "langgraph-checkpoint-sqlite", "postgres": "langgraph-checkpoint-postgres"}


# --- the summary --------------------------------------------------------------------


@dataclass(slots=True)
class ExportSummary:
    """What an export wrote (a run with ``overwrite=True`` writes the same counts again)."""

    source: str
    target: str
    kind: str
    threads: int = 0
    namespaces: int = 0
    checkpoints: int = 0
    writes: int = 0
    thread_ids: list[str] = field(default_factory=list)
    #: Threads the target held before and that were replaced (``overwrite=True``).
    overwritten: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The summary as a plain dict (for JSON output)."""
        return {
            "source": self.source,
            "target": self.target,
            "kind": self.kind,
            "threads": self.threads,
            "namespaces": self.namespaces,
            "checkpoints": self.checkpoints,
            "writes": self.writes,
            "overwritten": list(self.overwritten),
        }


# --- the official targets -----------------------------------------------------------


def _missing_package(url: StoreURL, exc: ImportError) -> ConfigError:
    return ConfigError(
        f"exporting to {url} writes through LangGraph's official saver, which is not "
        f"installed: pip install {_PIP[url.kind]} ({exc})"
    )


class _Target(abc.ABC):
    """An official saver opened on the export target, with its errors translated."""

    where: str
    saver: Any  # a langgraph.checkpoint.base.BaseCheckpointSaver

    @abc.abstractmethod
    def existing(self, thread_ids: Sequence[str]) -> list[str]:
        """Which of ``thread_ids`` the target holds checkpoints of, in the order given."""

    @abc.abstractmethod
    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with driver errors turned into tether's, naming ``what``."""

    @abc.abstractmethod
    def thread_scope(self) -> contextlib.AbstractContextManager[None]:
        """Where one thread is written: a transaction when the driver allows one."""

    @abc.abstractmethod
    def close(self) -> None: ...


class _SqliteTarget(_Target):
    def __init__(self, url: StoreURL, serde: Any = None) -> None:
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError as exc:
            raise _missing_package(url, exc) from exc
        from tether.backends.sqlite._conn import translate_errors

        self._translate = translate_errors
        path = Path(url.location).expanduser()
        if path.is_dir():
            raise ConfigError(f"{path} is a directory; name the SQLite file to export into")
        self.where = str(path)
        with translate_errors(self.where):
            self.conn = sqlite3.connect(self.where, check_same_thread=False)
        try:
            with translate_errors(self.where):
                self._check()
                # Each official put and put_writes commits on its own. In WAL
                # mode (which setup() turns on) NORMAL keeps every commit
                # through a crash of this process and syncs the log only at
                # checkpoints, not at each of those commits; an export cut
                # short by a power loss is run again. Per connection: readers
                # of the file keep their own setting.
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.saver = SqliteSaver(self.conn, serde=serde)
                self.saver.setup()
        except BaseException:
            self.conn.close()
            raise

    def _columns(self, table: str) -> set[str]:
        rows = self.conn.execute("SELECT name FROM pragma_table_info(?)", (table,)).fetchall()
        return {str(r[0]) for r in rows}

    def _check(self) -> None:
        checkpoints, writes = self._columns("checkpoints"), self._columns("writes")
        # tether's own tables (tether_*) may share the file; tables named
        # checkpoints/checkpoint_blobs are a tether store from before schema 4.
        tether = bool(self._columns("checkpoint_blobs")) or "channel_versions" in checkpoints
        if tether or (checkpoints and not checkpoints.issuperset(_SQLITE_CHECKPOINTS)):
            what = (
                "a tether store from before its tables were named tether_* (open it once "
                "with this tether to upgrade it)"
                if tether
                else "a table checkpoints that is not LangGraph's"
            )
            raise ConfigError(
                f"{self.where} holds {what}; export into a new file or a LangGraph SqliteSaver file"
            )
        if writes and not writes.issuperset(_SQLITE_WRITES):
            raise ConfigError(
                f"{self.where} holds a table writes that is not LangGraph's; export into a "
                "new file or a LangGraph SqliteSaver file"
            )

    def existing(self, thread_ids: Sequence[str]) -> list[str]:
        with self._translate(self.where):
            rows = self.conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id IN "
                "(SELECT value FROM json_each(?))",
                (json.dumps(list(thread_ids)),),
            ).fetchall()
        found = {str(r[0]) for r in rows}
        return [t for t in thread_ids if t in found]

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        with self._translate(f"{self.where} ({what})"):
            return fn(*args)

    def thread_scope(self) -> contextlib.AbstractContextManager[None]:
        # The official saver commits after every call; no transaction spans them.
        return contextlib.nullcontext()

    def close(self) -> None:
        self.conn.close()


class _PostgresTarget(_Target):
    def __init__(self, url: StoreURL, serde: Any = None) -> None:
        self._serde = serde
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError as exc:
            raise _missing_package(url, exc) from exc
        import psycopg
        from psycopg.rows import dict_row

        from tether.backends.postgres._errors import connect_failed, translate
        from tether.backends.postgres._sql import check_schema_name

        self._psycopg = psycopg
        self._translate = translate
        self.schema = check_schema_name(url.schema)
        self.where = f"{url} (schema {self.schema})"
        try:
            # As LangGraph's docs open the connection for its saver.
            self.conn = psycopg.connect(
                url.location,
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
                connect_timeout=10,
            )
        except psycopg.Error as exc:
            # One line naming the server: an export is a one-shot run (#20.1c).
            raise connect_failed(url.location, str(url), exc) from exc
        try:
            self.call("creating the tables", self._open, PostgresSaver)
        except BaseException:
            self.conn.close()
            raise

    def _open(self, saver_class: Any) -> None:
        ident = f'"{self.schema}"'
        # tether's own tables (tether_*) may share the schema; a table named
        # checkpoints must be LangGraph's (it has a type column; a tether store
        # from before schema version 10 used that name for its own table).
        columns = {
            str(r["column_name"])
            for r in self.conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'checkpoints'",
                (self.schema,),
            ).fetchall()
        }
        if columns and "type" not in columns:
            raise ConfigError(
                f"schema {self.schema!r} of {self.where} holds a table checkpoints that is not "
                "LangGraph's (a tether store from before its tables were named tether_*: "
                "open it once with this tether to upgrade it); or export into another "
                "schema (?schema=NAME)"
            )
        self.conn.execute(f"CREATE SCHEMA IF NOT EXISTS {ident}")
        # The official saver names its tables without a schema.
        self.conn.execute("SELECT set_config('search_path', %s, false)", (ident,))
        self.saver = saver_class(self.conn, serde=self._serde)
        self.saver.setup()

    def existing(self, thread_ids: Sequence[str]) -> list[str]:
        rows = self.call(
            "listing its threads",
            lambda: self.conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id = ANY(%s)",
                (list(thread_ids),),
            ).fetchall(),
        )
        found = {str(r["thread_id"]) for r in rows}
        return [t for t in thread_ids if t in found]

    def call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self._psycopg.Error as exc:
            raise self._translate(exc, f"{what} in {self.where}") from exc

    @contextlib.contextmanager
    def thread_scope(self) -> Iterator[None]:
        # One transaction per thread: a thread replaced with overwrite is never
        # seen half written, and it is one commit instead of one per call.
        try:
            with self.conn.transaction():
                yield
        except self._psycopg.Error as exc:
            raise self._translate(exc, f"committing to {self.where}") from exc

    def close(self) -> None:
        self.conn.close()


def _open_target(url: StoreURL, serde: Any = None) -> _Target:
    if url.kind == "postgres":
        return _PostgresTarget(url, serde)
    return _SqliteTarget(url, serde)


# --- the tether source ----------------------------------------------------------------


@dataclass(slots=True)
class _Source:
    saver: BaseCheckpointSaver
    name: str
    url: StoreURL | None
    #: checkpoints per thread: every thread of the store, or the ones asked for
    counts: dict[str, int]
    close: Callable[[], None]


def _tether_saver(saver: Any) -> BaseCheckpointSaver:
    if isinstance(saver, BaseCheckpointSaver):
        return saver
    inner = getattr(saver, "saver", None)  # a tether.langgraph drop-in wraps one
    if isinstance(inner, BaseCheckpointSaver):
        return inner
    raise ConfigError(
        f"export_store reads a tether store: give its name (a path or postgresql:// URL) "
        f"or a tether saver, not {type(saver).__name__}"
    )


def _count(saver: BaseCheckpointSaver, threads: list[str] | None) -> dict[str, int]:
    """Checkpoints per thread, read through the saver (a saver has no cheaper count)."""
    counts: dict[str, int] = {}
    configs: Iterable[dict[str, Any] | None] = (
        [None] if threads is None else [{"configurable": {"thread_id": t}} for t in threads]
    )
    for config in configs:
        for tup in saver.list(config):
            tid = str(tup.config["configurable"]["thread_id"])
            counts[tid] = counts.get(tid, 0) + 1
    return counts


def _open_source(
    source: Any, threads: list[str] | None, allowlist: Collection[tuple[str, ...]]
) -> _Source:
    if isinstance(source, str):
        from tether.cli._stores import open_store

        store = open_store(source, allowlist=allowlist)
        try:
            counts = {i.thread_id: i.checkpoints for i in store.threads()}
        except BaseException:
            store.close()
            raise
        return _Source(store.saver, str(store.url), store.url, counts, store.close)
    saver = _tether_saver(source)
    if allowlist:
        saver = saver.with_allowlist(allowlist)
    return _Source(saver, type(saver).__name__, None, _count(saver, threads), lambda: None)


# --- the export -------------------------------------------------------------------------


def _config(thread_id: str, ns: str, checkpoint_id: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _task_batches(writes: Sequence[StoredWrite]) -> Iterator[tuple[str, str, list[Any]]]:
    """``(task_path, task_id, batch)`` for ``put_writes``, reproducing the stored indexes.

    The official savers index a write as tether does (its position in the
    batch, or the special channel's fixed negative index), so the importer's
    batches serve here too.
    """
    tasks: dict[tuple[str, str], list[_Write]] = {}
    for w in writes:
        tasks.setdefault((w.task_path, w.task_id), []).append(
            _Write(w.task_id, w.task_path, w.idx, w.channel, w.value)
        )
    for (task_path, task_id), task_writes in tasks.items():
        for batch in _batches(task_writes):
            yield task_path, task_id, batch


class _Exporter:
    def __init__(
        self, source: BaseCheckpointSaver, target: _Target, tick: Callable[[], None]
    ) -> None:
        self.source = source
        self.target = target
        self.tick = tick
        self.checkpoints = 0
        self.writes = 0

    def thread(self, thread_id: str) -> int:
        """Write every checkpoint of one thread; returns its number of namespaces.

        ``list`` yields newest first, a child before its parent. What the
        official Postgres saver needs as ``new_versions`` (the channels that
        changed since the parent, whose values it stores as blobs) is known only
        once the parent is read, so a checkpoint waits for its parent, and a
        thread is streamed with only the newest checkpoint of each open branch
        in memory. A checkpoint whose parent the store no longer has (pruned)
        is written last, with every channel as new.
        """
        waiting: dict[tuple[str, str], list[CheckpointTuple]] = {}
        namespaces: set[str] = set()
        for tup in self.source.list({"configurable": {"thread_id": thread_id}}):
            ns = str(tup.config["configurable"].get("checkpoint_ns") or "")
            namespaces.add(ns)
            versions = tup.checkpoint.get("channel_versions") or {}
            for child in waiting.pop((ns, tup.checkpoint["id"]), ()):
                self.put(thread_id, child, versions)
            parent = _parent_id(tup)
            if parent is None:
                self.put(thread_id, tup, None)
            else:
                waiting.setdefault((ns, parent), []).append(tup)
        for children in waiting.values():
            for child in children:
                self.put(thread_id, child, None)
        return len(namespaces)

    def put(
        self, thread_id: str, tup: CheckpointTuple, parent_versions: dict[str, Any] | None
    ) -> None:
        checkpoint = tup.checkpoint
        ns = str(tup.config["configurable"].get("checkpoint_ns") or "")
        cid = checkpoint["id"]
        versions = dict(checkpoint.get("channel_versions") or {})
        if parent_versions is None:
            new_versions = versions
        else:
            new_versions = {c: v for c, v in versions.items() if parent_versions.get(c) != v}
        what = f"checkpoint {cid} of thread {shown(thread_id)}"
        try:
            self.target.call(
                f"writing {what}",
                self.target.saver.put,
                _config(thread_id, ns, _parent_id(tup)),
                checkpoint,
                dict(tup.metadata),
                new_versions,
            )
            if tup.pending_writes:
                stored = self.source.get_writes(tup.config)
                at = _config(thread_id, ns, cid)
                for task_path, task_id, batch in _task_batches(stored):
                    self.target.call(
                        f"writing the writes of task {task_id} of {what}",
                        self.target.saver.put_writes,
                        at,
                        batch,
                        task_id,
                        task_path,
                    )
                self.writes += len(stored)
        except TypeError as exc:
            # LangGraph's serializer raises TypeError for a value it cannot encode.
            raise EncodeError(
                f"LangGraph's serializer could not encode a value of {what}: {exc}"
            ) from exc
        self.checkpoints += 1
        self.tick()


def _parent_id(tup: CheckpointTuple) -> str | None:
    if not tup.parent_config:
        return None
    parent = tup.parent_config["configurable"].get("checkpoint_id")
    return str(parent) if parent else None


def _names(thread_ids: Sequence[str], limit: int = 10) -> str:
    listed = ", ".join(map(shown, thread_ids[:limit]))
    more = len(thread_ids) - limit
    return listed + (f" and {more} more" if more > 0 else "")


def export_store(
    source: Any,
    target: str | os.PathLike[str],
    *,
    threads: Iterable[str] | None = None,
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    allowlist: Collection[tuple[str, ...]] = (),
    langgraph_aes_key: bytes | str | None = None,
) -> ExportSummary:
    """Write threads of a tether store into a LangGraph SqliteSaver or PostgresSaver store.

    Args:
        source: the tether store: its name (a path, ``sqlite:///path`` or
            ``postgresql://...?schema=``), which must exist, or a tether saver
            (or a :mod:`tether.langgraph` drop-in, whose tether saver is used;
            a saver is read once more to count its checkpoints). Only read.
        target: the official store: a file path or ``sqlite:///path``
            (langgraph-checkpoint-sqlite), or ``postgresql://...`` with an
            optional ``?schema=`` (langgraph-checkpoint-postgres). Created if
            missing, with the official ``setup()``.
        threads: only these thread ids (default: every thread). One the source
            does not have is a :class:`~tether.errors.CheckpointNotFound`.
        overwrite: replace the threads the target already holds; without it,
            such threads are a :class:`~tether.errors.ConfigError` naming them,
            and nothing is written.
        progress: ``progress(done, total)`` with checkpoint counts.
        allowlist: extra ``(module, name)`` types the source's values may
            have, on top of LangGraph's own.
        langgraph_aes_key: write the values encrypted by LangGraph's own
            ``EncryptedSerializer`` (AES-EAX, pycryptodome) under this key
            (16, 24 or 32 bytes, as ``LANGGRAPH_AES_KEY``), for a LangGraph
            app that reads with it. Default: in clear, as the official savers
            store by default.

    Returns:
        The counts of threads, namespaces, checkpoints and writes exported.

    Raises:
        ConfigError: a bad name, a missing store, an unknown thread, a target
            that is not an official store or already holds the threads, or a
            missing official package (the message says which to install).
        DecodeError: a stored value has a type outside the allowlist.
        EncodeError: LangGraph's serializer cannot encode a value.
        StorageError: reading the source or writing the target failed.
    """
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    dst = parse_store_url(os.fspath(target) if isinstance(target, os.PathLike) else target)
    chosen = None if threads is None else list(dict.fromkeys(str(t) for t in threads))
    src = _open_source(source, chosen, allowlist)
    try:
        if chosen is None:
            chosen = sorted(src.counts)
        unknown = [t for t in chosen if t not in src.counts]
        if unknown:
            raise CheckpointNotFound(
                f"{src.name} has no thread {_names(unknown)}; it has {len(src.counts)} "
                "thread(s)" + (f": `tether threads {src.name}` lists them" if src.url else "")
            )
        serde = None
        if langgraph_aes_key is not None:
            key = langgraph_aes_key_of(langgraph_aes_key)
            assert key is not None
            serde = langgraph_encrypted_serializer(key)
        out = _open_target(dst, serde)
        try:
            return _export(src, out, dst, chosen, overwrite, progress)
        finally:
            out.close()
    finally:
        src.close()


def _export(
    src: _Source,
    out: _Target,
    dst: StoreURL,
    chosen: list[str],
    overwrite: bool,
    progress: ProgressCallback | None,
) -> ExportSummary:
    existing = out.existing(chosen) if chosen else []
    if existing and not overwrite:
        raise ConfigError(
            f"{dst} already holds thread(s) {_names(existing)}; pass --overwrite "
            "(overwrite=True) to replace them, or leave them out"
        )
    summary = ExportSummary(src.name, str(dst), dst.kind, overwritten=existing)
    total = sum(src.counts[t] for t in chosen)
    done = 0
    if progress is not None:
        progress(0, total)

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    exporter = _Exporter(src.saver, out, tick)
    replace = set(existing)
    for thread_id in chosen:
        try:
            with out.thread_scope():
                if thread_id in replace:
                    out.call(
                        f"deleting thread {shown(thread_id)}", out.saver.delete_thread, thread_id
                    )
                summary.namespaces += exporter.thread(thread_id)
        except (DecodeError, SchemaVersionError, EncodeError, CheckpointNotFound):
            raise
        except TetherError as exc:
            exc.add_context(f"exporting thread {shown(thread_id)}")
            raise
        summary.threads += 1
        summary.thread_ids.append(thread_id)
    summary.checkpoints = exporter.checkpoints
    summary.writes = exporter.writes
    return summary

"""Import threads from LangGraph's official stores into a tether store.

LangGraph's own savers keep their data in tables of their own shape, which a
tether saver does not read (``tether import`` is the way over; a SQLite file
can hold both, tether's tables having names of their own). This module
reads those tables directly, read-only, and replays every checkpoint into any
tether saver through its public ``put``/``put_writes``:

``langgraph-checkpoint-sqlite`` (``SqliteSaver``/``AsyncSqliteSaver``)
    ``checkpoints(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
    type, checkpoint, metadata)``: the whole checkpoint, channel values
    included, as one serializer payload, metadata as JSON text;
    ``writes(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
    channel, type, value)``.
``langgraph-checkpoint-postgres`` (``PostgresSaver``/``AsyncPostgresSaver``)
    ``checkpoints(..., checkpoint JSONB, metadata JSONB)``: the checkpoint with
    the primitive channel values (str, int, float, bool, None) inline and the
    others in ``checkpoint_blobs(thread_id, checkpoint_ns, channel, version,
    type, blob)`` (type ``"empty"``: a channel with a version and no value);
    ``checkpoint_writes(..., task_id, task_path, idx, channel, type, blob)``;
    ``checkpoint_migrations(v)``.

Why the tables and not the official savers' ``list()``: their API does not
return a write's ``task_path`` (tether orders pending writes by it), the
official ``SqliteSaver`` alters and switches the journal mode of the file it
opens (an import must not write to its source), and reading the bytes here
needs neither official package installed. The payloads are LangGraph's
``JsonPlusSerializer`` bytes, whose msgpack extension format tether's
:class:`~tether.serde.MsgpackSerializer` reads; it builds only allowlisted
types, LangGraph's and langchain-core's own included
(:data:`tether.langgraph.LANGGRAPH_ALLOWLIST`), plus what ``allowlist`` adds.

What is kept: thread ids, namespaces, checkpoint ids, parent links, channel
versions (the originals, untouched), metadata, and pending writes with their
task ids, task paths and order. Checkpoints older than format v4 are migrated
as LangGraph itself migrates them on read (their ``pending_sends`` become the
``__pregel_tasks`` channel). An import is idempotent: the same ids are
overwritten, so running it again duplicates nothing.

Example::

    from tether.backends.sqlite import SqliteSaver
    from tether.importer import import_store

    with SqliteSaver("tether.db", serde=...) as target:
        summary = import_store("sqlite:///langgraph.db", target)
    print(summary.checkpoints, "checkpoints imported")

Why one long module: the two official formats (SQLite and Postgres) share
every step after reading a row (rebuilding a checkpoint, Send packets of old
formats, batching, the summary); the readers are two small classes here.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.base import BaseCheckpointSaver
from tether.checkpoint import TASKS, WRITES_IDX_MAP, make_config, thread_id_text
from tether.errors import (
    ConfigError,
    DecodeError,
    SchemaVersionError,
    StorageError,
    TetherError,
    shown,
)
from tether.serde._langgraph_aes import LangGraphAesReader
from tether.serde._langgraph_aes import langgraph_aes_key as langgraph_aes_key_of
from tether.serde.base import SerializerProtocol
from tether.stores import StoreURL, parse_store_url

__all__ = [
    "ImportSummary",
    "OfficialSource",
    "ProgressCallback",
    "StoreURL",
    "import_store",
    "open_source",
    "parse_store_url",
    "source_serializer",
]

#: ``progress(done, total)``: called once before the first checkpoint and after each one.
ProgressCallback = Callable[[int, int], None]


# --- the summary --------------------------------------------------------------------


@dataclass(slots=True)
class ImportSummary:
    """What an import copied (counts of items written; a re-run writes the same counts)."""

    source: str
    kind: str
    threads: int = 0
    namespaces: int = 0
    checkpoints: int = 0
    writes: int = 0
    thread_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The counts as a plain dict (for JSON output)."""
        return {
            "source": self.source,
            "kind": self.kind,
            "threads": self.threads,
            "namespaces": self.namespaces,
            "checkpoints": self.checkpoints,
            "writes": self.writes,
        }


# --- reading the official stores ------------------------------------------------------


@dataclass(slots=True)
class _Write:
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Any


@dataclass(slots=True)
class _Record:
    """One official checkpoint, decoded, with its pending writes in stored order."""

    ns: str
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    parent_id: str | None
    writes: list[_Write]


class OfficialSource(Protocol):
    """An official store opened for reading (:func:`open_source`); close it when done."""

    url: StoreURL
    serde: SerializerProtocol

    def thread_ids(self) -> list[str]: ...

    def count(self, thread_ids: Sequence[str]) -> int: ...

    def records(self, thread_id: str) -> Iterator[_Record]: ...

    def close(self) -> None: ...


def _decode(
    serde: SerializerProtocol,
    tag: str | None,
    data: bytes | None,
    *,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    what: str,
) -> Any:
    try:
        return serde.loads_typed((tag or "null", bytes(data) if data is not None else b""))
    except DecodeError as exc:
        raise exc.with_context(
            thread_id=thread_id, checkpoint_ns=ns or None, checkpoint_id=checkpoint_id, value=what
        ) from None


def _migrate_v3(checkpoint: dict[str, Any], sends: list[Any] | None) -> None:
    """Format < 4 kept pending sends beside the channels; LangGraph moves them on read."""
    if checkpoint.get("v", 4) >= 4:
        return
    own = checkpoint.pop("pending_sends", None)
    sends = own if own else sends
    if not sends:
        return
    versions = checkpoint.setdefault("channel_versions", {})
    checkpoint.setdefault("channel_values", {})[TASKS] = list(sends)
    # As LangGraph does: the newest version present (a value no later write reuses).
    versions[TASKS] = max(versions.values()) if versions else "1"


def _metadata(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, bytes | bytearray | memoryview):
        raw = bytes(raw).decode("utf-8")
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict):
        raise StorageError(f"checkpoint metadata is not a JSON object: {value!r}")
    return value


class _OfficialSqlite:
    """LangGraph's SqliteSaver file, opened read-only."""

    def __init__(self, url: StoreURL, serde: SerializerProtocol) -> None:
        from tether.backends.sqlite._conn import translate_errors

        self._translate = translate_errors
        self.url = url
        path = Path(url.location).expanduser()
        self.where = str(path)
        if not path.is_file():
            raise ConfigError(f"no SQLite file at {self.where}; check the source path")
        self.serde = serde
        with translate_errors(self.where):
            self.conn = sqlite3.connect(
                path.absolute().as_uri() + "?mode=ro", uri=True, check_same_thread=False
            )
        try:
            self._check()
        except BaseException:
            self.conn.close()
            raise

    def _columns(self, table: str) -> set[str]:
        rows = self.conn.execute("SELECT name FROM pragma_table_info(?)", (table,)).fetchall()
        return {r[0] for r in rows}

    def _check(self) -> None:
        with self._translate(self.where):
            cps, writes = self._columns("checkpoints"), self._columns("writes")
            tether = self._columns("tether_checkpoints")
        need_cps = {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id"}
        need_cps |= {"type", "checkpoint", "metadata"}
        # tether's tables may sit beside the official ones (their names differ
        # since tether's schema 4): only the official ones are read. A
        # `checkpoints` table with channel_versions is tether's, before schema 4.
        official = need_cps <= cps and "channel_versions" not in cps and bool(writes)
        if not official and (tether or "channel_versions" in cps):
            raise ConfigError(
                f"{self.where} is a tether store, not a LangGraph SqliteSaver file (it has no "
                "official checkpoints and writes tables); `tether import` reads LangGraph's "
                "stores (use `tether copy` within a store)"
            )
        if not official:
            raise ConfigError(
                f"{self.where} is not a LangGraph SqliteSaver store (it needs the tables "
                "checkpoints and writes of langgraph-checkpoint-sqlite)"
            )
        self.has_task_path = "task_path" in writes

    def thread_ids(self) -> list[str]:
        with self._translate(self.where):
            rows = self.conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
            ).fetchall()
        return [str(r[0]) for r in rows]

    def count(self, thread_ids: Sequence[str]) -> int:
        with self._translate(self.where):
            row = self.conn.execute(
                "SELECT count(*) FROM checkpoints WHERE thread_id IN "
                "(SELECT value FROM json_each(?))",
                (json.dumps(list(thread_ids)),),
            ).fetchone()
        return int(row[0])

    def records(self, thread_id: str) -> Iterator[_Record]:
        path_col = "task_path" if self.has_task_path else "''"
        writes_sql = (
            f"SELECT task_id, {path_col}, idx, channel, type, value FROM writes "  # noqa: S608
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
            f"ORDER BY {path_col}, task_id, idx"
        )
        with self._translate(self.where):
            rows = self.conn.execute(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
                "metadata FROM checkpoints WHERE thread_id = ? "
                "ORDER BY checkpoint_ns, checkpoint_id",
                (thread_id,),
            )
            for ns, cid, parent, tag, data, meta in rows:
                ckpt = _decode(
                    self.serde,
                    tag,
                    data,
                    thread_id=thread_id,
                    ns=ns,
                    checkpoint_id=cid,
                    what="checkpoint",
                )
                if not isinstance(ckpt, dict):
                    raise StorageError(
                        f"{self.where}: checkpoint {cid} of thread {shown(thread_id)} decoded to "
                        f"{type(ckpt).__name__}, not a checkpoint dict"
                    )
                writes = [
                    _Write(
                        str(task_id),
                        str(task_path or ""),
                        int(idx),
                        str(channel),
                        _decode(
                            self.serde,
                            wtag,
                            value,
                            thread_id=thread_id,
                            ns=ns,
                            checkpoint_id=cid,
                            what=f"write {task_id}/{channel}",
                        ),
                    )
                    for task_id, task_path, idx, channel, wtag, value in self.conn.execute(
                        writes_sql, (thread_id, ns, cid)
                    )
                ]
                _migrate_v3(ckpt, None)
                yield _Record(ns, ckpt, _metadata(meta), parent or None, writes)

    def close(self) -> None:
        self.conn.close()


_PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")

_PG_RECORDS = """
SELECT c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint, c.metadata,
       b.channels, b.types, b.blobs,
       w.task_ids, w.task_paths, w.idxs, w.channels, w.types, w.blobs
FROM {s}.checkpoints c
LEFT JOIN LATERAL (
    SELECT array_agg(bl.channel) AS channels, array_agg(bl.type) AS types,
           array_agg(bl.blob) AS blobs
    FROM jsonb_each_text(c.checkpoint -> 'channel_versions') AS v(key, value)
    JOIN {s}.checkpoint_blobs bl
      ON bl.thread_id = c.thread_id AND bl.checkpoint_ns = c.checkpoint_ns
     AND bl.channel = v.key AND bl.version = v.value
) b ON true
LEFT JOIN LATERAL (
    SELECT array_agg(cw.task_id ORDER BY {path}, cw.task_id, cw.idx) AS task_ids,
           array_agg({path} ORDER BY {path}, cw.task_id, cw.idx) AS task_paths,
           array_agg(cw.idx ORDER BY {path}, cw.task_id, cw.idx) AS idxs,
           array_agg(cw.channel ORDER BY {path}, cw.task_id, cw.idx) AS channels,
           array_agg(cw.type ORDER BY {path}, cw.task_id, cw.idx) AS types,
           array_agg(cw.blob ORDER BY {path}, cw.task_id, cw.idx) AS blobs
    FROM {s}.checkpoint_writes cw
    WHERE cw.thread_id = c.thread_id AND cw.checkpoint_ns = c.checkpoint_ns
      AND cw.checkpoint_id = c.checkpoint_id
) w ON true
WHERE c.thread_id = %s
ORDER BY c.checkpoint_ns, c.checkpoint_id
"""


class _OfficialPostgres:
    """LangGraph's PostgresSaver tables, read in read-only transactions."""

    def __init__(self, url: StoreURL, serde: SerializerProtocol) -> None:
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the postgres extra is missing
            raise ConfigError(
                f"reading {url} needs psycopg: pip install 'tether[postgres]' ({exc})"
            ) from exc
        from tether.backends.postgres._errors import connect_failed, translate
        from tether.backends.postgres._sql import check_schema_name

        self._psycopg = psycopg
        self._translate = translate
        self.url = url
        self.schema = check_schema_name(url.schema)
        self.where = f"{url} (schema {self.schema})"
        self.serde = serde
        try:
            self.conn = psycopg.connect(url.location, connect_timeout=10)
            self.conn.read_only = True
        except psycopg.Error as exc:
            # One line naming the server: an import is a one-shot run (#20.1c).
            raise connect_failed(url.location, str(url), exc) from exc
        try:
            self._check()
        except BaseException:
            self.conn.close()
            raise

    def _run(self, what: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        try:
            with self.conn.cursor() as cur:
                cur.execute(query, params)
                rows = cur.fetchall()
            self.conn.rollback()
            return rows
        except self._psycopg.Error as exc:
            self.conn.rollback()
            raise self._translate(exc, f"{what} on {self.where}") from exc

    def _check(self) -> None:
        rows = self._run(
            "reading the tables",
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = ANY(%s)",
            (self.schema, [*_PG_TABLES, "tether_migrations", "tether_checkpoints"]),
        )
        columns: dict[str, set[str]] = {}
        for table, column in rows:
            columns.setdefault(table, set()).add(column)
        if "tether_migrations" in columns and "checkpoint_migrations" not in columns:
            raise ConfigError(
                f"{self.where} holds a tether store, not LangGraph's PostgresSaver tables; "
                "`tether import` reads LangGraph's stores"
            )
        if "tether_migrations" in columns and "tether_checkpoints" not in columns:
            # A tether store from before its own table names, with LangGraph's
            # migrations table beside it: both programs wrote into the same
            # tables, and tether's rows (append tails) would be read as LangGraph's.
            raise ConfigError(
                f"{self.where}: LangGraph's PostgresSaver and a tether store older than "
                "schema version 10 share these tables, so LangGraph's rows cannot be told "
                "from tether's; open the schema with tether's PostgresSaver.setup() for how "
                "to separate them"
            )
        missing = [t for t in _PG_TABLES if t not in columns]
        if missing:
            raise ConfigError(
                f"{self.where} has no LangGraph PostgresSaver store (missing tables "
                f"{', '.join(missing)}); point the URL at the database, and ?schema= at the "
                "schema, the official saver used"
            )
        self.has_task_path = "task_path" in columns["checkpoint_writes"]

    def thread_ids(self) -> list[str]:
        rows = self._run(
            "listing threads",
            f"SELECT DISTINCT thread_id FROM {self.schema}.checkpoints ORDER BY thread_id",  # noqa: S608
        )
        return [str(r[0]) for r in rows]

    def count(self, thread_ids: Sequence[str]) -> int:
        rows = self._run(
            "counting checkpoints",
            f"SELECT count(*) FROM {self.schema}.checkpoints WHERE thread_id = ANY(%s)",  # noqa: S608
            (list(thread_ids),),
        )
        return int(rows[0][0])

    def records(self, thread_id: str) -> Iterator[_Record]:
        query = _PG_RECORDS.format(
            s=self.schema, path="cw.task_path" if self.has_task_path else "''::text"
        )
        # TASKS writes by checkpoint id, for format < 4 children (parents come first).
        sends_of: dict[str, list[Any]] = {}
        try:
            # A named (server-side) cursor: the thread streams in pages.
            with self.conn.cursor(name="tether_import") as cur:
                cur.itersize = 64
                cur.execute(query, (thread_id,))
                for row in cur:
                    record = self._record(thread_id, row)
                    sends = [w.value for w in record.writes if w.channel == TASKS]
                    if sends:
                        sends_of[record.checkpoint["id"]] = sends
                    if record.parent_id:
                        _migrate_v3(record.checkpoint, sends_of.get(record.parent_id))
                    else:
                        _migrate_v3(record.checkpoint, None)
                    yield record
        except self._psycopg.Error as exc:
            what = f"reading thread {shown(thread_id)} of {self.where}"
            raise self._translate(exc, what) from exc
        finally:
            if not self.conn.closed:
                self.conn.rollback()

    def _record(self, thread_id: str, row: Sequence[Any]) -> _Record:
        ns, cid, parent, ckpt, meta = row[:5]
        b_channels, b_types, b_blobs = row[5:8]
        w_tasks, w_paths, w_idxs, w_channels, w_types, w_blobs = row[8:14]
        if not isinstance(ckpt, dict):
            raise StorageError(
                f"{self.where}: checkpoint {cid} of thread {shown(thread_id)} is not a JSON object"
            )
        values = dict(ckpt.get("channel_values") or {})
        for channel, tag, data in zip(b_channels or (), b_types or (), b_blobs or (), strict=True):
            if tag == "empty":
                # A version with no value: the channel was cleared.
                values.pop(channel, None)
                continue
            values[channel] = _decode(
                self.serde,
                tag,
                data,
                thread_id=thread_id,
                ns=ns,
                checkpoint_id=cid,
                what=f"channel {channel}",
            )
        ckpt = {**ckpt, "channel_values": values}
        writes = [
            _Write(
                str(task_id),
                str(path or ""),
                int(idx),
                str(channel),
                _decode(
                    self.serde,
                    tag,
                    data,
                    thread_id=thread_id,
                    ns=ns,
                    checkpoint_id=cid,
                    what=f"write {task_id}/{channel}",
                ),
            )
            for task_id, path, idx, channel, tag, data in zip(
                w_tasks or (),
                w_paths or (),
                w_idxs or (),
                w_channels or (),
                w_types or (),
                w_blobs or (),
                strict=True,
            )
        ]
        return _Record(ns, ckpt, _metadata(meta), parent or None, writes)

    def close(self) -> None:
        self.conn.close()


# --- the import -------------------------------------------------------------------------


def source_serializer(allowlist: Collection[tuple[str, ...]] = ()) -> SerializerProtocol:
    """The strict serializer that reads official stores: LangGraph's types plus ``allowlist``.

    Falls back to tether's plain strict serializer when the ``langgraph``
    extra is not installed (then no langchain-core value can be built anyway).
    """
    try:
        from tether.langgraph._serde import langgraph_serializer
    except ImportError:
        from tether.serde import MsgpackSerializer

        plain: SerializerProtocol = MsgpackSerializer(allowlist=[tuple(x) for x in allowlist])
        return plain
    return langgraph_serializer(allowlist)


def _open_source(url: StoreURL, serde: SerializerProtocol) -> OfficialSource:
    if url.kind == "postgres":
        return _OfficialPostgres(url, serde)
    return _OfficialSqlite(url, serde)


def open_source(source_url: str, *, allowlist: Collection[tuple[str, ...]] = ()) -> OfficialSource:
    """Open and check the official store ``source_url`` (read only), for :func:`import_store`.

    ``tether import`` opens its source with this before it creates the target,
    so a source that is missing, not an official store or unreachable creates
    nothing. The caller closes it.

    Raises:
        ConfigError: a bad name, or not an official store.
        StorageUnavailable: the Postgres server cannot be reached.
    """
    url = parse_store_url(source_url)
    return _open_source(url, source_serializer(allowlist))


def _target(saver: Any) -> BaseCheckpointSaver:
    if isinstance(saver, BaseCheckpointSaver):
        return saver
    inner = getattr(saver, "saver", None)  # a tether.langgraph drop-in wraps one
    if isinstance(inner, BaseCheckpointSaver):
        return inner
    raise ConfigError(
        f"import_store needs a tether saver as target, got {type(saver).__name__}; "
        "open one with tether.SqliteSaver(path) or tether.PostgresSaver.from_conn_string(url)"
    )


def _batches(writes: Sequence[_Write]) -> list[list[tuple[str, Any]]]:
    """``put_writes`` batches that store one task's writes under their original indexes.

    ``put_writes`` gives an ordinary write its position in the batch as index
    and a special one (``__interrupt__``, ``__resume__``, ...) a fixed negative
    index. LangGraph often sends both kinds in one batch, so the ordinary
    writes of a task can start at 1 or have gaps; each position without an
    ordinary write is filled with one of the task's special writes (a repeat
    of one replaces it with the same value). Indexes matter beyond order: a
    resumed run writes a task's writes again, and only equal indexes make
    that a no-op instead of a second copy.
    """
    ordinary = sorted((w for w in writes if w.channel not in WRITES_IDX_MAP), key=lambda w: w.idx)
    special = [(w.channel, w.value) for w in writes if w.channel in WRITES_IDX_MAP]
    if not ordinary:
        return [special]
    idxs = [w.idx for w in ordinary]
    slots = idxs[-1] + 1 if idxs[0] >= 0 else 0
    if idxs == list(range(len(idxs))) or not special or slots - len(idxs) > 4 * len(special):
        # Dense from 0 (the usual case), or gaps nothing can fill: stored order kept.
        return [[(w.channel, w.value) for w in ordinary], *([special] if special else [])]
    at = {w.idx: (w.channel, w.value) for w in ordinary}
    fillers = iter(special * (slots // len(special) + 1))
    batch = [at[i] if i in at else next(fillers) for i in range(slots)]
    return [batch, special]


def _replay(
    target: BaseCheckpointSaver,
    thread_id: str,
    record: _Record,
    parent_versions: dict[str, Any] | None,
) -> int:
    ckpt = record.checkpoint
    versions = dict(ckpt.get("channel_versions") or {})
    config = make_config(thread_id, record.ns, record.parent_id)
    if parent_versions is None:
        new_versions = versions
    else:
        # What the LangGraph runtime passes: the channels that changed since the
        # parent, which this import has just stored. The unchanged values are
        # not encoded and written once more for every checkpoint.
        new_versions = {c: v for c, v in versions.items() if parent_versions.get(c) != v}
    target.put(config, ckpt, record.metadata, new_versions)  # type: ignore[arg-type]
    if not record.writes:
        return 0
    at = make_config(thread_id, record.ns, ckpt["id"])
    tasks: dict[tuple[str, str], list[_Write]] = {}
    for w in record.writes:
        tasks.setdefault((w.task_path, w.task_id), []).append(w)
    for (task_path, task_id), writes in tasks.items():
        for batch in _batches(writes):
            target.put_writes(at, batch, task_id, task_path)
    return len(record.writes)


def import_store(
    source_url: str | OfficialSource,
    target_saver: Any,
    *,
    threads: Iterable[str] | None = None,
    progress: ProgressCallback | None = None,
    allowlist: Collection[tuple[str, ...]] = (),
    langgraph_aes_key: bytes | str | None = None,
) -> ImportSummary:
    """Copy threads of a LangGraph SqliteSaver or PostgresSaver store into a tether saver.

    Args:
        source_url: the official store: a file path or ``sqlite:///path``
            (langgraph-checkpoint-sqlite), or ``postgresql://...`` with an
            optional ``?schema=`` (langgraph-checkpoint-postgres), or a store
            :func:`open_source` opened (left open). Read only.
        target_saver: any tether saver (or a :mod:`tether.langgraph` drop-in,
            whose tether saver is used).
        threads: only these thread ids (default: every thread). An id the
            source does not have is a :class:`~tether.errors.ConfigError`.
        progress: ``progress(done, total)`` with checkpoint counts.
        allowlist: extra ``(module, name)`` types the graphs stored (their
            schema classes), on top of LangGraph's own.
        langgraph_aes_key: the key of LangGraph's ``EncryptedSerializer``, if
            the source was written with it (default: ``LANGGRAPH_AES_KEY``);
            its values are opened with pycryptodome (the ``langgraph-aes``
            extra). The target seals them again if it encrypts.

    Returns:
        The counts of threads, namespaces, checkpoints and writes imported.

    Raises:
        ConfigError: the source is not an official store, or a thread is unknown.
        DecodeError: a stored value has a type outside the allowlist (the
            message names thread, checkpoint and value; pass ``allowlist``).
        StorageError: reading the source or writing the target failed.
    """
    target = _target(target_saver)
    extra = {tuple(x) for x in allowlist}
    extra |= set(getattr(target.serde, "allowlist", ()) or ())
    serde: SerializerProtocol = LangGraphAesReader(
        source_serializer(sorted(extra)), langgraph_aes_key_of(langgraph_aes_key)
    )
    if isinstance(source_url, str):
        url = parse_store_url(source_url)
        source = _open_source(url, serde)
        owned = True
    else:
        source, url, owned = source_url, source_url.url, False
        source.serde = serde
    try:
        available = source.thread_ids()
        if threads is None:
            chosen = available
        else:
            chosen = list(dict.fromkeys(str(t) for t in threads))
            known = set(available)
            unknown = [t for t in chosen if t not in known]
            if unknown:
                raise ConfigError(
                    f"{url} has no thread {', '.join(map(shown, unknown))}; "
                    f"it has {len(available)} thread(s)"
                    + (f", e.g. {', '.join(map(shown, available[:3]))}" if available else "")
                )
        for thread_id in chosen:
            # Before anything is written: an id longer than any backend keeps (#20.3).
            try:
                thread_id_text(thread_id, "thread id")
            except ConfigError as exc:
                raise exc.add_context(
                    f"a thread of {url}; import the others by naming them (tether import -t)"
                ) from None
        summary = ImportSummary(str(url), url.kind)
        total = source.count(chosen) if chosen else 0
        if progress is not None:
            progress(0, total)
        done = 0
        for thread_id in chosen:
            namespaces: set[str] = set()
            # Channel versions of the checkpoints of this thread stored so far.
            stored: dict[tuple[str, str], dict[str, Any]] = {}
            for record in source.records(thread_id):
                parent = stored.get((record.ns, record.parent_id or ""))
                try:
                    summary.writes += _replay(target, thread_id, record, parent)
                except TetherError as exc:
                    if not isinstance(exc, DecodeError | SchemaVersionError):
                        exc.add_context(
                            f"importing checkpoint {record.checkpoint.get('id')} of thread "
                            f"{shown(thread_id)}"
                        )
                    raise
                stored[(record.ns, record.checkpoint["id"])] = dict(
                    record.checkpoint.get("channel_versions") or {}
                )
                namespaces.add(record.ns)
                summary.checkpoints += 1
                done += 1
                if progress is not None:
                    progress(done, total)
            summary.threads += 1
            summary.namespaces += len(namespaces)
            summary.thread_ids.append(thread_id)
        return summary
    finally:
        if owned:
            source.close()

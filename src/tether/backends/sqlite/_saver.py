"""The SQLite saver (SPEC S5.2): tether's embedded default.

How each operation maps to SQL (every statement has bound parameters; the
only SQL text built at run time is the list of ``?`` placeholders and the
fixed per-filter-key clause, never a value or a key):

``put``
    one ``BEGIN IMMEDIATE`` transaction: the blobs of the channels in
    ``new_versions`` (``INSERT OR REPLACE``: a re-put under the same version
    overwrites) and the checkpoint row. A checkpoint is never visible without
    its blobs.
``put_writes``
    one transaction; special channels replace, ordinary writes are
    insert-or-ignore (S2.4).
``get_tuple``
    three queries in one read snapshot: the row, its blobs (a ``json_each``
    join over the row's ``channel_versions``), its writes.
``list``
    keyset-paged: each page of :data:`PAGE` checkpoints is three queries (rows,
    every blob the page needs, every write of the page) in one read snapshot,
    then the connection goes back to the pool and the page's checkpoints are
    decoded one at a time as the caller reaches them. Memory is bounded by one
    page of stored bytes whatever the history length, and a
    consumer that stops early holds no connection or lock.
``delete_thread`` / ``delete_for_runs`` / ``copy_thread`` / ``prune``
    set-based statements in one transaction each; blobs that no remaining
    checkpoint of the thread refers to are collected in the same transaction.

Metadata filters: the SQL narrows rows with one ``EXISTS (... json_each ...)``
per key (type and, for scalars, value), and every candidate is then checked
with :func:`~tether.backends._common.metadata_matches`, the reference
semantics, so nested values compare exactly as in every other backend.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Self

from tether.backends._bridge import ThreadedAsyncMixin
from tether.backends._common import (
    EMPTY,
    check_checkpoint,
    check_head,
    check_list_args,
    check_prune,
    check_thread_id,
    check_thread_ids,
    checkpoint_address,
    dumps_json,
    loads_json,
    merge_metadata,
    metadata_matches,
    prepare_writes,
    split_channel_values,
)
from tether.backends._delta import DEFAULT_MIN_BYTES, AppendTracker, Row, supports
from tether.backends._sqlbase import (
    BlobCodec,
    BlobKey,
    DecodeMemo,
    StoredValue,
    WriteRecord,
    build_tuple,
    decode_writes,
    group_writes,
    versions_to_json,
)
from tether.backends.sqlite._conn import ConnectionManager, Synchronous, translate_errors
from tether.backends.sqlite._schema import ensure_schema
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    StoredWrite,
)
from tether.errors import ConfigError
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol

__all__ = ["PAGE", "SqliteSaver"]

_List = list  # the saver has a method named list

# One listed checkpoint before decoding: row, versions, the page's blobs, its writes.
_Raw = tuple[
    Sequence[Any], Mapping[str, str] | None, Mapping[BlobKey, StoredValue], Sequence[WriteRecord]
]

# A tail row of a put, by its index in the put's rows: the snapshot it needs and
# the whole value to store instead when that snapshot is gone.
_Needs = tuple[int, str, Row]

#: Checkpoints per ``list`` page (one read snapshot, three queries).
PAGE = 64

#: Payloads of at least this many bytes are stored zstd-compressed by default.
DEFAULT_COMPRESS_THRESHOLD = 2048

# One statement reads a page of checkpoints with every blob and write it needs.
# A single SELECT sees one snapshot, so no explicit read transaction is needed,
# and the page costs one round of the VDBE instead of five statements. Row
# kinds: 0 checkpoint, 1 blob, 2 write (11 columns each, padded with NULL).
_READ = """
WITH p AS MATERIALIZED (
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,
           c.checkpoint, c.channel_versions, c.metadata
    FROM checkpoints AS c {where}
    ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT ?
),
k AS MATERIALIZED (
    SELECT DISTINCT p.thread_id AS t, p.checkpoint_ns AS n, j.key AS ch, j.value AS v
    FROM p, json_each(p.channel_versions) AS j
),
s AS MATERIALIZED (
    SELECT DISTINCT b.thread_id AS t, b.checkpoint_ns AS n, b.channel AS ch, b.base AS v
    FROM k CROSS JOIN checkpoint_blobs AS b
    ON b.thread_id = k.t AND b.checkpoint_ns = k.n AND b.channel = k.ch AND b.version = k.v
    WHERE b.base IS NOT NULL
)
SELECT 0, thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
       channel_versions, metadata, NULL, NULL
FROM p
UNION ALL
SELECT 1, b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value, b.encoding,
       b.base, NULL, NULL
FROM k CROSS JOIN checkpoint_blobs AS b
ON b.thread_id = k.t AND b.checkpoint_ns = k.n AND b.channel = k.ch AND b.version = k.v
UNION ALL
SELECT 1, b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value, b.encoding,
       NULL, NULL, NULL
FROM s CROSS JOIN checkpoint_blobs AS b
ON b.thread_id = s.t AND b.checkpoint_ns = s.n AND b.channel = s.ch AND b.version = s.v
UNION ALL
SELECT 2, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx,
       w.channel, w.type, w.encoding, w.value
FROM p CROSS JOIN checkpoint_writes AS w
ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
   AND w.checkpoint_id = p.checkpoint_id
"""

# One checkpoint has no duplicate blob keys: skip the DISTINCT (a temp b-tree).
_READ_ONE = (
    _READ.replace("SELECT DISTINCT p.thread_id AS t", "SELECT p.thread_id AS t")
    .replace("k AS MATERIALIZED", "k AS NOT MATERIALIZED")
    .replace("SELECT DISTINCT b.thread_id AS t", "SELECT b.thread_id AS t")
    .replace("s AS MATERIALIZED", "s AS NOT MATERIALIZED")
)
_GET_LATEST = _READ_ONE.format(where="WHERE c.thread_id = ? AND c.checkpoint_ns = ?")
_GET_BY_ID = _READ_ONE.format(
    where="WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = ?"
)


def _split(rows: Iterable[Sequence[Any]]) -> list[_Raw]:
    """The rows of one :data:`_READ` as checkpoints (newest first), each with its pieces."""
    heads: list[Sequence[Any]] = []
    blobs: dict[BlobKey, StoredValue] = {}
    writes: list[tuple[str, str, str, WriteRecord]] = []
    for r in rows:
        kind = r[0]
        if kind == 0:
            heads.append(r[1:9])
        elif kind == 1:
            blobs[(r[1], r[2], r[3], r[4])] = (r[5], r[7], r[6], r[8])
        else:
            writes.append(
                (r[1], r[2], r[3], WriteRecord(r[4], r[5], r[6], r[7], r[8], r[9], r[10]))
            )
    heads.sort(key=lambda h: (h[2], h[0], h[1]), reverse=True)
    grouped = group_writes(writes)
    return [(h, None, blobs, grouped.get((h[0], h[1], h[2]), ())) for h in heads]


# Blobs of one thread that no checkpoint of that thread refers to, directly or
# as the snapshot an append tail extends (one level: snapshots have no base).
# The subquery is materialized once (an ephemeral index), so this is one pass.
_COLLECT_BLOBS = """
DELETE FROM checkpoint_blobs WHERE thread_id = ?1
AND (checkpoint_ns, channel, version) NOT IN (
    WITH live AS MATERIALIZED (
        SELECT c.checkpoint_ns AS n, j.key AS ch, j.value AS v
        FROM checkpoints AS c, json_each(c.channel_versions) AS j WHERE c.thread_id = ?1
    )
    SELECT n, ch, v FROM live
    UNION ALL
    SELECT b.checkpoint_ns, b.channel, b.base
    FROM live CROSS JOIN checkpoint_blobs AS b
    ON b.thread_id = ?1 AND b.checkpoint_ns = live.n AND b.channel = live.ch
       AND b.version = live.v
    WHERE b.base IS NOT NULL
)
"""

_COLLECT_WRITES = (
    "DELETE FROM checkpoint_writes WHERE thread_id = ? "
    "AND (checkpoint_ns, checkpoint_id) NOT IN ("
    "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ?)"
)


def _filter_clause(key: str, want: Any) -> tuple[str, list[Any]]:
    """A necessary condition for ``metadata[key] == want`` as SQL (the value is re-checked)."""
    head = "EXISTS (SELECT 1 FROM json_each(c.metadata) AS m WHERE m.key = ? AND "
    if want is None:
        return head + "m.type = 'null')", [key]
    if want is True:
        return head + "m.type = 'true')", [key]
    if want is False:
        return head + "m.type = 'false')", [key]
    if isinstance(want, int) and not -(2**63) <= want < 2**63:
        # SQLite integers are 64-bit (json_each gives such a number as a real):
        # narrow by type only; metadata_matches compares the exact value.
        return head + "m.type IN ('integer', 'real'))", [key]
    if isinstance(want, int | float):
        return head + "m.type IN ('integer', 'real') AND m.value = ?)", [key, want]
    if isinstance(want, str):
        return head + "m.type = 'text' AND m.value = ?)", [key, want]
    if isinstance(want, list):
        return head + "m.type = 'array')", [key]
    return head + "m.type = 'object')", [key]


class SqliteSaver(ThreadedAsyncMixin, BaseCheckpointSaver):
    """Checkpoints in one SQLite file (or ``":memory:"``), from sync and async code.

    Args:
        target: a file path (created with its schema if missing), ``":memory:"``
            (a private database for tests), or an open ``sqlite3.Connection``
            (used as is and left open by :meth:`close`).
        serde: the value serializer (default: the strict MessagePack one).
        synchronous: ``"NORMAL"`` (default; every returned ``put`` survives a
            process crash, the last ones may roll back after power loss) or
            ``"FULL"`` (an fsync per write; survives power loss too).
        busy_timeout: seconds to wait for another process's write lock before
            :class:`~tether.errors.StorageTimeout`.
        compress_threshold: values of at least this many serialized bytes are
            stored zstd-compressed (when that is smaller); ``None`` disables.
        delta_threshold: lists whose serialized value has at least this many
            bytes are stored as an immutable snapshot plus the tail appended
            since (a growing message history costs a few messages per step,
            not the whole history); ``None`` stores every value whole.

    Raises:
        SchemaVersionError: the file was written by a newer tether.
        StorageError: the file is not a SQLite database, or not a tether store.

    The async methods run the sync ones in worker threads (``asyncio.to_thread``),
    so they never block the event loop; one instance serves both.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | sqlite3.Connection = ":memory:",
        *,
        serde: SerializerProtocol | UntypedSerializerProtocol | None = None,
        synchronous: Synchronous = "NORMAL",
        busy_timeout: float = 30.0,
        compress_threshold: int | None = DEFAULT_COMPRESS_THRESHOLD,
        delta_threshold: int | None = DEFAULT_MIN_BYTES,
    ) -> None:
        super().__init__(serde=serde)
        self.codec = BlobCodec(compress_threshold=compress_threshold)
        self._appends = AppendTracker.create(delta_threshold)
        self._conns = ConnectionManager(target, synchronous=synchronous, busy_timeout=busy_timeout)
        try:
            self.setup()
        except BaseException:
            self._conns.close()
            raise

    @property
    def path(self) -> str:
        """The database file (``":memory:"`` for a private in-memory database)."""
        return self._conns.path

    def setup(self) -> None:
        """Create or migrate the schema; idempotent (the constructor calls it)."""
        with self._conns.connection() as conn, self._conns.write_lock:
            ensure_schema(conn, self._conns.where, wal=self._conns.is_file)

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        import asyncio

        await asyncio.to_thread(self.setup)

    def close(self) -> None:
        """Close the connections this saver opened; idempotent."""
        self._conns.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteSaver({self._conns.where!r})"

    # --- transactions -------------------------------------------------------------

    def _write(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(conn, *args)`` in one ``BEGIN IMMEDIATE`` transaction."""
        where = self._conns.where
        with self._conns.connection() as conn, self._conns.write_lock:
            with translate_errors(where):
                conn.execute("BEGIN IMMEDIATE")
            try:
                with translate_errors(where):
                    out = fn(conn, *args)
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with translate_errors(where):
                        conn.execute("ROLLBACK")
                raise
            return out

    def _read(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(conn, *args)`` in one read snapshot."""
        where = self._conns.where
        with self._conns.connection() as conn:
            with translate_errors(where):
                conn.execute("BEGIN")
            try:
                with translate_errors(where):
                    return fn(conn, *args)
            finally:
                if conn.in_transaction:
                    with translate_errors(where):
                        conn.execute("COMMIT")

    # --- reads ----------------------------------------------------------------------

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        addr = Address.from_config(config)
        args: tuple[Any, ...]
        if addr.checkpoint_id is None:
            sql, args = _GET_LATEST, (addr.thread_id, addr.checkpoint_ns, 1)
        else:
            sql, args = _GET_BY_ID, (addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id, 1)
        found = self._query(sql, args)
        if not found:
            return None
        return self._build(*found[0])

    def get_writes(self, config: Config) -> _List[StoredWrite]:
        addr = checkpoint_address(config, "get_writes")
        # The read of get_tuple: its write rows carry task path and index.
        found = self._query(_GET_BY_ID, (addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id, 1))
        if not found:
            return []
        return decode_writes(self.serde, self.codec, addr, found[0][3])

    def _query(self, sql: str, args: Sequence[Any]) -> _List[_Raw]:
        """Run one read statement (its own snapshot) and split its rows."""
        with self._conns.connection() as conn, translate_errors(self._conns.where):
            rows = conn.execute(sql, args).fetchall()
        return _split(rows)

    def _build(
        self,
        row: Sequence[Any],
        versions: Mapping[str, str] | None,
        blobs: Mapping[BlobKey, StoredValue],
        writes: Sequence[WriteRecord],
        memo: DecodeMemo | None = None,
    ) -> CheckpointTuple:
        return build_tuple(
            self.serde,
            self.codec,
            address=Address(row[0], row[1], row[2]),
            parent_id=row[3],
            head=(row[4], row[5]),
            metadata=row[7],
            versions=versions,
            blobs=blobs,
            writes=writes,
            memo=memo,
            appends=self._appends,
        )

    def list(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # Validate now, not at the first next(), so bad input fails at the call.
        addr, want, before_id, limit = check_list_args(config, filter, before, limit)
        where: _List[str] = []
        params: _List[Any] = []
        if addr is not None:
            where.append("c.thread_id = ?")
            params.append(addr.thread_id)
            if addr.has_ns(config):
                where.append("c.checkpoint_ns = ?")
                params.append(addr.checkpoint_ns)
            if addr.checkpoint_id is not None:
                where.append("c.checkpoint_id = ?")
                params.append(addr.checkpoint_id)
        if before_id is not None:
            where.append("c.checkpoint_id < ?")
            params.append(before_id)
        for key, value in want.items():
            clause, args = _filter_clause(key, value)
            where.append(clause)
            params.extend(args)
        return self._list(where, params, want, limit)

    def _list(
        self, where: _List[str], params: _List[Any], want: dict[str, Any], limit: int | None
    ) -> Iterator[CheckpointTuple]:
        if limit == 0:
            return
        produced = 0
        cursor: tuple[str, str, str] | None = None
        while True:
            page, cursor = self._page(where, params, want, cursor)
            # The page holds stored bytes; each tuple is decoded only when it is
            # reached. Snapshots of append-encoded lists are decoded once per
            # page and their elements shared by the page's tuples.
            memo: DecodeMemo = {}
            for row, versions, blobs, writes in page:
                yield self._build(row, versions, blobs, writes, memo)
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if cursor is None:
                return

    def _page(
        self,
        where: _List[str],
        params: _List[Any],
        want: dict[str, Any],
        cursor: tuple[str, str, str] | None,
    ) -> tuple[_List[_Raw], tuple[str, str, str] | None]:
        conds = list(where)
        args = list(params)
        if cursor is not None:
            conds.append("(c.checkpoint_id, c.thread_id, c.checkpoint_ns) < (?, ?, ?)")
            args.extend(cursor)
        # Only fixed fragments are joined here; every value is a bound parameter.
        sql = _READ.format(where="WHERE " + " AND ".join(conds) if conds else "")
        args.append(PAGE)
        page = self._query(sql, args)
        next_cursor = None
        if len(page) == PAGE:
            last = page[-1][0]
            next_cursor = (last[2], last[0], last[1])
        if want:
            page = [p for p in page if metadata_matches(loads_json(p[0][7]), want)]
        return page, next_cursor

    # --- writes ---------------------------------------------------------------------

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        addr = Address.from_config(config)
        check_checkpoint(checkpoint, new_versions)
        meta = merge_metadata(config, metadata)
        head, values = split_channel_values(checkpoint, new_versions)
        serde, codec = self.serde, self.codec
        appends = self._appends if supports(serde) else None
        # Serialize before taking the write lock: it is the expensive part.
        tid, ns, cid = addr.thread_id, addr.checkpoint_ns, head["id"]
        check_head(head, cid)  # plain JSON, as on every backend
        blob_rows: _List[tuple[Any, ...]] = []
        needs: _List[_Needs] = []
        for channel, (version, value) in values.items():
            if appends is None or value is EMPTY:
                tag, encoding, payload = codec.encode(serde, value)
                blob_rows.append((tid, ns, channel, version, tag, encoding, None, payload))
                continue
            plan = appends.plan((tid, ns, channel), version, *serde.dumps_typed(value))
            for ver, tag, encoding, payload, base in codec.encode_plan(plan):
                blob_rows.append((tid, ns, channel, ver, tag, encoding, base, payload))
            if plan.needs is not None and plan.fallback is not None:
                needs.append((len(blob_rows) - 1, plan.needs, plan.fallback))
        head_type, head_bytes = serde.dumps_typed(head)
        run_id = meta.get("run_id")
        row = (
            tid,
            ns,
            cid,
            addr.checkpoint_id,
            None if run_id is None else str(run_id),
            head_type,
            head_bytes,
            versions_to_json(checkpoint["channel_versions"]),
            dumps_json(meta),
        )
        self._write(self._put, blob_rows, row, needs)
        return Address(tid, ns, cid).to_config()

    def _put(
        self,
        conn: sqlite3.Connection,
        blob_rows: _List[tuple[Any, ...]],
        row: tuple[Any, ...],
        needs: _List[_Needs],
    ) -> None:
        for i, snapshot, fallback in needs:
            # A tail extends a snapshot an earlier put of this process wrote;
            # another process may have pruned it since. Then store the whole value.
            tid, ns, channel = blob_rows[i][:3]
            found = conn.execute(
                "SELECT 1 FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND channel = ? AND version = ?",
                (tid, ns, channel, snapshot),
            ).fetchone()
            if found is None:
                assert self._appends is not None
                self._appends.forget((tid, ns, channel))
                tag, encoding, payload = self.codec.encode_bytes(fallback.tag, fallback.data)
                blob_rows[i] = (tid, ns, channel, fallback.version, tag, encoding, None, payload)
        if blob_rows:
            conn.executemany(
                "INSERT OR REPLACE INTO checkpoint_blobs "
                "(thread_id, checkpoint_ns, channel, version, type, encoding, base, value) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                blob_rows,
            )
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, run_id, type, checkpoint, channel_versions, metadata) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )

    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        addr = Address.from_config(config)
        if addr.checkpoint_id is None:
            raise ConfigError(
                f"put_writes for thread {addr.thread_id!r} needs the config of a checkpoint "
                "(configurable.checkpoint_id), as returned by put()"
            )
        rows = prepare_writes(writes, task_id, task_path)
        if not rows:
            return
        serde, codec = self.serde, self.codec
        replace: _List[tuple[Any, ...]] = []
        ignore: _List[tuple[Any, ...]] = []
        for r in rows:
            encoded = (
                addr.thread_id,
                addr.checkpoint_ns,
                addr.checkpoint_id,
                r.task_id,
                r.task_path,
                r.idx,
                r.channel,
                *codec.encode(serde, r.value),
            )
            (replace if r.replaces else ignore).append(encoded)
        self._write(self._put_writes, replace, ignore)

    @staticmethod
    def _put_writes(
        conn: sqlite3.Connection, replace: _List[tuple[Any, ...]], ignore: _List[tuple[Any, ...]]
    ) -> None:
        cols = (
            "INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
            "task_path, idx, channel, type, encoding, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        if replace:
            conn.executemany("INSERT OR REPLACE " + cols, replace)
        if ignore:
            conn.executemany("INSERT OR IGNORE " + cols, ignore)

    # --- thread operations ------------------------------------------------------------

    def _forget(self, thread_ids: Sequence[str] | None) -> None:
        """Snapshots of these threads may be gone: new tails must not extend them."""
        if self._appends is not None:
            self._appends.forget_threads(thread_ids)

    def delete_thread(self, thread_id: str) -> None:
        tid = check_thread_id(thread_id)
        self._write(self._delete_threads, [tid])
        self._forget([tid])

    @staticmethod
    def _delete_threads(conn: sqlite3.Connection, thread_ids: _List[str]) -> None:
        args = [(t,) for t in thread_ids]
        conn.executemany("DELETE FROM checkpoint_writes WHERE thread_id = ?", args)
        conn.executemany("DELETE FROM checkpoint_blobs WHERE thread_id = ?", args)
        conn.executemany("DELETE FROM checkpoints WHERE thread_id = ?", args)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = check_thread_ids(run_ids, "run_ids")
        if runs:
            self._forget(self._write(self._delete_for_runs, json.dumps(runs)))

    @staticmethod
    def _delete_for_runs(conn: sqlite3.Connection, runs: str) -> _List[str]:
        threads = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints "
                "WHERE run_id IN (SELECT value FROM json_each(?))",
                (runs,),
            )
        ]
        if not threads:
            return threads
        conn.execute(
            "DELETE FROM checkpoint_writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ("
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
            "WHERE run_id IN (SELECT value FROM json_each(?)))",
            (runs,),
        )
        conn.execute(
            "DELETE FROM checkpoints WHERE run_id IN (SELECT value FROM json_each(?))", (runs,)
        )
        conn.executemany(_COLLECT_BLOBS, [(t,) for t in threads])
        return threads

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src = check_thread_id(source_thread_id, "source_thread_id")
        dst = check_thread_id(target_thread_id, "target_thread_id")
        if src == dst:
            raise ConfigError(f"copy_thread: source and target are the same thread {src!r}")
        self._write(self._copy_thread, src, dst)

    @staticmethod
    def _copy_thread(conn: sqlite3.Connection, src: str, dst: str) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, run_id, type, checkpoint, channel_versions, metadata) "
            "SELECT ?, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, "
            "checkpoint, channel_versions, metadata FROM checkpoints WHERE thread_id = ?",
            (dst, src),
        )
        conn.execute(
            "INSERT OR REPLACE INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, "
            "version, type, encoding, base, value) SELECT ?, checkpoint_ns, channel, version, "
            "type, encoding, base, value FROM checkpoint_blobs WHERE thread_id = ?",
            (dst, src),
        )
        conn.execute(
            "INSERT OR REPLACE INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
            "task_id, task_path, idx, channel, type, encoding, value) SELECT ?, checkpoint_ns, "
            "checkpoint_id, task_id, task_path, idx, channel, type, encoding, value "
            "FROM checkpoint_writes WHERE thread_id = ?",
            (dst, src),
        )

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        n = check_prune(strategy, keep)
        tids = list(dict.fromkeys(check_thread_ids(thread_ids)))
        if not tids:
            return
        if n == 0:
            self._write(self._delete_threads, tids)
        else:
            self._write(self._prune, tids, n)
        self._forget(tids)

    @staticmethod
    def _prune(conn: sqlite3.Connection, tids: _List[str], keep: int) -> None:
        for tid in tids:
            conn.execute(
                "DELETE FROM checkpoints WHERE rowid IN (SELECT rowid FROM (SELECT rowid, "
                "row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) "
                "AS rn FROM checkpoints WHERE thread_id = ?) WHERE rn > ?)",
                (tid, keep),
            )
            conn.execute(_COLLECT_WRITES, (tid, tid))
            conn.execute(_COLLECT_BLOBS, (tid,))

    # --- maintenance ---------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Row counts and bytes on disk (``page_count * page_size``)."""

        def count(conn: sqlite3.Connection) -> dict[str, int]:
            out = {
                "checkpoints": int(conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]),
                "blobs": int(conn.execute("SELECT count(*) FROM checkpoint_blobs").fetchone()[0]),
                "writes": int(conn.execute("SELECT count(*) FROM checkpoint_writes").fetchone()[0]),
            }
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            out["bytes"] = pages * size
            return out

        result: dict[str, int] = self._read(count)
        return result

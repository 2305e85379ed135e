# GENERATED FILE: do not edit. Source: src/tether/backends/postgres/_async.py
# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.
"""The Postgres core, every saver operation over psycopg: one module per flavour.

``_async.py`` is written by hand; ``_sync.py`` is generated from it by
``tools/gen_sync.py`` (``make gen-sync``), and CI fails when it is stale.
Write code in ``_async.py`` that turns into correct sync code by dropping
``async``/``await`` and the ``Async`` prefixes; where the two must differ, an
``if True:  # ASYNC`` block holds the async code and its ``else:`` the sync
code, which the generator keeps.

The core is private: :class:`~tether.backends.postgres.PostgresSaver` holds
one core per flavour and passes its serializer on every call (so
``with_allowlist`` clones can share the cores and their pools).

Connections: from a pool, one connection per operation (one per *page* for
``list``, so an abandoned listing never pins a connection); from a single
connection, operations take turns under a lock. Every operation is either
one statement (autocommit: an implicit transaction, one round trip) or one
explicit transaction. Because each operation is idempotent (upserts,
insert-or-ignore, deletes), one that lost its pooled connection is run once
more on a fresh connection before the error reaches the caller.

Why one long module: it is the whole I/O core of one backend, each method
one saver operation of a few statements; its SQL lives in :mod:`._sql`, its
row decoding in :mod:`._codec`, and the generated sync twin must mirror it
file for file.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from threading import Lock
from typing import Any, TypeVar

import psycopg
from psycopg import Connection, Cursor, RawCursor, pq
from psycopg.rows import tuple_row
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from tether.backends._delta import AppendTracker
from tether.backends._inline import inline_value
from tether.backends._pages import DecodeMemo, page_memo
from tether.backends._records import decode_writes, encode_put, encode_writes
from tether.backends._sealing import metadata_is_current, refuse_copy, rekey_codec
from tether.backends._sqlbase import BlobCodec
from tether.backends._threads import (
    IndexPut,
    ThreadQuery,
    cursor_after,
    now_micros,
    plan_index,
    runnable_of,
    summary,
    user_metadata,
    write_bytes,
    write_hint,
)
from tether.backends._walk import (
    delta_history,
    walk_delta,
    walked_channels,
)
from tether.backends.postgres import _arrays as arrays
from tether.backends.postgres import _history as history
from tether.backends.postgres import _schema
from tether.backends.postgres._codec import (
    decode_row,
    jsonb,
    put_params,
    write_params,
    write_records,
)
from tether.backends.postgres._errors import is_retryable, translate
from tether.backends.postgres._group import Write, ordered
from tether.backends.postgres._group_sync import GroupCommit
from tether.backends.postgres._leases import (
    LeaseRegistry,
    lost_lease,
    lost_on_write,
    lost_while_taking,
    released_lease,
    unconfirmed_lease,
)
from tether.backends.postgres._raw import positional
from tether.backends.postgres._sealing import (
    SealingStatements,
    blob_updates,
    head_updates,
    meta_updates,
    stale_checkpoints,
    write_updates,
)
from tether.backends.postgres._sql import Statements
from tether.backends.postgres._sweep import SweepStatements
from tether.checkpoint import (
    Address,
    ChannelHistory,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    StoredWrite,
)
from tether.contract import (
    check_list_args,
    check_prune,
    check_thread_id,
    check_thread_ids,
    checkpoint_address,
    dumps_json,
    loads_json,
    metadata_matches,
)
from tether.encryption import Encryption
from tether.errors import (
    ConfigError,
    DecodeError,
    MigrationError,
    SchemaVersionError,
    StorageError,
    StorageUnavailable,
    TetherError,
    ThreadBusyError,
    shown,
)
from tether.serde.base import SerializerProtocol
from tether.threads import ThreadPage

__all__ = ["Lease", "_PostgresCore"]

T = TypeVar("T")
_Rows = list[tuple[Any, ...]]
_Swept = list[tuple[str, int, int]]  # (thread, checkpoints, bytes) of each thread swept


def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``; in the async core, in a worker thread: sealing a batch of rows
    again (copy_thread, rekey) is CPU work that would stall the event loop (#17)."""
    return fn(*args)


#: How often a waiting lease retries its advisory lock.
_LEASE_POLL = 0.05


def _cursor(conn: Connection[Any], binary: bool = False) -> Cursor[tuple[Any, ...]]:
    """A cursor that returns tuples, whatever the connection's row factory; a raw-query
    cursor (``$n`` placeholders, see ``_raw``) unless the connection has a cursor class
    of its own, which is kept.

    A caller's connection may be opened as LangGraph's docs do it, with
    ``row_factory=dict_row``; every row the core reads is indexed by position.
    """
    if conn.cursor_factory is Cursor:
        cur: Cursor[tuple[Any, ...]] = RawCursor(conn, row_factory=tuple_row)
        if binary:
            cur.format = pq.Format.BINARY
        return cur
    return conn.cursor(row_factory=tuple_row, binary=binary)


#: Where a connection keeps its two reusable cursors (text, binary), see :func:`_kept`.
_KEPT = "_tether_cursors"


def _kept(conn: Connection[Any], binary: bool) -> Cursor[tuple[Any, ...]] | None:
    """The raw-query cursor ``conn`` keeps for tether's one-statement operations, made
    on its first use; ``None`` when the connection has a cursor class of its own
    (statements then get a cursor of that class each, as before).

    A new cursor per statement cost a fresh adapters map and transformer, whose
    loaders were then looked up again for each column of each result (a read
    returns 22): about a fifth of a get_tuple's client instructions, 55k per
    write (callgrind, #19 goal 7). One connection runs one operation at a time
    (the pool's, or the single connection's lock), so its cursor is never shared
    by two; statements run together in one pipeline (group commit) each still
    get their own. The cursor lives as long as the connection (stored on it);
    :func:`_done` frees each result once read, so a large value is not kept.
    """
    if conn.cursor_factory is not Cursor:
        return None
    kept: list[Cursor[tuple[Any, ...]] | None] | None = vars(conn).get(_KEPT)
    if kept is None:
        kept = vars(conn)[_KEPT] = [None, None]
    cur = kept[binary]
    if cur is None:
        cur = kept[binary] = _cursor(conn, binary)
        if binary:
            # JSONB through msgspec (exact, 3-4x the json module); on the cursor,
            # so a caller's connection keeps its own loader.
            set_json_loads(loads_json, cur)
    return cur


def _done(cur: Cursor[tuple[Any, ...]]) -> None:
    """Free the result a kept cursor holds until its next statement (see :func:`_kept`)."""
    result = cur.pgresult
    if result is not None:
        result.clear()


def _send(cur: Cursor[tuple[Any, ...]], query: str, params: Any) -> None:
    """Execute ``query`` on ``cur`` (see :func:`_cursor`)."""
    if params is not None and isinstance(cur, RawCursor):
        text, args = positional(query, params)
        cur.execute(text, args)
    else:
        cur.execute(query, params)


def _execute_tuples(
    conn: Connection[Any], query: str, params: Any = None
) -> Cursor[tuple[Any, ...]]:
    """Execute on a cursor that returns tuples (see :func:`_cursor`)."""
    cur = _cursor(conn)
    _send(cur, query, params)
    return cur


class _PostgresCore:
    """Every saver operation over one psycopg connection or pool (see module doc)."""

    def __init__(
        self,
        source: Connection[Any] | ConnectionPool[Any],
        *,
        statements: Statements,
        pipeline: bool,
        prepare_threshold: int | bool | None,
        inline: bool,
        page_size: int,
        codec: BlobCodec,
        appends: AppendTracker | None = None,
        conninfo: str | None = None,
        connect_kwargs: Mapping[str, Any] | None = None,
        leases: LeaseRegistry | None = None,
        group_commit: bool = True,
    ) -> None:
        self._pool: ConnectionPool[Any] | None = None
        self._single: Connection[Any] | None = None
        if isinstance(source, ConnectionPool):
            self._pool = source
        else:
            self._single = source
        self._sql = statements
        self._sealing = SealingStatements(statements)
        self._sweeps = SweepStatements(statements)
        self._pipeline = pipeline
        # False = leave the connection's own setting alone.
        self._prepare_threshold = prepare_threshold
        self._inline = inline
        self._codec = codec
        self._appends = appends
        self._page = page_size
        self._conninfo = conninfo
        self._connect_kwargs = dict(connect_kwargs or {})
        # A pool the saver made from a URL is tether's alone: its connections
        # get the JSON loaders once. A caller's connection or pool keeps its
        # own; the loaders then go on each cursor (a fresh adapters map each).
        self._owned = conninfo is not None
        self._json_ready: weakref.WeakSet[Connection[Any]] = weakref.WeakSet()
        self._lock = Lock()
        # The saver's one registry (both cores, clones): which threads it holds
        # a lease on, so that their writes are fenced.
        self._leases = leases if leases is not None else LeaseRegistry()
        # Set by the saver's close(): every later operation, and the next page
        # of a listing already under way, raises it instead of using a resource.
        self._closed: StorageError | None = None
        self._clock = now_micros  # the thread index's times (#15)
        # Concurrent writes share a transaction once every connection is busy:
        # as many batches at once as the pool has connections (one for a
        # single connection, whose writes used to wait for its lock one by one).
        writers = 1 if self._pool is None else self._pool.max_size
        self._group = GroupCommit(writers) if group_commit else None

    def mark_closed(self, error: StorageError) -> None:
        """Refuse every operation from now on with ``error`` (the saver was closed)."""
        self._closed = error

    def _check_open(self) -> None:
        if self._closed is not None:
            raise StorageError(str(self._closed))

    # --- connections ------------------------------------------------------------------

    def _configure(self, conn: Connection[Any]) -> None:
        arrays.ensure(conn)
        if self._owned and conn not in self._json_ready:
            # JSONB through msgspec (exact, 3-4x the json module).
            set_json_loads(loads_json, conn)
            self._json_ready.add(conn)
        if self._prepare_threshold is not False and (
            conn.prepare_threshold != self._prepare_threshold
        ):
            conn.prepare_threshold = self._prepare_threshold

    def _acquire(self) -> Connection[Any]:
        """A connection for one operation; give it back with :meth:`_release`.

        The pool's ``getconn``/``putconn`` rather than its ``connection()``
        context manager, whose ``with conn:`` commits (a no-op here: every
        operation is one autocommit statement or ends its own transaction) and
        whose generator and statistics cost as much as the pool itself: 7.6 ->
        3.9 us per operation, six per LangGraph invoke (#19 goal 7). A
        connection returned inside a transaction is rolled back by the pool,
        and a broken one replaced, as before.
        """
        self._check_open()
        conn: Connection[Any]
        if self._pool is not None:
            conn = self._pool.getconn()
        else:
            assert self._single is not None
            self._lock.acquire()
            conn = self._single
        try:
            self._configure(conn)
        except BaseException:
            self._release(conn)
            raise
        return conn

    def _release(self, conn: Connection[Any]) -> None:
        if self._pool is not None:
            self._pool.putconn(conn)
        else:
            self._lock.release()

    @contextmanager
    def _raw(self) -> Iterator[Connection[Any]]:
        """A connection for one operation, without pipeline mode."""
        self._check_open()
        if self._pool is not None:
            with self._pool.connection() as conn:
                self._configure(conn)
                yield conn
        else:
            assert self._single is not None
            with self._lock:
                self._configure(self._single)
                yield self._single

    @staticmethod
    def _tx(conn: Connection[Any]) -> contextlib.AbstractContextManager[Any]:
        """The transaction a single statement needs: none in autocommit mode."""
        if conn.autocommit:
            return contextlib.nullcontext()
        return conn.transaction()

    def _why_no_connection(self) -> psycopg.OperationalError | None:
        """Why the pool hands out no connection, if it cannot connect at all.

        psycopg_pool only logs its failed attempts; the caller would see "no
        connection free in time" after ``pool_timeout`` whatever the cause. One
        direct attempt finds the real one (a wrong database name, a server
        that is down); ``None`` if it connects (the pool is just busy).
        """
        if self._pool is None:
            return None
        conninfo = self._conninfo if self._conninfo is not None else self._pool.conninfo
        pool_kwargs = self._pool.kwargs
        if not isinstance(conninfo, str) or not isinstance(pool_kwargs, dict | None):
            return None  # a pool given callables: nothing to try directly
        kwargs = {**(pool_kwargs or {}), **self._connect_kwargs}
        kwargs.setdefault("connect_timeout", 5)
        try:
            conn = Connection.connect(conninfo, **kwargs)
        except psycopg.OperationalError as exc:
            return exc
        conn.close()
        return None

    def _run(self, what: str, op: Callable[[Connection[Any]], T]) -> T:
        """Run ``op`` on a connection; translate driver errors; retry a lost pooled one once."""
        attempts = 2 if self._pool is not None else 1
        for attempt in range(attempts):
            try:
                conn = self._acquire()
                try:
                    if self._pipeline:
                        with conn.pipeline():
                            return op(conn)
                    return op(conn)
                finally:
                    self._release(conn)
            except PoolTimeout as exc:
                cause = self._why_no_connection()
                if cause is not None:
                    raise translate(cause, what) from exc
                raise translate(exc, what) from exc
            except psycopg.Error as exc:
                if attempt + 1 < attempts and is_retryable(exc):
                    # After a server restart or failover every idle connection
                    # of the pool is dead too: drop them all before the retry,
                    # or it would just take the next dead one.
                    assert self._pool is not None
                    with contextlib.suppress(Exception):
                        self._pool.check()
                    continue
                raise translate(exc, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _fetchall(self, what: str, query: str, params: Any) -> _Rows:
        def op(conn: Connection[Any]) -> _Rows:
            # Without autocommit a read opens a transaction that must end here:
            # left open, the next write's transaction() would be a savepoint in
            # it and never commit.
            with self._tx(conn):
                kept = _kept(conn, binary=True)
                if kept is not None:
                    try:
                        _send(kept, query, params)
                        return kept.fetchall()
                    finally:
                        _done(kept)
                with _cursor(conn, binary=True) as cur:
                    if not self._owned:
                        # JSONB through msgspec (exact, 3-4x the json module); only
                        # on this cursor: the caller's connection keeps its loader.
                        set_json_loads(loads_json, cur)
                    _send(cur, query, params)
                    return cur.fetchall()

        return self._run(what, op)

    def _execute(self, what: str, query: str, params: Any) -> None:
        def op(conn: Connection[Any]) -> None:
            with self._tx(conn):
                _execute_tuples(conn, query, params)

        self._run(what, op)

    def _execute_count(self, what: str, query: str, params: Any) -> int:
        """Run one write statement; the rows it changed."""

        def op(conn: Connection[Any]) -> int:
            with self._tx(conn):
                cur = _execute_tuples(conn, query, params)
                return max(cur.rowcount, 0)

        return self._run(what, op)

    # --- reads ------------------------------------------------------------------------

    def get_tuple(self, serde: SerializerProtocol, config: Config) -> CheckpointTuple | None:
        addr = Address.from_config(config, bounded=False)
        if addr.checkpoint_id is not None:
            query = self._sql.get_by_id
            params: tuple[str, ...] = (addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id)
        else:
            query = self._sql.get_latest
            params = (addr.thread_id, addr.checkpoint_ns)
        rows = self._fetchall(f"get_tuple of thread {addr.thread_id!r}", query, params)
        return decode_row(serde, self._codec, rows[0], None, self._appends) if rows else None

    def delta_history(
        self, serde: SerializerProtocol, config: Config, channels: Sequence[str]
    ) -> dict[str, ChannelHistory] | None:
        """LangGraph's ``get_delta_channel_history`` in one statement (see ``_history``)."""
        target = Address.from_config(config, bounded=False)
        names = walked_channels(channels)
        if not names:
            return names if names is None else {}
        query = self._sql.history.text(len(names), target.checkpoint_id is None)
        rows = self._fetchall(
            f"get_delta_channel_history of thread {target.thread_id!r}",
            query,
            history.params(target, names),
        )
        walked = history.Walked(rows, target, names)
        if walked.target is None:
            return {c: {"writes": []} for c in names}
        cid, parent = walked.target
        walk = walk_delta(
            target.with_id(cid),
            parent,
            names,
            walked.ancestors.get,
            lambda channel, version: walked.stored.get((channel, version)),
        )
        return delta_history(serde, self._codec, walk, walked.blobs, self._appends)

    def get_writes(self, serde: SerializerProtocol, config: Config) -> list[StoredWrite]:
        addr = checkpoint_address(config, "get_writes")
        rows = self._fetchall(
            f"get_writes of thread {addr.thread_id!r}",
            self._sql.get_writes,
            {"t": addr.thread_id, "ns": addr.checkpoint_ns, "cid": addr.checkpoint_id},
        )
        return decode_writes(serde, self._codec, addr, write_records(rows, addr))

    def list(
        self,
        serde: SerializerProtocol,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # Validated here, so bad input fails at the call, not at the first item.
        addr, want, before_id, limit = check_list_args(config, filter, before, limit)
        if self._codec.crypt is not None:
            self._codec.crypt.check_filter(want)
        only_ns = addr.checkpoint_ns if addr is not None and addr.has_ns(config) else None
        return self._sync_list(serde, addr, only_ns, want, before_id, limit)

    def _sync_list(
        self,
        serde: SerializerProtocol,
        addr: Address | None,
        only_ns: str | None,
        want: dict[str, Any],
        before_id: str | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        if limit == 0:
            return
        if addr is not None and addr.checkpoint_id is not None:
            tup = self.get_tuple(serde, addr.to_config())
            if (
                tup is not None
                and (before_id is None or addr.checkpoint_id < before_id)
                and metadata_matches(tup.metadata, want)
            ):
                yield tup
            return
        after: tuple[str, str, str] | None = None
        produced = 0
        memo: DecodeMemo = {}
        what = f"list of thread {addr.thread_id!r}" if addr else "list of every thread"
        while True:
            page = self._page if limit is None else min(self._page, limit - produced)
            q = self._sql.list_page(
                thread_id=addr.thread_id if addr else None,
                ns=only_ns,
                before_id=before_id,
                filter=want,
                after=after,
                page=page,
                jsonb=jsonb,
            )
            rows = self._fetchall(what, q.text, q.params)
            # Snapshots of append-encoded lists: decoded once per page; a
            # growing list's elements are shared by the tuples that hold them
            # (each gets its own list; records.page_memo).
            memo = page_memo(memo)
            for row in rows:
                yield decode_row(serde, self._codec, row, memo, self._appends)
            produced += len(rows)
            if len(rows) < page or (limit is not None and produced >= limit):
                return
            last = rows[-1]
            after = (last[2], last[0], last[1])

    # --- writes -----------------------------------------------------------------------

    def put(
        self,
        serde: SerializerProtocol,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        plan = encode_put(
            serde,
            self._codec,
            self._appends,
            config,
            checkpoint,
            metadata,
            new_versions,
            inline=inline_value if self._inline else None,
        )
        at = plan.address
        what = f"put of checkpoint {at.checkpoint_id} in thread {at.thread_id!r}"
        named = checkpoint["channel_versions"].keys() <= new_versions.keys()
        sql = self._sql
        epoch = self._leases.epochs.get(at.thread_id)
        if epoch is None:
            if plan.values:
                query = sql.put_named if named else sql.put
            else:
                query = sql.put_named_inline if named else sql.put_inline
        else:
            if plan.values:
                query = sql.put_named_fenced if named else sql.put_fenced
            else:
                query = sql.put_named_inline_fenced if named else sql.put_inline_fenced
        index = _index_params(plan_index(plan, checkpoint, new_versions), self._clock())
        params = {**put_params(plan, plan.values), **index}
        try:
            self._put(what, query, params, epoch)
        except TetherError as exc:
            # A tail extends a snapshot another process deleted since this one
            # wrote it: the foreign key refused the whole statement. Store the
            # whole values instead.
            if not plan.fallbacks or not isinstance(
                exc.__cause__, psycopg.errors.ForeignKeyViolation
            ):
                raise
            params = {**put_params(plan, plan.whole(self._appends, self._codec)), **index}
            self._put(what, query, params, epoch)
        return at.to_config()

    def _put(self, what: str, query: str, params: dict[str, Any], epoch: int | None) -> None:
        if epoch is not None:
            params["lease_epoch"] = epoch
        self._indexed_write(what, query, params, params["thread_id"], epoch)

    def _indexed_write(
        self, what: str, query: str, params: Any, thread_id: str, epoch: int | None
    ) -> None:
        """Run a put or put_writes statement, alone or group-committed with others.

        It also keeps the thread's index row, whose status it computes where
        that row is locked (see ``_schema.THREAD_STATUS``), so a put and a
        put_writes of one checkpoint at once agree on it. A fenced statement
        (``epoch``) returns the lease epoch it found: any other value means it
        wrote nothing. With group commit (``_group``), concurrent writes share
        a transaction when every connection is busy.
        """
        write = Write(what, query, params, thread_id, fetch=epoch is not None)
        if self._group is None:
            current = self._write_alone(write)
        else:
            current = self._group.run(write, self._write_alone, self._write_together)
        if epoch is not None and current != epoch:
            raise lost_on_write(what, thread_id, epoch, current, retried=write.attempts > 1)

    def _write_alone(self, write: Write) -> Any:
        """One write statement in its own transaction (none in autocommit); its row."""

        def op(conn: Connection[Any]) -> Any:
            write.attempts += 1
            with self._tx(conn):
                kept = _kept(conn, binary=False)
                cur = kept if kept is not None else _cursor(conn)
                try:
                    _send(cur, write.query, write.params)
                    row = cur.fetchone() if write.fetch else None
                finally:
                    if kept is not None:
                        _done(kept)
            return None if row is None else row[0]

        return self._run(write.what, op)

    def _write_together(self, batch: Sequence[Write]) -> None:
        """Run ``batch`` as one transaction in one round trip; settle each write.

        If a statement fails, the transaction rolls back and each write runs
        again alone, so that its own error reaches its caller (see ``_group``).
        """
        run_order = ordered(batch)

        def op(conn: Connection[Any]) -> Sequence[Any]:
            cursors = []
            with conn.pipeline(), conn.transaction():
                for w in run_order:
                    w.attempts += 1
                    cursors.append(_execute_tuples(conn, w.query, w.params))
            rows = []
            for w, cur in zip(run_order, cursors, strict=True):
                row = cur.fetchone() if w.fetch else None
                rows.append(None if row is None else row[0])
            return rows

        try:
            rows = self._run(f"group commit of {len(batch)} writes", op)
        except TetherError:
            for w in run_order:
                try:
                    w.settle(self._write_alone(w))
                except Exception as exc:  # its caller's, raised by Write.outcome()
                    w.settle(error=exc)
            return
        for w, row in zip(run_order, rows, strict=True):
            w.settle(row)

    def put_writes(
        self,
        serde: SerializerProtocol,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        addr, records = encode_writes(serde, self._codec, config, writes, task_id, task_path)
        params, special = write_params(addr, task_id, task_path, records)
        params["ix_now"] = self._clock()
        params["ix_bytes"] = write_bytes(w.value for w in records)
        params["ix_error"], params["ix_plain"] = write_hint(w.channel for w in records)
        what = (
            f"put_writes of task {task_id!r} at checkpoint {addr.checkpoint_id} "
            f"in thread {addr.thread_id!r}"
        )
        epoch = self._leases.epochs.get(addr.thread_id)
        if epoch is None:
            query = self._sql.put_writes if special else self._sql.put_writes_ordinary
        else:
            params["lease_epoch"] = epoch
            query = self._sql.put_writes_fenced if special else self._sql.put_writes_ordinary_fenced
        self._indexed_write(what, query, params, addr.thread_id, epoch)

    # --- thread operations --------------------------------------------------------------

    def _forget(self, thread_ids: Sequence[str] | None) -> None:
        """Snapshots of these threads may be gone: new tails must not extend them."""
        if self._appends is not None:
            self._appends.forget_threads(thread_ids)

    def delete_thread(self, thread_id: str) -> None:
        tid = check_thread_id(thread_id, bounded=False)
        self._execute(f"delete_thread {shown(tid)}", self._sql.delete_thread, {"t": tid})
        self._forget([tid])

    def _sync_sweep(self, conn: Connection[Any], threads: Sequence[str]) -> None:
        if threads:
            params = {"threads": sorted(set(threads))}
            conn.execute(self._sql.sweep_writes, params)
            conn.execute(self._sql.sweep_blobs, params)

    def delete_for_runs(
        self, run_ids: Sequence[str], serde: SerializerProtocol | None = None
    ) -> None:
        runs = check_thread_ids(run_ids, "run_ids", bounded=False)
        if not runs:
            return

        def op(conn: Connection[Any]) -> None:
            with conn.transaction():
                cur = _execute_tuples(conn, self._sql.delete_runs, {"runs": runs})
                threads = [r[0] for r in cur.fetchall()]
                self._sync_sweep(conn, threads)
                for tid in sorted(set(threads)):
                    self._sync_reindex(conn, serde, tid)
                self._forget(threads)

        self._run(f"delete_for_runs {runs!r}", op)

    def copy_thread(
        self,
        source_thread_id: str,
        target_thread_id: str,
        serde: SerializerProtocol | None = None,
    ) -> None:
        src = check_thread_id(source_thread_id, "source_thread_id", bounded=False)
        dst = check_thread_id(target_thread_id, "target_thread_id")
        if src == dst:
            raise ConfigError(f"copy_thread: source and target are the same thread {shown(src)}")
        what = f"copy_thread {shown(src)} -> {shown(dst)}"

        params = {"src": src, "dst": dst}

        def op(conn: Connection[Any]) -> None:
            with conn.transaction():
                if self._codec.crypt is not None:
                    conn.execute(self._sql.copy_thread, params)
                    self._sync_reseal_copy(conn, src, dst)
                else:
                    cur = _execute_tuples(conn, self._sealing.copy_unless_sealed, params)
                    sealed = cur.fetchone()
                    if sealed is not None and sealed[0]:
                        raise refuse_copy(src)  # rolls the copy back
                if self._sync_has_rows(conn, src):
                    index = self._sql.index_statements()
                    conn.execute(index["create"], {"thread_id": dst, "now": self._clock()})
                    self._sync_reindex(conn, serde, dst)

        self._run(what, op)

    def _sync_reseal_copy(self, conn: Connection[Any], src: str, dst: str) -> None:
        """The target's copies of sealed rows, sealed again for it (they name the source)."""
        seal, codec = self._sealing, self._codec
        params = {"src": src}
        blobs = (_execute_tuples(conn, seal.sealed_blobs, params)).fetchall()
        writes = (_execute_tuples(conn, seal.sealed_writes, params)).fetchall()
        metas = (_execute_tuples(conn, seal.sealed_meta, params)).fetchall()
        heads = (_execute_tuples(conn, seal.sealed_heads, params)).fetchall()
        crypt = codec.crypt
        assert crypt is not None
        if blobs:
            conn.execute(seal.set_blobs, _off_loop(blob_updates, codec, blobs, dst))
        if writes:
            conn.execute(seal.set_writes, _off_loop(write_updates, codec, writes, dst))
        if metas:
            conn.execute(seal.set_meta, _off_loop(meta_updates, crypt, metas, dst))
        if heads:
            conn.execute(seal.set_heads, _off_loop(head_updates, crypt, heads, dst))

    # --- rekey (#17) ---------------------------------------------------------------------

    def rekey(
        self,
        serde: SerializerProtocol,
        to: str | None,
        batch: int,
        progress: Callable[[int], None] | None,
    ) -> int:
        """One pass sealing every stale row under key ``to`` (see ``_sealing``)."""
        crypt, codec = rekey_codec(self._codec.crypt, self._codec, to)
        seal = self._sealing
        header = crypt.header()
        done = self._sync_reseal_heads(crypt, batch, progress)
        steps: list[tuple[str, str, int, Callable[[Any], dict[str, Any]]]] = [
            ("blobs", seal.swap_blobs, 4, lambda rows: blob_updates(codec, rows, None)),
            ("writes", seal.swap_writes, 5, lambda rows: write_updates(codec, rows, None)),
            (
                "checkpoints",
                seal.swap_meta,
                3,
                lambda rows: meta_updates(
                    crypt, rows, None, keep=lambda m: metadata_is_current(crypt, m)
                ),
            ),
        ]
        for table, swap, keylen, build in steps:
            first, after = seal.stale[table]
            cursor: Sequence[Any] | None = None
            what = f"rekey of {table}"
            while True:
                params: dict[str, Any] = {"header": header, "batch": batch}
                if cursor is not None:
                    params.update({f"k{i}": v for i, v in enumerate(cursor)})
                rows = self._fetchall(what, first if cursor is None else after, params)
                if not rows:
                    break
                updates = _off_loop(build, rows)
                n = self._execute_count(what, swap, updates) if updates["t"] else 0
                done += n
                if progress is not None:
                    progress(n)
                cursor = rows[-1][:keylen]
        self._forget(None)
        return done

    def _sync_reseal_heads(
        self,
        crypt: Encryption,
        batch: int,
        progress: Callable[[int], None] | None,
    ) -> int:
        """Heads whose inline values are in clear or sealed under another key: sealed
        under the active key with their metadata, a batch a statement (a head is
        replaced only if unchanged since it was read)."""
        seal = self._sealing
        first, after = seal.stale["heads"]
        cursor: Sequence[Any] | None = None
        done = 0
        while True:
            params: dict[str, Any] = {"batch": batch}
            if cursor is not None:
                params.update({f"k{i}": v for i, v in enumerate(cursor)})
            query = first if cursor is None else after
            rows = self._fetchall("rekey of heads", query, params)
            if not rows:
                return done
            updates = _off_loop(head_updates, crypt, rows, None)
            n = 0
            if updates["ht"]:
                n = self._execute_count("rekey of heads", seal.swap_heads, updates)
            done += n
            if progress is not None:
                progress(n)
            cursor = rows[-1][:3]

    def rekey_pending(self, to: str | None) -> int:
        """How many rows a rekey to ``to`` would seal again."""
        crypt, _ = rekey_codec(self._codec.crypt, self._codec, to)
        seal = self._sealing
        rows = self._fetchall("rekey count", seal.count_stale, {"header": crypt.header()})
        n = int(rows[0][0])
        rows = self._fetchall("rekey count", seal.every_checkpoint, None)
        return n + _off_loop(stale_checkpoints, crypt, rows)

    def prune(self, thread_ids: Sequence[str], *, strategy: str, keep: int) -> None:
        n = check_prune(strategy, keep)
        tids = sorted(set(check_thread_ids(thread_ids, bounded=False)))
        if not tids:
            return

        def op(conn: Connection[Any]) -> None:
            with conn.transaction():
                if n == 0:
                    conn.execute(self._sql.prune_all, {"threads": tids})
                    return
                conn.execute(self._sql.prune_checkpoints, {"threads": tids, "keep": n})
                self._sync_sweep(conn, tids)
                for tid in tids:
                    self._sync_reindex(conn, None, tid)

        self._run(f"prune ({strategy}) of threads {tids!r}", op)
        self._forget(tids)

    # --- the thread index (#15) ------------------------------------------------------

    def threads(self, query: ThreadQuery) -> ThreadPage:
        q = self._sql.threads_query(query, jsonb)
        rows = self._fetchall("threads", q.text, q.params)
        items = [
            summary(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10] or {})
            for r in rows[: query.limit]
        ]
        return ThreadPage(items, cursor_after(query, items, len(rows) > query.limit))

    def _sync_has_rows(self, conn: Connection[Any], tid: str) -> bool:
        cur = _execute_tuples(conn, self._sql.index_statements()["has_rows"], (tid,))
        row = cur.fetchone()
        return bool(row and row[0])

    def _sync_reindex(
        self, conn: Connection[Any], serde: SerializerProtocol | None, tid: str
    ) -> None:
        """Recount ``tid``'s index row from its rows, in the caller's transaction.

        When its newest root checkpoint is not the one the row names, that
        checkpoint is read back and decoded (``serde``; without one, as after a
        prune, which keeps every namespace's newest, it cannot have moved).
        """
        index = self._sql.index_statements()
        key = {"thread_id": tid}
        conn.execute(index["drop_empty"], key)
        cur = _execute_tuples(conn, index["latest"], key)
        row = cur.fetchone()
        if row is None:
            return
        conn.execute(index["recount"], key)
        if row[0] == row[1] or serde is None:
            conn.execute(index["restate"], key)
        else:
            self._sync_set_latest(conn, serde, tid, row[1])

    def _sync_set_latest(
        self, conn: Connection[Any], serde: SerializerProtocol, tid: str, cid: str | None
    ) -> None:
        """Point ``tid``'s index row at root checkpoint ``cid`` (decoded) and restate it."""
        params: dict[str, Any] = {
            "thread_id": tid,
            "latest": cid,
            "step": None,
            "ts": None,
            "metadata": "{}",
            "runnable": False,
            "known": False,
        }
        if cid is not None:
            with conn.cursor(row_factory=tuple_row, binary=True) as cur:
                if not self._owned:
                    set_json_loads(loads_json, cur)
                cur.execute(self._sql.get_by_id, (tid, "", cid))
                rows = cur.fetchall()
            tup = None
            meta: dict[str, Any] = {}
            if rows:
                meta = dict(rows[0][5] or {})
                try:
                    tup = decode_row(serde, self._codec, rows[0], None, self._appends)
                except DecodeError:
                    tup = None
            ts = tup.checkpoint.get("ts") if tup is not None else None
            params.update(
                step=dumps_json(meta.get("step")),
                ts=ts if isinstance(ts, str) else None,
                metadata=dumps_json(user_metadata(meta)),
                runnable=tup is not None and runnable_of(tup),
                known=tup is not None,
            )
        conn.execute(self._sql.index_statements()["set_latest"], params)

    def _sync_rebuild_index(self, conn: Connection[Any], serde: SerializerProtocol) -> None:
        """Read the status of the threads a migration put in the index, 64 a transaction."""
        index = self._sql.index_statements()
        while True:
            with conn.transaction():
                cur = _execute_tuples(conn, index["to_rebuild"], {"status": _schema.REBUILD})
                rows = cur.fetchall()
                for tid, latest in rows:
                    self._sync_set_latest(conn, serde, tid, latest)
            if not rows:
                return

    # --- lifecycle (#15): the sweep's primitives (SQL in _sweep.py) ----------------------

    def set_retention(self, thread_id: str, text: str | None) -> bool:
        """Store a thread's own policy (JSON; ``None`` clears it); whether the thread exists."""
        sql = self._sweeps.retention_set
        return bool(self._fetchall("set_retention", sql, (text, thread_id)))

    def get_retention(self, thread_id: str) -> Any:
        rows = self._fetchall("get_retention", self._sweeps.retention_get, (thread_id,))
        return rows[0][0] if rows else None

    def touch(self, thread_id: str, now: int) -> None:
        """A read counts as activity (``refresh_on_read``)."""
        self._execute("touch", self._sweeps.touch, {"thread": thread_id, "now": now})

    def retention_rows(self) -> _Rows:
        return self._fetchall("retention policies", self._sweeps.retention_rows, None)

    def sweep_expired(self, due: Sequence[tuple[str, int]], dry_run: bool) -> _Swept:
        """Delete the threads of ``due`` still due and not leased, in one statement."""
        params = {
            "threads": [tid for tid, _ in due],
            "cutoffs": [cutoff for _, cutoff in due],
            "schema": self._sql.schema,
        }
        sql = self._sweeps.expired_dry if dry_run else self._sweeps.expired
        rows = self._fetchall("sweep", sql, params)
        if not dry_run:
            self._forget([str(r[0]) for r in rows])
        return [(str(t), int(n), int(b)) for t, n, b in rows]

    def sweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        """``prune`` of one thread that is still idle and not leased, in one transaction
        (``dry_run``: what it would delete, read in one statement)."""
        claim = {"thread": thread_id, "before": active_before, "schema": self._sql.schema}
        if dry_run:
            found = self._fetchall(
                "sweep (dry run)", self._sweeps.prune_dry, {**claim, "keep": keep}
            )
            if not found:
                return None
            (count, size, left, left_size), *_ = found
            return int(count) - int(left), max(0, int(size) - int(left_size))

        def op(conn: Connection[Any]) -> tuple[int, int] | None:
            with conn.transaction():
                cur = _execute_tuples(conn, self._sweeps.claim, claim)
                before = cur.fetchone()
                if before is None:
                    return None
                params = {"threads": [thread_id], "keep": keep}
                conn.execute(self._sql.prune_checkpoints, params)
                self._sync_sweep(conn, [thread_id])
                self._sync_reindex(conn, None, thread_id)
                cur = _execute_tuples(conn, self._sweeps.counts, (thread_id,))
                after = cur.fetchone() or (0, 0)
            return int(before[0]) - int(after[0]), max(0, int(before[1]) - int(after[1]))

        out = self._run(f"sweep (prune) of thread {shown(thread_id)}", op)
        self._forget([thread_id])
        return out

    @contextmanager
    def sweep_lock(self) -> Iterator[bool]:
        """Whether this process may sweep now: one sweeper per schema (an advisory lock)."""
        key = (self._sweeps.lock_key,)
        if self._single is not None:
            # One connection: a session lock stays on it between operations.
            rows = self._fetchall("sweep lock", self._sweeps.try_lock, key)
            got = bool(rows and rows[0][0])
            try:
                yield got
            finally:
                if got:
                    self._fetchall("sweep unlock", self._sweeps.unlock, key)
            return
        with self._session() as conn:
            cur = _execute_tuples(conn, self._sweeps.try_lock, key)
            row = cur.fetchone()
            got = bool(row and row[0])
            try:
                yield got
            finally:
                # A lost session already dropped the lock with it.
                if got and not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute(self._sweeps.unlock, key)

    # --- schema -----------------------------------------------------------------------

    @contextmanager
    def _session(self) -> Iterator[Connection[Any]]:
        """A connection in autocommit mode for session-level work (migrations, leases).

        A URL-built saver opens a connection of its own, so a long lease never
        takes a slot of the pool its run needs.
        """
        self._check_open()
        if self._conninfo is not None:
            conn = Connection.connect(
                self._conninfo, **{**self._connect_kwargs, "autocommit": True}
            )
            with conn:
                yield conn
            return
        with self._raw() as conn:
            was = conn.autocommit
            if not was:
                conn.set_autocommit(True)
            try:
                yield conn
            finally:
                if not was and not conn.closed:
                    conn.set_autocommit(False)

    def setup(
        self,
        *,
        refuse: Callable[[Sequence[str]], TetherError] | None = None,
        import_official: Callable[[], None] | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        """Create or migrate the schema; then see to LangGraph's official store beside it.

        When the schema holds an official ``PostgresSaver`` store with
        checkpoints and tether's tables hold none (the "change one import"
        moment), ``refuse`` (if given) is called with the official tables
        found and what it returns is raised before anything is created;
        otherwise ``import_official`` (if given) runs after the migrations,
        still under the schema's migration lock, so concurrent ``setup()``
        calls import once. With neither, the official store is left alone.
        """
        key = f"tether.migrate:{self._sql.schema}"
        try:
            with self._session() as conn:
                self._sync_lock_migrations(conn, key)
                try:
                    pending = self._sync_migrate(conn, refuse)
                    if serde is not None:
                        self._sync_rebuild_index(conn, serde)
                    if pending and import_official is not None:
                        import_official()
                finally:
                    if not conn.closed:
                        conn.execute(_schema.UNLOCK, (key,))
        except psycopg.Error as exc:
            if is_retryable(exc):
                raise translate(exc, "setup") from exc
            raise MigrationError(
                f"setup of schema {self._sql.schema!r} failed ({type(exc).__name__}: {exc}); "
                "the store is at its previous version"
            ) from exc

    def _sync_lock_migrations(self, conn: Connection[Any], key: str) -> None:
        """Take the schema's migration lock, polling with ``pg_try_advisory_lock``.

        Never a blocking ``pg_advisory_lock``: a session waiting in that statement
        keeps a snapshot open, ``CREATE INDEX CONCURRENTLY`` in the holder waits
        for every older snapshot, and the two deadlock (the holder is cancelled).
        A try-lock statement ends at once, so a waiting process never holds one.
        """
        while True:
            cur = _execute_tuples(conn, _schema.TRY_LOCK, (key,))
            row = cur.fetchone()
            if row is not None and row[0]:
                return
            time.sleep(_LEASE_POLL)

    def _sync_scalar(self, conn: Connection[Any], query: str, params: Any = None) -> Any:
        cur = _execute_tuples(conn, query, params)
        row = cur.fetchone()
        return row[0] if row is not None else None

    def _sync_migrate(
        self,
        conn: Connection[Any],
        refuse: Callable[[Sequence[str]], TetherError] | None,
    ) -> bool:
        """Bring the schema to :data:`SCHEMA_VERSION`; whether an official store awaits import.

        A new schema gets the baseline (only ``tether_*`` objects, one
        transaction); an older store runs the steps after its version.
        """
        name = self._sql.schema
        schema = f'"{name}"'
        current = 0
        if self._sync_scalar(conn, _schema.MIGRATIONS_EXIST, (self._sql.migrations,)):
            found = self._sync_scalar(conn, _schema.CURRENT_VERSION.format(schema=schema))
            current = int(found or 0)
        if current > _schema.SCHEMA_VERSION:
            raise SchemaVersionError(
                f"schema {name!r} is at tether schema version {current}, newer than "
                f"version {_schema.SCHEMA_VERSION} this tether supports; upgrade tether "
                "(nothing was changed)",
                found=current,
                supported=_schema.SCHEMA_VERSION,
            )
        tables = list(_schema.OFFICIAL_TABLES)
        cur = _execute_tuples(conn, _schema.OFFICIAL_FOUND, (name, tables, tables))
        official = [str(r[0]) for r in cur.fetchall()]
        if "checkpoint_migrations" in official and 0 < current < _schema.RENAMED:
            ours = self._sync_scalar(
                conn, _schema.HAS_COLUMN, (name, "checkpoint_blobs", "encoding")
            )
            raise MigrationError(
                _schema.shared_store_message(name, current, tether_created=bool(ours))
            )
        pending = False
        if {"checkpoints", "checkpoint_migrations"} <= set(official):
            theirs = f"{schema}.checkpoints"
            if self._sync_scalar(conn, _schema.HAS_ROWS.format(table=theirs)):
                ours = current >= _schema.RENAMED and self._sync_scalar(
                    conn, _schema.HAS_ROWS.format(table=self._sql.checkpoints)
                )
                pending = not ours
        if pending and refuse is not None:
            raise refuse(official)
        if current == _schema.SCHEMA_VERSION:
            return pending
        conn.execute(_schema.CREATE_SCHEMA.format(schema=schema))
        record = _schema.RECORD.format(schema=schema)
        if current == 0:
            with conn.transaction():
                conn.execute(_schema.CREATE_MIGRATIONS.format(schema=schema))
                for statement in _schema.BASELINE:
                    conn.execute(statement.format(schema=schema))
                for version, migration in enumerate(_schema.MIGRATIONS, start=1):
                    conn.execute(record, (version, migration.name))
            return pending
        for version, migration in enumerate(_schema.MIGRATIONS, start=1):
            if version <= current:
                continue
            if migration.concurrent:
                if migration.index is not None:
                    cur = _execute_tuples(conn, _schema.INVALID_INDEX, (name, migration.index))
                    if cur.fetchone() is not None:
                        drop = _schema.DROP_INDEX.format(schema=schema, index=migration.index)
                        conn.execute(drop)
                for statement in migration.statements:
                    conn.execute(statement.format(schema=schema))
                conn.execute(record, (version, migration.name))
            else:
                with conn.transaction():
                    for statement in migration.statements:
                        conn.execute(statement.format(schema=schema))
                    conn.execute(record, (version, migration.name))
        return pending

    # --- leases -----------------------------------------------------------------------
    #
    # A lease is an advisory lock plus a fencing token (``_leases``). The lock on
    # a connection of its own (URL-built saver, or one pool connection) is a
    # *transaction* advisory lock held by a transaction kept open, idle, for the
    # run: PgBouncer in transaction mode pins a server connection to a client for
    # the length of a transaction, so the lock and its release stay on one server
    # session there too. Idle between statements in READ COMMITTED, that
    # transaction holds no snapshot and no xid (vacuum and index builds do not
    # wait for it), and it never reads a table, so it holds no table lock a
    # migration would queue behind. A server ``idle_in_transaction_session_timeout``
    # shorter than a run ends it (``Lease.check`` is a heartbeat). On a
    # caller's single connection, shared with the saver's operations, the lock is
    # a session advisory lock instead (a transaction would swallow them).
    #
    # Once the lock is held, the thread's epoch is raised (``take_lease``, on an
    # ordinary connection, committed at once) and registered, and from then on
    # every put and put_writes of the thread by this saver is the fenced
    # statement.

    @contextmanager
    def lease(
        self,
        thread_id: str,
        *,
        wait: bool,
        timeout: float | None,
    ) -> Iterator[Lease]:
        tid = check_thread_id(thread_id)
        if not self._leases.claim(tid):
            raise ThreadBusyError(
                f"thread {tid!r} is already leased by this saver; a run holds one lease per thread",
                thread_id=tid,
            )
        try:
            with self._sync_lease_lock(tid, wait, timeout) as (conn, pid):
                lease = Lease(self, tid, self._sync_take(tid, pid), pid, conn)
                self._leases.hold(tid, lease.epoch)
                try:
                    yield lease
                except BaseException:
                    lease._ended = True
                    raise
                # Confirmed while the lock is still held: once it is released the
                # next holder raises the epoch at once.
                try:
                    self._sync_confirm(lease)
                finally:
                    lease._ended = True
        finally:
            self._leases.drop(tid)

    @contextmanager
    def _sync_lease_lock(
        self,
        tid: str,
        wait: bool,
        timeout: float | None,
    ) -> Iterator[tuple[Connection[Any] | None, int]]:
        """Hold the thread's advisory lock: (the lock's own connection or None, server pid)."""
        key = self._sql.lease_key(tid)
        deadline = None if timeout is None else time.monotonic() + timeout
        what = f"lease of thread {tid!r}"
        if self._single is not None:
            pid = self._sync_acquire(None, self._sql.try_lease, key, tid, wait, deadline)
            try:
                yield None, pid
            finally:
                with contextlib.suppress(TetherError):
                    self._sync_lock_query(None, self._sql.release_lease, key, what)
            return
        try:
            session = self._session()
            conn = session.__enter__()
        except psycopg.Error as exc:
            raise translate(exc, what) from exc
        try:
            self._sync_lock_query(conn, "BEGIN", None, what)
            query = self._sql.try_xact_lease
            pid = self._sync_acquire(conn, query, key, tid, wait, deadline)
            yield conn, pid
        finally:
            # Ending the transaction releases the lock; a lost connection took it already.
            with contextlib.suppress(psycopg.Error):
                if not conn.closed:
                    conn.execute("ROLLBACK")
            with contextlib.suppress(psycopg.Error):
                session.__exit__(None, None, None)

    def _sync_lock_query(
        self, conn: Connection[Any] | None, query: str, key: str | None, what: str
    ) -> tuple[Any, ...] | None:
        """One lock statement (on ``conn``, or the single connection), errors translated."""
        params = None if key is None else (key,)
        try:
            if conn is not None:
                cur = _execute_tuples(conn, query, params)
                return cur.fetchone() if cur.description else None
            with self._raw() as single, self._tx(single):
                cur = _execute_tuples(single, query, params)
                return cur.fetchone()
        except psycopg.Error as exc:
            raise translate(exc, what) from exc

    def _sync_acquire(
        self,
        conn: Connection[Any] | None,
        query: str,
        key: str,
        tid: str,
        wait: bool,
        deadline: float | None,
    ) -> int:
        """Take the advisory lock, polling; the server pid of the session holding it."""
        what = f"lease of thread {tid!r}"
        while True:
            row = self._sync_lock_query(conn, query, key, what)
            if row is not None and row[0]:
                return int(row[1])
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                how = "" if not wait else " within the timeout"
                raise ThreadBusyError(
                    f"thread {tid!r} is leased by another run (process or machine){how}; "
                    "retry later, or pass wait=True to wait for it",
                    thread_id=tid,
                )
            time.sleep(_LEASE_POLL)

    def _lease_params(self, tid: str, pid: int) -> dict[str, Any]:
        return {"thread_id": tid, "pid": pid, "key": self._sql.lease_key(tid)}

    def _sync_take(self, tid: str, pid: int) -> int:
        """Raise the thread's epoch while the lock is held (committed at once); the new epoch."""
        what = f"lease of thread {tid!r}"
        rows = self._fetchall(what, self._sql.take_lease, self._lease_params(tid, pid))
        if not rows:
            raise lost_while_taking(tid)
        return int(rows[0][0])

    def _sync_lease_state(self, lease: Lease) -> tuple[int | None, bool]:
        """The thread's epoch now, and whether the lease's server session holds the lock."""
        what = f"lease of thread {lease.thread_id!r}"
        params = self._lease_params(lease.thread_id, lease._pid)
        try:
            rows = self._fetchall(what, self._sql.lease_state, params)
        except StorageUnavailable:
            if lease._conn is None and self._single is not None and self._single.closed:
                return None, False  # the single connection holding the session lock is gone
            raise
        current, locked = rows[0]
        return (None if current is None else int(current)), bool(locked)

    def _sync_touch(self, lease: Lease) -> bool:
        """One statement on the lease's own connection: whether its session is still there.

        It also resets the server's ``idle_in_transaction_session_timeout``.
        """
        conn = lease._conn
        if conn is None:
            return True  # the single connection: the state query runs on it
        try:
            cur = _execute_tuples(conn, "SELECT pg_backend_pid()")
            row = cur.fetchone()
        except psycopg.Error:
            return False
        return row is not None and row[0] == lease._pid

    def _sync_confirm(self, lease: Lease) -> None:
        """Raise :class:`LeaseLostError` unless ``lease`` is still held."""
        if lease._conn is not None and lease._conn.closed:
            current: int | None = None
            with contextlib.suppress(TetherError):
                current = (self._sync_lease_state(lease))[0]
            raise lost_lease(lease.thread_id, lease.epoch, current)
        try:
            current, locked = self._sync_lease_state(lease)
        except TetherError as exc:
            raise unconfirmed_lease(lease.thread_id, lease.epoch, str(exc)) from exc
        if not locked or current != lease.epoch:
            raise lost_lease(lease.thread_id, lease.epoch, current)


class Lease:
    """The lease of one thread, held for a run (``with saver.lease(t) as lease``).

    While it is held, every ``put``/``put_writes`` of the thread by the saver
    that took it (and its ``with_allowlist`` clones, sync or async) is fenced
    by :attr:`epoch`: once another run has taken the lease over, they raise
    :class:`~tether.errors.LeaseLostError` and store nothing.

    Attributes:
        thread_id: the leased thread.
        epoch: the lease's fencing token, one more than the previous holder's.
    """

    def __init__(
        self,
        core: _PostgresCore,
        thread_id: str,
        epoch: int,
        pid: int,
        conn: Connection[Any] | None,
    ) -> None:
        self.thread_id = thread_id
        self.epoch = epoch
        self._core = core
        self._pid = pid  # the server process holding the advisory lock
        self._conn = conn  # the lock's own connection (None: the saver's single one)
        self._ended = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} thread_id={self.thread_id!r} epoch={self.epoch}>"

    def is_held(self) -> bool:
        """Whether the lease still holds: its lock is held and the epoch is still this one.

        One query on one of the saver's connections. ``False`` once the
        server dropped the lock (restart, failover, ``pg_terminate_backend``,
        ``idle_in_transaction_session_timeout``, a network cut), whether or not
        another run has taken the lease since, and after the block ended.

        Raises:
            StorageUnavailable: Postgres could not be asked.
        """
        if self._ended or (self._conn is not None and self._conn.closed):
            return False
        current, locked = self._core._sync_lease_state(self)
        return locked and current == self.epoch

    def check(self) -> None:
        """Raise :class:`~tether.errors.LeaseLostError` unless the lease still holds.

        For long holders, between steps: it is also a heartbeat, a statement on
        the lease's own connection, which keeps a server
        ``idle_in_transaction_session_timeout`` from ending the lease (call it
        more often than that timeout).
        """
        if self._ended:
            raise released_lease(self.thread_id, self.epoch)
        if not self._core._sync_touch(self):
            current: int | None = None
            with contextlib.suppress(TetherError):
                current = (self._core._sync_lease_state(self))[0]
            raise lost_lease(self.thread_id, self.epoch, current)
        self._core._sync_confirm(self)


def _index_params(index: IndexPut, now: int) -> dict[str, Any]:
    """The thread index's parameters of a put statement (``ix_*``, see ``_sql``)."""
    return {
        "ix_now": now,
        "ix_bytes": index.bytes,
        "ix_root": index.root,
        "ix_ts": index.ts,
        "ix_runnable": index.runnable,
        "ix_candidates": list(index.candidates),
    }

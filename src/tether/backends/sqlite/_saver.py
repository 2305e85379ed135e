"""The SQLite saver (SPEC S5.2): tether's embedded default.

How each operation maps to SQL (the statements are in :mod:`._sql`; every one
has bound parameters, and the only SQL text built at run time is the WHERE
clause joined from fixed fragments, never a value or a key):

``put``
    one ``BEGIN IMMEDIATE`` transaction: the blobs of the channels in
    ``new_versions`` (``INSERT OR REPLACE``: a re-put under the same version
    overwrites) and the checkpoint row. A checkpoint is never visible without
    its blobs. The channels it carries over from earlier puts (named in
    ``channel_versions``, not in ``new_versions``) are looked up in the same
    transaction; those without a stored value are recorded in the row's
    ``unstored`` column (they read as absent; any other missing value is a
    ``StorageError``), and one its parent had is refused as lost. The row
    carries a checksum of its content (:func:`~tether.backends._sqlbase.row_checksum`),
    verified by every read before anything in it is used.
``put_writes``
    one transaction; special channels replace, ordinary writes are
    insert-or-ignore (S2.4).
``get_tuple``
    one statement (a single SELECT is its own snapshot): the row, its blobs (a
    ``json_each`` join over the row's ``channel_versions``) and the snapshots
    their append tails extend, its writes (:func:`._sql.read_statement`).
    A small state is its row alone (#19): the read first fetches the row and
    whether write rows exist (``HEAD_*``); a row that names no value row and
    has no writes (by its count and by the rows) is the whole checkpoint, and
    anything else is read again with the one statement above. A thread read
    that way is remembered (a bounded hint) and its next read skips the probe.
``list``
    keyset-paged: each page of :data:`PAGE` checkpoints is one such statement
    (rows, every blob the page needs, every write of the page), then the
    connection goes back to the pool and the page's checkpoints are
    decoded one at a time as the caller reaches them. Memory is bounded by one
    page of stored bytes whatever the history length, and a
    consumer that stops early holds no connection or lock.
``delete_thread`` / ``delete_for_runs`` / ``copy_thread`` / ``prune``
    set-based statements in one transaction each; blobs that no remaining
    checkpoint of the thread refers to are collected in the same transaction.

Metadata filters: the SQL narrows rows with one ``EXISTS (... json_each ...)``
per key (type and, for scalars, value), and every candidate is then checked
with :func:`~tether.contract.metadata_matches`, the reference
semantics, so nested values compare exactly as in every other backend. (A row
whose metadata was damaged so that SQL no longer matches it is not seen by a
filtered listing; every row a read returns or filters in Python is verified.)

When a statement fails on a stored column that is not JSON, the failing row
is found (:func:`._rows.find_bad_json`) and named, as a ``DecodeError`` or,
when its checksum says it was changed, a ``StorageError``.

Why one long module: it is one class, the saver, whose methods each map one
contract operation to its transaction; the SQL is in :mod:`._sql`, the
connections in :mod:`._conn`, the schema in :mod:`._schema` and the records
in :mod:`tether.backends._records`.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import shlex
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import ormsgpack
import xxhash

from tether.backends._bridge import ThreadedAsyncMixin
from tether.backends._delta import DEFAULT_MIN_BYTES, AppendTracker
from tether.backends._inline import head_inline, inline_rule, with_inline
from tether.backends._pages import DecodeMemo, page_memo
from tether.backends._payload import CHECKSUM, DEFAULT_MAX_VALUE_SIZE
from tether.backends._records import (
    BlobKey,
    PutPlan,
    StoredValue,
    ValueRecord,
    WriteRecord,
    assemble,
    assemble_inline,
    check_carried,
    decode_writes,
    encode_put,
    encode_writes,
)
from tether.backends._sealing import carried_from_envelope, rekey_codec
from tether.backends._sqlbase import (
    BlobCodec,
    metadata_from_json,
    row_checksum,
    value_checksum,
    versions_to_json,
    write_checksum,
)
from tether.backends._threads import (
    IndexPut,
    check_threads_args,
    now_micros,
    plain_step_and_user,
    plan_index,
    write_bytes,
)
from tether.backends._walk import (
    delta_history,
    walk_delta,
    walked_channels,
)
from tether.backends.sqlite import _history as history
from tether.backends.sqlite import _index
from tether.backends.sqlite._conn import (
    MEMORY,
    BadJSON,
    ConnectionManager,
    Synchronous,
    translate_errors,
)
from tether.backends.sqlite._rows import (
    check_row,
    check_value_row,
    check_write_count,
    check_write_row,
    find_bad_json,
    row_unstored,
)
from tether.backends.sqlite._schema import (
    IMPORT_KEY,
    IMPORT_STARTED,
    REBUILD,
    FileState,
    check_readable,
    ensure_schema,
    file_state,
)
from tether.backends.sqlite._sealing import count_pending, rekey_batches, reseal_copy
from tether.backends.sqlite._sql import (
    CARRIED_STORED,
    COLLECT_BLOBS,
    COLLECT_WRITES,
    COPY_BLOBS,
    COPY_CHECKPOINTS,
    COPY_WRITES,
    COUNT_WRITES,
    DELETE_FOR_RUNS,
    DELETE_THREAD,
    GET_BY_ID,
    GET_LATEST,
    HAS_BLOB,
    HEAD_BY_ID,
    HEAD_LATEST,
    INDEX_PUT,
    INDEX_PUT_FAST,
    INDEX_TO_REBUILD,
    INDEX_TOUCH,
    INDEX_WRITES,
    INDEX_WRITES_FAST,
    INLINE_AT,
    INSERT_BLOB,
    INSERT_CHECKPOINT,
    INSERT_WRITE_IGNORE,
    INSERT_WRITE_REPLACE,
    PARENT_PROMISE,
    PRUNE,
    THREADS_OF_RUNS,
    read_statement,
)
from tether.backends.sqlite._sweep import SweepMixin
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    Address,
    ChannelHistory,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    StoredWrite,
    address_fields,
)
from tether.contract import (
    EMPTY_TAG,
    check_list_args,
    check_prune,
    check_thread_id,
    check_thread_ids,
    checkpoint_address,
    dumps_json,
    loads_json,
    metadata_matches,
)
from tether.encryption import Encryption, encryption_from, in_envelope
from tether.errors import ConfigError
from tether.lifecycle import Retention
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol
from tether.stores import sqlite_path
from tether.threads import ThreadOrder, ThreadPage

__all__ = ["PAGE", "SqliteSaver"]

_List = list  # the saver has a method named list
_packb = ormsgpack.packb
_xxh3 = xxhash.xxh3_64_intdigest

# One listed checkpoint before decoding: row, versions, the page's blobs, its writes.
_Raw = tuple[
    Sequence[Any], Mapping[str, str] | None, Mapping[BlobKey, StoredValue], Sequence[WriteRecord]
]


#: Checkpoints per ``list`` page (one statement, its own read snapshot).
PAGE = 64

#: Payloads of at least this many bytes are stored zstd-compressed by default.
DEFAULT_COMPRESS_THRESHOLD = 2048


_HEAD_ORDER = operator.itemgetter(2, 0, 1)  # checkpoint id, thread, namespace
_WRITE_ORDER = operator.itemgetter(1, 0, 2)  # WriteRecord's task_path, task_id, idx
_new_write = tuple.__new__  # WriteRecord from a slice of a row, without a Python __new__
_MASK64 = (1 << 64) - 1


#: Threads remembered as read with the full statement (a hint; cleared when full).
_WIDE_MAX = 4096


def _alone(row: Sequence[Any]) -> bool:
    """Whether a checkpoint row (``HEAD_*``'s columns: ``CHECKPOINT_COLUMNS`` and
    whether write rows exist) is the whole checkpoint: no value row to join
    (``channel_versions`` empty), no pending write recorded nor stored."""
    return bool(row[6] == "{}" and row[10] == 0 and not (len(row) > 11 and row[11]))


def _json_object(text: Any) -> Any:
    """A stored JSON column decoded, or ``None`` where it is not JSON (the caller then
    goes the way that names the row)."""
    try:
        return loads_json(text)
    except (ValueError, TypeError):
        return None


def _split(rows: Iterable[Sequence[Any]], where: str) -> list[_Raw]:
    """The rows of one read statement as checkpoints (newest first), each with its pieces.

    Every checkpoint row is checked against its checksum before anything in it
    (its metadata for a filter included) is trusted.
    """
    heads: list[Sequence[Any]] = []
    blobs: dict[BlobKey, StoredValue] = {}
    grouped: dict[tuple[str, str, str], list[WriteRecord]] = {}
    for r in rows:
        kind = r[0]
        if kind == 0:
            head = r[1:12]
            check_row(head, where)
            heads.append(head)
        elif kind == 1:
            if r[9] is not None:
                check_value_row(r, where)
            blobs[(r[1], r[2], r[3], r[4])] = (r[5], r[7], r[6], r[8])
        else:
            # The row checksum (write_checksum's bytes) computed here, not in two
            # calls per row: a listing verifies every write row it returns (#19).
            # A mismatch, or a column of another type, is named by check_write_row.
            if r[11] is not None:
                try:
                    payload, enc = r[10], r[9]
                    digest = b"" if payload is None else payload[:4] if enc & CHECKSUM else payload
                    data = _packb((r[3], r[4], r[5], r[6], r[7], r[8], enc, bytes(digest)))
                    ok = _xxh3(data) == r[11] & _MASK64
                except (TypeError, ValueError):
                    ok = False
                if not ok:
                    check_write_row(r, where)
            key = (r[1], r[2], r[3])
            rec = _new_write(WriteRecord, r[4:11])  # the row's fields, in WriteRecord's order
            bucket = grouped.get(key)
            if bucket is None:
                grouped[key] = [rec]
            else:
                bucket.append(rec)
    heads.sort(key=_HEAD_ORDER, reverse=True)
    for bucket in grouped.values():
        if len(bucket) > 1:
            bucket.sort(key=_WRITE_ORDER)  # the contract's: (task_path, task_id, idx)
    out: list[_Raw] = []
    for h in heads:
        found = grouped.get((h[0], h[1], h[2]), ())
        check_write_count(h, len(found), where)
        out.append((h, None, blobs, found))
    return out


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


class SqliteSaver(SweepMixin, ThreadedAsyncMixin, BaseCheckpointSaver):
    """Checkpoints in one SQLite file (or ``":memory:"``), from sync and async code.

    Args:
        target: a file path or ``sqlite:///path`` (created with its schema if
            missing), ``":memory:"``
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
        read_only: open an existing store to read it only: the file is opened
            ``mode=ro``, never migrated nor switched to WAL, and every write
            method raises :class:`~tether.errors.ConfigError`.
        import_official: what to do with a file that holds LangGraph's own
            SqliteSaver tables (``checkpoints``, ``writes``) with checkpoints,
            and no tether checkpoints. ``None`` (default): raise
            :class:`~tether.errors.ConfigError` naming them and the command that
            brings their threads over (``tether import PATH PATH``), rather than
            start an empty history beside them. ``True``: import them into
            tether's tables now (idempotent; an interrupted import is finished
            by the next open with ``True``). ``False``: leave them alone, the
            two histories side by side in one file.
        max_value_size: the largest serialized value stored or read back, in
            bytes (1 GiB by default): a larger one is an
            :class:`~tether.errors.EncodeError` on write, and a stored one that
            declares more (a tampered compressed value) a
            :class:`~tether.errors.StorageError` on read.
        inline_primitives: keep small str/int/float/bool/None channel values
            (:func:`~tether.backends._inline.inline_value`) in the checkpoint
            row's JSON head instead of a value row each, as the Postgres saver
            does: a small state is one row. ``None`` (default): when the
            serializer is tether's MessagePack one; inline values never pass
            through the serializer, so one of your own (that encrypts, say)
            sees every value unless this is ``True``. With ``encryption``
            each is sealed where it is kept, in the head.
        encryption: seal every value, pending write and metadata with
            AES-256-GCM (:class:`~tether.encryption.Encryption`, or
            ``{key_id: key}``); ``None`` (default): the keys of
            ``TETHER_KEYS`` if set; ``False``: off. See ``docs/encryption.md``.
        retention: the :class:`~tether.lifecycle.Retention` that :meth:`sweep`
            applies (``None``: keep everything). New files are created with
            incremental auto-vacuum, so a sweep gives its freed pages back to
            the file system; :meth:`vacuum` converts an older file once.
        sweep_interval: run :meth:`sweep` every this many seconds in a
            background thread until :meth:`close` (``None``, the default: off;
            see :mod:`tether._sweeper`).

    Raises:
        ConfigError: official tables to import (see ``import_official``), or
            ``read_only`` on a file that is missing or holds no tether store.
        SchemaVersionError: the file was written by a newer tether, its tables
            are not those of the version its header records, or (``read_only``)
            it needs a migration.
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
        read_only: bool = False,
        import_official: bool | None = None,
        max_value_size: int = DEFAULT_MAX_VALUE_SIZE,
        inline_primitives: bool | None = None,
        encryption: Encryption | Mapping[str, bytes | str] | bool | None = None,
        retention: Retention | None = None,
        sweep_interval: float | None = None,
    ) -> None:
        super().__init__(serde=serde, retention=retention)
        if import_official is not None and not isinstance(import_official, bool):
            raise ConfigError(
                f"import_official must be None, True or False, got {import_official!r}"
            )
        if read_only is True and import_official:
            raise ConfigError("import_official=True writes to the file; it needs read_only=False")
        self._crypt = encryption_from(encryption)
        self.codec = BlobCodec(
            compress_threshold=compress_threshold, max_value_size=max_value_size, crypt=self._crypt
        )
        self._inline = inline_rule(self.serde, inline_primitives)
        if isinstance(target, str) and (path := sqlite_path(target)) is not None:
            target = path  # sqlite:///chat.db, the name the CLI prints
        self._appends = AppendTracker.create(delta_threshold)
        # Threads whose latest read needed value rows or writes (get_tuple reads them
        # with the full statement at once, not after probing their row alone).
        self._wide: dict[str, None] = {}
        self._clock = now_micros  # the thread index's times (#15)
        self._conns = ConnectionManager(
            target, synchronous=synchronous, busy_timeout=busy_timeout, read_only=read_only
        )
        self.read_only = read_only
        try:
            self._open(import_official)
        except BaseException:
            self._conns.close()
            raise
        if sweep_interval is not None:
            self._check_writable("sweep_interval")
        self._start_sweeper(sweep_interval)

    @property
    def path(self) -> str:
        """The database file (``":memory:"`` for a private in-memory database)."""
        return self._conns.path

    def _open(self, import_official: bool | None) -> None:
        with self._conns.connection() as conn:
            state = file_state(conn, self._conns.where)
        # The official tables hold threads tether has not got yet.
        pending = state.official_rows and (not state.tether_rows or state.import_started)
        if pending and import_official is None:
            raise ConfigError(self._official_message(state))
        self.setup()
        if pending and import_official:
            self._import_official()

    def _import_command(self) -> str:
        path = shlex.quote(self._conns.path)
        return f"tether import {path} {path}"

    def _official_message(self, state: FileState) -> str:
        where = self._conns.where
        if state.import_started:
            return (
                f"{where} holds LangGraph's SqliteSaver tables (checkpoints, writes) and an "
                "import of their threads into tether's tables that did not finish. Finish it "
                f"with `{self._import_command()}`, or open the saver with import_official=True"
            )
        with self._conns.connection() as conn, translate_errors(where):
            n, threads = conn.execute(
                "SELECT count(*), count(DISTINCT thread_id) FROM checkpoints"
            ).fetchone()
        return (
            f"{where} holds LangGraph's SqliteSaver tables checkpoints and writes "
            f"({n} checkpoint(s) of {threads} thread(s)) and no tether checkpoints; opening it "
            "would start an empty history beside them. Bring the threads over into tether's "
            f"tables in the same file with `{self._import_command()}` (the official tables "
            "stay as they are), or open the saver with import_official=True to import them "
            "now, or import_official=False to keep the two histories apart"
        )

    def _import_official(self) -> None:
        """Import the official tables of this file into tether's (see ``import_official``)."""
        from tether.importer import import_store

        if self._conns.path in ("", MEMORY):
            raise ConfigError(
                "import_official=True needs a database file to read the official tables "
                f"from; {self._conns.where} has none"
            )
        # Marked first, cleared last: an import that stops half-way (an error,
        # a crash) is not taken for a finished one by the next open.
        self._write(self._set_meta, IMPORT_KEY, IMPORT_STARTED)
        import_store(self._conns.path, self)
        self._write(self._set_meta, IMPORT_KEY, None)

    @staticmethod
    def _set_meta(conn: sqlite3.Connection, key: str, value: str | None) -> None:
        if value is None:
            conn.execute("DELETE FROM tether_meta WHERE key = ?", (key,))
        else:
            conn.execute(
                "INSERT OR REPLACE INTO tether_meta (key, value) VALUES (?, ?)", (key, value)
            )

    def setup(self) -> None:
        """Create or migrate the schema; idempotent (the constructor calls it).

        A read-only saver only checks that the store is of the current version.
        """
        with self._conns.connection() as conn:
            if self.read_only:
                check_readable(conn, self._conns.where)
                return
            with self._conns.write_lock:
                ensure_schema(conn, self._conns.where, wal=self._conns.is_file)
        self._rebuild_index()

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        await asyncio.to_thread(self.setup)

    def close(self) -> None:
        """Close the connections this saver opened; idempotent.

        Operations running in other threads finish, or raise
        :class:`~tether.errors.StorageError` if they are still running a few
        seconds later (they are interrupted then); every operation that
        starts afterwards raises ``StorageError``. A connection is never
        closed under an operation that uses it.
        """
        self._stop_sweeper()
        self._conns.close()

    async def aclose(self) -> None:
        """Async :meth:`close` (it may wait for operations in flight: not on the event loop)."""
        await asyncio.to_thread(self.close)

    def __repr__(self) -> str:
        return f"SqliteSaver({self._conns.where!r})"

    # --- transactions -------------------------------------------------------------

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ConfigError(
                f"{what}: the saver on {self._conns.where} was opened with read_only=True; "
                "open it without read_only to write"
            )

    def _write(
        self,
        fn: Any,
        *args: Any,
        threads: Sequence[str] | None = None,
        autocheckpoint: bool = True,
    ) -> Any:
        """Run ``fn(conn, *args)`` in one ``BEGIN IMMEDIATE`` transaction.

        ``threads``: the threads it reads, where a damaged JSON column is looked for first.
        ``autocheckpoint=False`` (a sweep's transactions, which write many
        pages): its COMMIT does not copy the WAL into the file (SQLite does so
        in the COMMIT that takes the WAL past ``wal_autocheckpoint`` pages,
        under the write lock); a PASSIVE checkpoint does, right after the lock
        is released. Writers go on meanwhile, and one whose COMMIT would
        checkpoint finds this one running and leaves it (SQLITE_BUSY, at once).
        """
        self._check_writable("writing")
        where = self._conns.where
        with self._conns.connection() as conn:
            if autocheckpoint:
                return self._write_on(conn, fn, args, threads)
            with translate_errors(where):
                pages = int(conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            try:
                out = self._write_on(conn, fn, args, threads)
                if self._conns.is_file:
                    with translate_errors(where):
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                return out
            finally:
                with translate_errors(where):
                    conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")

    def _write_on(
        self, conn: sqlite3.Connection, fn: Any, args: Any, threads: Sequence[str] | None
    ) -> Any:
        where = self._conns.where
        with self._conns.write_lock:
            if self._conns.closed:  # closed while this thread waited for the lock
                raise self._conns.closed_error()
            with translate_errors(where):
                conn.execute("BEGIN IMMEDIATE")
            try:
                with translate_errors(where):
                    out = fn(conn, *args)
                    conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with translate_errors(where):
                        conn.execute("ROLLBACK")
                if isinstance(exc, BadJSON):
                    self._raise_bad_json(conn, exc, threads)
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

    def _raise_bad_json(
        self, conn: sqlite3.Connection, exc: BadJSON, threads: Sequence[str] | None
    ) -> None:
        """Raise the error naming the row whose JSON column broke a statement, if found."""
        with translate_errors(self._conns.where):
            found = find_bad_json(conn, self._conns.where, threads)
        if found is not None:
            raise found from exc

    # --- reads ----------------------------------------------------------------------

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        # the three strings, without an Address (whose frozen construction costs as much)
        tid, ns, cid = address_fields(config, bounded=False)
        args: tuple[Any, ...]
        # The checkpoint row first: a small state whose values are all inline in
        # it and that has no pending writes is that row alone (#19). Otherwise
        # the one statement that also reads its value rows and writes.
        if cid is None:
            head, sql, args = HEAD_LATEST, GET_LATEST, (tid, ns, 1)
        else:
            head, sql = HEAD_BY_ID, GET_BY_ID
            args = (tid, ns, cid, 1)
        # A thread whose last read needed more than its row skips the probe.
        wide = self._wide
        rows = None if tid in wide else self._fetch(head, args[:-1], [tid])
        if rows is not None and not rows:
            return None
        raw: _Raw
        if rows is not None and _alone(rows[0]):
            check_row(rows[0], self._conns.where)
            raw = (rows[0], None, {}, ())
        else:
            found = self._query(sql, args, [tid])
            if not found:  # none (or deleted since the probe)
                return None
            raw = found[0]
            if not _alone(raw[0]) or raw[3]:
                if len(wide) >= _WIDE_MAX:
                    wide.clear()
                wide[tid] = None
            else:
                wide.pop(tid, None)
        if self._refresher is not None:
            self._after_read(tid)
        return self._build(*raw)

    def get_writes(self, config: Config) -> _List[StoredWrite]:
        addr = checkpoint_address(config, "get_writes")
        # The read of get_tuple: its write rows carry task path and index.
        found = self._query(
            GET_BY_ID, (addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id, 1), [addr.thread_id]
        )
        if not found:
            return []
        return decode_writes(self.serde, self.codec, addr, found[0][3])

    def _query(self, sql: str, args: Sequence[Any], threads: Sequence[str] | None) -> _List[_Raw]:
        """Run one read statement (its own snapshot) and split its rows."""
        return _split(self._fetch(sql, args, threads), self._conns.where)

    def _fetch(
        self, sql: str, args: Sequence[Any], threads: Sequence[str] | None
    ) -> _List[Sequence[Any]]:
        """The rows of one read statement (its own snapshot)."""
        return self._conns.fetch(
            sql, args, lambda conn, exc: self._raise_bad_json(conn, exc, threads)
        )

    def delta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        """One statement, a recursive walk of the parent links (:mod:`._history`).

        ``None`` (LangGraph walks ``get_tuple`` instead) for more channels than
        one statement walks, or a name no row can hold.
        """
        target = Address.from_config(config, bounded=False)
        names = walked_channels(channels)
        if not names:
            return names if names is None else {}
        tid = target.thread_id
        sql = history.statement(
            tuple(history.path_safe(c) for c in names), target.checkpoint_id is None
        )
        args = history.params(tid, target.checkpoint_ns, target.checkpoint_id, names)
        walked = history.Walked(self._fetch(sql, args, [tid]), names, self._conns.where)
        head = walked.target
        if head is None:
            return {c: {"writes": []} for c in names}
        walk = walk_delta(
            Address(head[0], head[1], head[2]),
            head[3],
            names,
            walked.ancestors.get,
            lambda channel, version: walked.stored.get((channel, version)),
        )
        return delta_history(self.serde, self.codec, walk, walked.blobs, self._appends)

    def _build(
        self,
        row: Sequence[Any],
        versions: Mapping[str, str] | None,
        blobs: Mapping[BlobKey, StoredValue],
        writes: Sequence[WriteRecord],
        memo: DecodeMemo | None = None,
    ) -> CheckpointTuple:
        if row[6] == "{}" and type(meta := _json_object(row[7])) is dict:
            # no value row: every value is inline (or absent)
            fast = assemble_inline(
                self.serde,
                self.codec,
                row=row,
                metadata=meta,
                writes=writes,
                unstored=row_unstored(row),
            )
            if fast is not None:
                return fast
        address = Address(row[0], row[1], row[2])
        return assemble(
            self.serde,
            self.codec,
            address=address,
            parent_id=row[3],
            head=(row[4], row[5]),
            metadata=metadata_from_json(row[7], address=address),
            versions=versions,
            blobs=blobs,
            writes=writes,
            memo=memo,
            appends=self._appends,
            unstored=row_unstored(row),
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
        if self._crypt is not None:
            self._crypt.check_filter(want)
        where: _List[str] = []
        params: _List[Any] = []
        threads: _List[str] | None = None
        every_ns = False
        if addr is not None:
            threads = [addr.thread_id]
            every_ns = not addr.has_ns(config)
            where.append("c.thread_id = ?")
            params.append(addr.thread_id)
            if not every_ns:
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
        return self._list(where, params, want, limit, threads, every_ns)

    def _list(
        self,
        where: _List[str],
        params: _List[Any],
        want: dict[str, Any],
        limit: int | None,
        threads: _List[str] | None,
        every_ns: bool,
    ) -> Iterator[CheckpointTuple]:
        if limit == 0:
            return
        produced = 0
        cursor: tuple[str, str, str] | None = None
        memo: DecodeMemo = {}
        while True:
            page, cursor = self._page(where, params, want, cursor, threads, every_ns)
            # The page holds stored bytes; each tuple is decoded only when it is
            # reached. Snapshots of append-encoded lists are decoded once per
            # page, and the elements of a growing list shared by the tuples
            # that hold them (records.page_memo).
            memo = page_memo(memo)
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
        threads: _List[str] | None,
        every_ns: bool,
    ) -> tuple[_List[_Raw], tuple[str, str, str] | None]:
        """One page of a listing. ``every_ns``: ``where`` names one thread and no
        namespace (read_statement's merge of two sorted branches)."""
        conds = list(where)
        args = list(params)
        if cursor is not None:
            conds.append("(c.checkpoint_id, c.thread_id, c.checkpoint_ns) < (?, ?, ?)")
            args.extend(cursor)
        # Only fixed fragments are joined here; every value is a bound parameter.
        sql = read_statement("WHERE " + " AND ".join(conds) if conds else "", every_ns=every_ns)
        if every_ns:
            args.extend(list(args))  # bound once per branch
        args.append(PAGE)
        page = self._query(sql, args, threads)
        next_cursor = None
        if len(page) == PAGE:
            last = page[-1][0]
            next_cursor = (last[2], last[0], last[1])
        if want:
            page = [
                p
                for p in page
                if metadata_matches(
                    metadata_from_json(p[0][7], address=Address(p[0][0], p[0][1], p[0][2])), want
                )
            ]
        return page, next_cursor

    # --- writes ---------------------------------------------------------------------

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        self._check_writable("put")
        # Validate and serialize before taking the write lock: it is the expensive part.
        plan = encode_put(
            self.serde,
            self.codec,
            self._appends,
            config,
            checkpoint,
            metadata,
            new_versions,
            inline=self._inline,
            envelope=True,
        )
        index = plan_index(plan, checkpoint, new_versions)
        self._write(self._put, plan, index, threads=[plan.address.thread_id])
        return plan.address.to_config()

    def _put(self, conn: sqlite3.Connection, plan: PutPlan, index: IndexPut) -> None:
        addr = plan.address
        tid, ns, cid = addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id
        assert cid is not None
        # A tail extends a snapshot an earlier put of this process wrote;
        # another process may have pruned it since. Then store the whole value.
        values = plan.resolve(
            lambda channel, version: (
                conn.execute(HAS_BLOB, (tid, ns, channel, version)).fetchone() is not None
            ),
            self._appends,
            self.codec,
        )
        if values:
            conn.executemany(INSERT_BLOB, [_blob_row(tid, ns, v) for v in values])
        head_type, head_bytes = plan.head
        unstored = None
        runnable = index.runnable
        carried: dict[str, Any] = {}
        if plan.carried:
            carried, missing, parent, stored = _resolve_carried(
                conn, plan, self._conns.where, self._crypt
            )
            if carried:
                head_type, head_bytes = with_inline(plan.head, carried)
            # A candidate trigger with a value (inline or stored, not empty): nodes
            # would run (_threads.py).
            runnable = runnable or any(c in carried or c in stored for c in index.candidates)
            if missing:
                check_carried(plan, missing, *parent)
                unstored = json.dumps(sorted(missing), separators=(",", ":"))
        # The row names the versions of the channels not kept inline in its head:
        # what reads join value rows by and garbage collection keeps.
        inline = plan.inlined | carried.keys() if plan.carried else plan.inlined
        row_versions = {c: v for c, v in plan.versions.items() if c not in inline}
        versions_json = versions_to_json(row_versions)
        meta_json = dumps_json(plan.metadata)
        checksum = row_checksum(
            cid, plan.parent_id, head_type, head_bytes, versions_json, meta_json, unstored
        )
        # Before the checkpoint row: the index tells a new checkpoint by its absence.
        step, user = plain_step_and_user(plan.metadata) if index.root else (None, None)
        args = (
            *(tid, ns, cid, self._clock(), index.bytes, index.root),
            *(index.ts, meta_json, runnable, step, user),
        )
        # A thread's first checkpoint (no parent) usually makes its row: the upsert.
        if plan.parent_id is None or not conn.execute(INDEX_PUT_FAST, args).rowcount:
            conn.execute(INDEX_PUT, args)
        conn.execute(
            INSERT_CHECKPOINT,
            (
                *(tid, ns, cid, plan.parent_id, plan.run_id, head_type, head_bytes),
                *(versions_json, meta_json, checksum, unstored),
            ),
        )

    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._check_writable("put_writes")
        addr, records = encode_writes(self.serde, self.codec, config, writes, task_id, task_path)
        if not records:
            return
        replace: _List[tuple[Any, ...]] = []
        ignore: _List[tuple[Any, ...]] = []
        tid, ns, cid = addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id
        assert cid is not None
        for w in records:
            checksum = write_checksum(
                cid, w.task_id, w.task_path, w.idx, w.channel, w.type, w.encoding, w.value
            )
            row = (tid, ns, cid, w.task_id, w.task_path, w.idx, w.channel, w.type, w.encoding)
            (replace if w.replaces else ignore).append((*row, w.value, checksum))
        size = write_bytes(w.value for w in records)
        self._write(self._put_writes, (tid, ns, cid), replace, ignore, size)

    def _put_writes(
        self,
        conn: sqlite3.Connection,
        key: tuple[str, str, str],
        replace: _List[tuple[Any, ...]],
        ignore: _List[tuple[Any, ...]],
        size: int,
    ) -> None:
        if replace:
            conn.executemany(INSERT_WRITE_REPLACE, replace)
        if ignore:
            conn.executemany(INSERT_WRITE_IGNORE, ignore)
        conn.execute(COUNT_WRITES, key)
        args = (*key, self._clock(), size)
        if not conn.execute(INDEX_WRITES_FAST, args).rowcount:
            conn.execute(INDEX_WRITES, args)

    # --- thread operations ------------------------------------------------------------

    def _forget(self, thread_ids: Sequence[str] | None) -> None:
        """Snapshots of these threads may be gone: new tails must not extend them."""
        if self._appends is not None:
            self._appends.forget_threads(thread_ids)

    def delete_thread(self, thread_id: str) -> None:
        tid = check_thread_id(thread_id, bounded=False)
        self._write(self._delete_threads, [tid])
        self._forget([tid])

    @staticmethod
    def _delete_threads(conn: sqlite3.Connection, thread_ids: _List[str]) -> None:
        args = [(t,) for t in thread_ids]
        for statement in DELETE_THREAD:
            conn.executemany(statement, args)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = check_thread_ids(run_ids, "run_ids", bounded=False)
        if runs:
            self._forget(self._write(self._delete_for_runs, json.dumps(runs)))

    def _delete_for_runs(self, conn: sqlite3.Connection, runs: str) -> _List[str]:
        threads = [r[0] for r in conn.execute(THREADS_OF_RUNS, (runs,))]
        if not threads:
            return threads
        for statement in DELETE_FOR_RUNS:
            conn.execute(statement, (runs,))
        conn.executemany(COLLECT_BLOBS, [(t,) for t in threads])
        for tid in threads:
            _index.reindex(conn, tid, self._read_latest)
        return threads

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src = check_thread_id(source_thread_id, "source_thread_id", bounded=False)
        dst = check_thread_id(target_thread_id, "target_thread_id")
        if src == dst:
            raise ConfigError(f"copy_thread: source and target are the same thread {src!r}")
        self._write(self._copy_thread, src, dst)

    def _copy_thread(self, conn: sqlite3.Connection, src: str, dst: str) -> None:
        for statement in (COPY_CHECKPOINTS, COPY_BLOBS, COPY_WRITES):
            conn.execute(statement, (dst, src))
        # Sealed values name their thread: the copies are sealed again for dst.
        reseal_copy(conn, self._crypt, self.codec, src, dst)
        now = self._clock()
        _index.create(conn, dst, now)
        conn.execute(INDEX_TOUCH, (dst, now))
        _index.reindex(conn, dst, self._read_latest)

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        n = check_prune(strategy, keep)
        tids = list(dict.fromkeys(check_thread_ids(thread_ids, bounded=False)))
        if not tids:
            return
        if n == 0:
            self._write(self._delete_threads, tids)
        else:
            self._write(self._prune, tids, n, threads=tids)
        self._forget(tids)

    def _prune(self, conn: sqlite3.Connection, tids: _List[str], keep: int) -> None:
        for tid in tids:
            conn.execute(PRUNE, (tid, keep))
            conn.execute(COLLECT_WRITES, (tid,))
            conn.execute(COLLECT_BLOBS, (tid,))
            _index.reindex(conn, tid, self._read_latest)

    # --- the thread index (#15) ----------------------------------------------------------

    def threads(
        self,
        *,
        status: str | Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: Any = None,
        updated_after: Any = None,
        order: ThreadOrder = "updated",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ThreadPage:
        q = check_threads_args(
            status, metadata, updated_before, updated_after, order, limit, cursor
        )
        if self._crypt is not None and q.metadata:
            self._crypt.check_filter(q.metadata)  # a sealed key is not in the index
        page: ThreadPage = self._read(_index.query, q)
        return page

    def _read_latest(
        self, conn: sqlite3.Connection, tid: str, cid: str
    ) -> tuple[CheckpointTuple | None, dict[str, Any]]:
        """A root checkpoint read inside the caller's transaction (see ``_index.ReadLatest``)."""
        where = self._conns.where
        found = _split(conn.execute(GET_BY_ID, (tid, "", cid, 1)).fetchall(), where)
        row = found[0][0]
        meta = metadata_from_json(row[7], address=Address(tid, "", cid))
        return _index.lenient(lambda: self._build(*found[0])), meta

    def _rebuild_index(self) -> None:
        """Read the status of the threads a migration put in the index (in batches).

        A batch is a transaction: a crash leaves the rest marked, and the next
        open goes on.
        """
        if self.read_only:
            return

        def batch(conn: sqlite3.Connection) -> int:
            tids = [r[0] for r in conn.execute(INDEX_TO_REBUILD, (REBUILD, 64))]
            for tid in tids:
                latest = conn.execute(
                    "SELECT latest_id FROM tether_threads WHERE thread_id = ?", (tid,)
                ).fetchone()[0]
                _index.set_latest(conn, tid, latest, self._read_latest)
            return len(tids)

        while self._write(batch):
            pass

    # --- maintenance ---------------------------------------------------------------------

    def rekey(
        self,
        to: str | None = None,
        *,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Seal every stored value, write and metadata under key ``to`` (#17).

        ``to``: a key id of the ring (default: the active one); give every
        writer that key as its active one first, so that nothing new is
        sealed under the old key meanwhile.

        One pass over the tables in batches of ``batch`` rows, each written
        in its own short transaction (``progress(n)`` after each); values in
        clear are sealed too. Safe while others read and write: a row a put
        replaced meanwhile is left to that put. Killed at any point, it is
        finished by running it again (which rows remain is read from the
        store). Returns how many rows it sealed again; :meth:`rekey_pending`
        says how many are left (rows a writer with another active key wrote
        meanwhile).

        Raises:
            ConfigError: the saver has no keyring, or is read-only.
            DecodeError: a row does not open (its key is not in the ring).
        """
        self._check_writable("rekey")
        crypt, codec = rekey_codec(self._crypt, self.codec, to)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError(f"batch must be a positive int, got {batch!r}")

        def read(sql: str, args: Sequence[Any]) -> _List[Any]:
            where = self._conns.where
            with self._conns.connection() as conn, translate_errors(where):
                return conn.execute(sql, args).fetchall()

        def write(ops: _List[tuple[str, _List[tuple[Any, ...]]]]) -> int:
            def run(conn: sqlite3.Connection) -> int:
                changed = 0
                for sql, rows in ops:
                    changed = conn.executemany(sql, rows).rowcount
                return int(changed)

            return int(self._write(run))

        done = 0
        for n in rekey_batches(read, write, crypt, codec, batch):
            done += n
            if progress is not None:
                progress(n)
        self._forget(None)  # snapshots this process remembers were sealed under the old key
        return done

    def rekey_pending(self, to: str | None = None) -> int:
        """How many rows :meth:`rekey` would seal again (not under the active key)."""
        crypt, _ = rekey_codec(self._crypt, self.codec, to)
        pending: int = self._read(count_pending, crypt)
        return pending

    def stats(self) -> dict[str, int]:
        """Row counts and bytes on disk (``page_count * page_size``)."""

        def count(conn: sqlite3.Connection) -> dict[str, int]:
            out = {
                key: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608
                for key, table in (
                    ("checkpoints", "tether_checkpoints"),
                    ("blobs", "tether_blobs"),
                    ("writes", "tether_writes"),
                )
            }
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            out["bytes"] = pages * size
            return out

        result: dict[str, int] = self._read(count)
        return result


def _blob_row(tid: str, ns: str, v: ValueRecord) -> tuple[Any, ...]:
    """A row of ``INSERT_BLOB``, with its checksum."""
    checksum = value_checksum(v.channel, v.version, v.type, v.encoding, v.base, v.payload)
    return (tid, ns, v.channel, v.version, v.type, v.encoding, v.base, v.payload, checksum)


def _resolve_carried(
    conn: sqlite3.Connection, plan: PutPlan, where: str, crypt: Encryption | None = None
) -> tuple[dict[str, Any], list[str], tuple[dict[str, str] | None, set[str] | None], set[str]]:
    """Where the channels a put does not name are stored, looked up in its transaction.

    Never from the caller's ``channel_values`` (the contract). Each is, in
    this order: inline in the parent's head at the same version (carried into
    the new head); a blob row at that version (nothing to do); inline in
    another checkpoint of the namespace at that version (LangGraph's
    ``__copy__`` fork is put under another parent with ``new_versions={}``);
    else missing (see :func:`~tether.backends._records.check_carried`). A value
    sealed in its checkpoint's envelope (format 3) is opened and sealed on its
    own for the new head (:func:`~tether.backends._sealing.carried_from_envelope`).

    Returns:
        ``(inline values to carry, missing channels, (parent versions, parent
        unstored), channels with a stored value that is not empty)``; the
        parent's are ``None`` when there is no parent row or it predates the
        promise (version 4).

    Raises:
        StorageError: the parent row, whose inline values would be carried,
            fails its checksum.
        DecodeError: an envelope to carry a value from does not open.
    """
    addr = plan.address
    tid, ns = addr.thread_id, addr.checkpoint_ns
    rest = dict(plan.carried)
    carried: dict[str, Any] = {}
    versions: dict[str, str] | None = None
    lacked: set[str] | None = None
    row = None
    if plan.parent_id is not None:
        row = conn.execute(PARENT_PROMISE, (tid, ns, plan.parent_id)).fetchone()
    if row is not None:
        check_row(row, where)
        head_versions, inline = head_inline(row[4], row[5])
        enveloped: dict[str, str] = {}
        for channel, version in plan.carried.items():
            if channel in inline and str(head_versions.get(channel)) == version:
                if in_envelope(inline[channel]):
                    enveloped[channel] = version
                else:
                    carried[channel] = inline[channel]
                del rest[channel]
        if enveloped:
            carried.update(_from_envelope(row, head_versions, enveloped, crypt))
        if row[8] is not None:  # its put recorded what it lacked (version 4)
            try:
                versions = loads_json(row[6])
                lacked = set(loads_json(row[9])) if row[9] else set()
            except ValueError:
                versions = None
    if not rest:
        return carried, [], (versions, lacked), set()
    found = conn.execute(CARRIED_STORED, (versions_to_json(rest), tid, ns)).fetchall()
    missing = [r[0] for r in found if r[1] is None]
    stored = {r[0] for r in found if r[1] is not None and r[1] != EMPTY_TAG}
    for channel in list(missing):
        for found in conn.execute(INLINE_AT, (tid, ns, channel)):
            check_row(found, where)
            at, inline = head_inline(found[4], found[5])
            if channel in inline and str(at.get(channel)) == rest[channel]:
                if in_envelope(inline[channel]):
                    carried.update(_from_envelope(found, at, {channel: rest[channel]}, crypt))
                else:
                    carried[channel] = inline[channel]
                missing.remove(channel)
                break
    return carried, missing, (versions, lacked), stored


def _from_envelope(
    row: Sequence[Any],
    head_versions: Mapping[str, Any],
    carried: Mapping[str, str],
    crypt: Encryption | None,
) -> dict[str, list[str]]:
    """Values a checkpoint row (``CHECKPOINT_COLUMNS``) keeps in its envelope, sealed on
    their own for a put that carries them over."""
    source = Address(row[0], row[1], row[2])
    meta = metadata_from_json(row[7], address=source)
    return carried_from_envelope(crypt, source, row[3], head_versions, meta, carried)

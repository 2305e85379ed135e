"""In-memory saver (SPEC S5.1): the readable reference backend, for tests and demos.

It keeps exactly the records the persistent backends keep
(:mod:`tether.backends._records`), in dictionaries instead of tables, so
the whole contract is this file plus the record layer:

* a thread is a dict of namespaces; a namespace holds its checkpoints by id,
  its channel values by ``(channel, version)`` and its pending writes by
  checkpoint id and ``(task_id, idx)``;
* ``put`` stores the value records the put names; a channel the put does
  not name is found by version among values earlier puts stored, so a
  channel that did not change is stored once;
* long lists are stored as an immutable snapshot plus the tail appended
  since (SPEC S7, :mod:`tether.backends._delta`), as on SQLite;
* every stored value is serialized and encoded (checksum included) by the
  same codec as SQLite's, so a caller that mutates its objects after ``put``
  or after a read never changes what the saver holds, and the allowlist
  applies here exactly as it does on disk.

One lock guards the maps, so the saver is safe under concurrent use from
many threads and from asyncio tasks (async methods run the sync ones inline,
:class:`~tether.backends._bridge.InlineAsyncMixin`). Encoding and decoding
happen outside the lock; stored records are immutable, so a read copies
references under the lock and decodes after releasing it.

Speed is not a goal here (#14): the persistent backends are measured in
``bench/``; this one is the plain, obviously-correct reference.

Why one long module: it is the reference, one class that shows every
operation of the contract over plain dictionaries (puts and reads, thread
operations, the thread index, rekeying); the shared rules are already in
the record layer, and splitting the class would scatter what a reader
comes here to see in one place.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tether._status import state_of
from tether.backends._bridge import InlineAsyncMixin
from tether.backends._delta import DEFAULT_MIN_BYTES, AppendTracker
from tether.backends._pages import DecodeMemo, page_memo
from tether.backends._payload import BlobCodec
from tether.backends._records import (
    BlobKey,
    PutPlan,
    StoredValue,
    WriteRecord,
    assemble,
    check_carried,
    decode_writes,
    encode_put,
    encode_writes,
)
from tether.backends._sealing import (
    is_current,
    metadata_is_current,
    refuse_copy,
    rekey_codec,
    reseal_metadata,
    reseal_value,
    reseal_write,
)
from tether.backends._threads import (
    IndexPut,
    ThreadQuery,
    after_cursor,
    check_threads_args,
    cursor_after,
    now_micros,
    plan_index,
    runnable_of,
    sort_key,
    summary,
    user_metadata,
    write_bytes,
)
from tether.backends._walk import (
    Ancestor,
    delta_history,
    walk_delta,
)
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
from tether.encryption import Encryption, encryption_from
from tether.errors import ConfigError, DecodeError
from tether.lifecycle import Retention, check_retention, no_thread, stored_policy
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol
from tether.threads import ThreadOrder, ThreadPage, ThreadSummary

__all__ = ["GROUP", "InMemorySaver"]

#: ``list`` shares decoded snapshots between the tuples of groups this large.
GROUP = 64


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    """One stored checkpoint: what a row of ``tether_checkpoints`` holds."""

    parent_id: str | None
    run_id: str | None
    head: tuple[str, bytes]  # the checkpoint without channel values, serialized
    versions: dict[str, str]  # channel -> version, as text: the keys of its values
    metadata: str  # JSON
    unstored: tuple[str, ...]  # channels it names that no put stored (read as absent)


@dataclass(slots=True)
class _Namespace:
    checkpoints: dict[str, _Checkpoint] = field(default_factory=dict)
    blobs: dict[tuple[str, str], StoredValue] = field(default_factory=dict)
    writes: dict[str, dict[tuple[str, int], WriteRecord]] = field(default_factory=dict)

    def latest(self) -> str | None:
        return max(self.checkpoints, default=None)

    def values_of(self, tid: str, ns: str, record: _Checkpoint) -> dict[BlobKey, StoredValue]:
        """The stored values a checkpoint names, with the snapshots its tails extend."""
        out: dict[BlobKey, StoredValue] = {}
        for channel, version in record.versions.items():
            blob = self.blobs.get((channel, version))
            if blob is None:
                continue  # assemble decides: absent, or lost
            out[(tid, ns, channel, version)] = blob
            base = blob[3]
            if base is not None and (channel, base) in self.blobs:
                out[(tid, ns, channel, base)] = self.blobs[(channel, base)]
        return out

    def value_of(self, tid: str, ns: str, channel: str, version: str) -> dict[BlobKey, StoredValue]:
        """One stored value, with the snapshot it extends (as ``values_of``)."""
        out: dict[BlobKey, StoredValue] = {}
        blob = self.blobs.get((channel, version))
        if blob is not None:
            out[(tid, ns, channel, version)] = blob
            base = blob[3]
            if base is not None and (channel, base) in self.blobs:
                out[(tid, ns, channel, base)] = self.blobs[(channel, base)]
        return out

    def sorted_writes(self, cid: str) -> list[WriteRecord]:
        return sorted(self.writes.get(cid, {}).values(), key=lambda w: w.order)

    def ancestor(self, cid: str, channels: Collection[str]) -> Ancestor | None:
        """A checkpoint as the DeltaChannel walk sees it, with its writes to ``channels``."""
        record = self.checkpoints.get(cid)
        if record is None:
            return None
        writes = [w for w in self.sorted_writes(cid) if w.channel in channels]
        return Ancestor(cid, record.parent_id, record.versions, {}, record.unstored, writes)

    def collect_blobs(self) -> None:
        """Drop the values no remaining checkpoint names, nor extends (one level)."""
        live = {(c, v) for r in self.checkpoints.values() for c, v in r.versions.items()}
        bases = [(c, self.blobs[(c, v)][3]) for c, v in live if (c, v) in self.blobs]
        live |= {(c, base) for c, base in bases if base is not None}
        self.blobs = {k: b for k, b in self.blobs.items() if k in live}


@dataclass(slots=True)
class _ThreadRow:
    """One thread in the index (``tether_threads`` on SQLite and Postgres)."""

    created: int  # epoch microseconds
    updated: int
    checkpoints: int = 0
    namespaces: int = 0
    bytes: int = 0
    latest_id: str | None = None  # of the root namespace
    latest_step: Any = None
    latest_ts: str | None = None
    metadata: str = "{}"  # JSON of the latest root checkpoint's user metadata
    runnable: bool = False  # nodes would run after the latest root checkpoint
    status: str | None = None
    retention: str | None = None  # the thread's own policy (JSON), set_retention


# A checkpoint read under the lock, to decode after releasing it.
_Read = tuple[Address, _Checkpoint, dict[BlobKey, StoredValue], list[WriteRecord]]


class InMemorySaver(InlineAsyncMixin, BaseCheckpointSaver):
    """A thread-safe saver that keeps everything in process memory.

    Args:
        serde: the value serializer (default: the strict MessagePack one).
        delta_threshold: lists whose serialized value has at least this many
            bytes are stored as an immutable snapshot plus the tail appended
            since (a growing message history costs a few messages per step,
            not the whole history); ``None`` stores every value whole. Only
            with tether's :class:`~tether.serde.MsgpackSerializer`; values of
            other serializers are always stored whole.
        encryption: seal every value, pending write and metadata
            (:class:`~tether.encryption.Encryption`, or ``{key_id: key}``);
            ``None`` (default): ``TETHER_KEYS`` if set; ``False``: off.
        retention: the :class:`~tether.lifecycle.Retention` that :meth:`sweep`
            applies (``None``: keep everything).
        sweep_interval: run :meth:`sweep` every this many seconds in a
            background thread until :meth:`close` (``None``, the default: off).

    Example:
        >>> from tether import InMemorySaver, make_config
        >>> saver = InMemorySaver()
        >>> saver.get_tuple(make_config("t1")) is None
        True
    """

    def __init__(
        self,
        *,
        serde: SerializerProtocol | UntypedSerializerProtocol | None = None,
        delta_threshold: int | None = DEFAULT_MIN_BYTES,
        encryption: Encryption | Mapping[str, bytes | str] | bool | None = None,
        retention: Retention | None = None,
        sweep_interval: float | None = None,
    ) -> None:
        super().__init__(serde=serde, retention=retention)
        self._appends = AppendTracker.create(delta_threshold)
        self._crypt = encryption_from(encryption)
        # checksums, no compression: nothing here is on disk
        self._codec = BlobCodec(crypt=self._crypt)
        self._lock = threading.Lock()  # not re-entrant: no locked section calls a locked method
        self._threads: dict[str, dict[str, _Namespace]] = {}
        self._index: dict[str, _ThreadRow] = {}  # the thread index (#15), under the lock
        self._clock = now_micros
        self._start_sweeper(sweep_interval)

    # --- reads ---------------------------------------------------------------------------

    def _read(self, tid: str, ns_name: str, cid: str | None) -> _Read | None:
        """One checkpoint's records (the latest when ``cid`` is None); call under the lock."""
        ns = self._threads.get(tid, {}).get(ns_name)
        if ns is None:
            return None
        cid = cid if cid is not None else ns.latest()
        record = ns.checkpoints.get(cid) if cid is not None else None
        if cid is None or record is None:
            return None
        addr = Address(tid, ns_name, cid)
        return addr, record, ns.values_of(tid, ns_name, record), ns.sorted_writes(cid)

    def _assemble(self, read: _Read, memo: DecodeMemo | None = None) -> CheckpointTuple:
        addr, record, blobs, writes = read
        return assemble(
            self.serde,
            self._codec,
            address=addr,
            parent_id=record.parent_id,
            head=record.head,
            metadata=loads_json(record.metadata),
            versions=record.versions,
            blobs=blobs,
            writes=writes,
            memo=memo,
            unstored=record.unstored,
        )

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        addr = Address.from_config(config, bounded=False)
        with self._lock:
            read = self._read(addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id)
        if read is None:
            return None
        if self._refresher is not None:
            self._after_read(addr.thread_id)
        return self._assemble(read)

    def delta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory]:
        """A plain walk of the dictionaries (:func:`~tether.backends._walk.walk_delta`)."""
        target = Address.from_config(config, bounded=False)
        tid, ns_name = target.thread_id, target.checkpoint_ns
        wanted = set(channels)
        with self._lock:
            ns = self._threads.get(tid, {}).get(ns_name)
            cid = target.checkpoint_id
            if ns is not None and cid is None:
                cid = ns.latest()
            record = ns.checkpoints.get(cid) if ns is not None and cid is not None else None
            if ns is None or record is None:
                return {c: {"writes": []} for c in channels}
            walk = walk_delta(
                target.with_id(cid),
                record.parent_id,
                channels,
                lambda checkpoint_id: ns.ancestor(checkpoint_id, wanted),
                lambda channel, version: ns.blobs.get((channel, version)),
            )
            # the seeds' records, with the snapshots they extend: decoded after the lock
            seeds: dict[BlobKey, StoredValue] = {}
            for channel, (_, version) in walk.seeds.items():
                if version is not None:
                    seeds.update(ns.value_of(tid, ns_name, channel, version))
        return delta_history(self.serde, self._codec, walk, seeds)

    def get_writes(self, config: Config) -> list[StoredWrite]:
        addr = checkpoint_address(config, "get_writes")
        assert addr.checkpoint_id is not None
        with self._lock:
            ns = self._threads.get(addr.thread_id, {}).get(addr.checkpoint_ns)
            writes = ns.sorted_writes(addr.checkpoint_id) if ns is not None else []
        return decode_writes(self.serde, self._codec, addr, writes)

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
        only_ns = addr.checkpoint_ns if addr is not None and addr.has_ns(config) else None
        only_id = addr.checkpoint_id if addr is not None else None
        return self._list(addr, only_ns, only_id, want, before_id, limit)

    def _list(
        self,
        addr: Address | None,
        only_ns: str | None,
        only_id: str | None,
        want: dict[str, Any],
        before_id: str | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        with self._lock:
            threads = [addr.thread_id] if addr is not None else list(self._threads)
            keys = [
                (cid, tid, ns_name)
                for tid in threads
                for ns_name, ns in self._threads.get(tid, {}).items()
                if only_ns is None or ns_name == only_ns
                for cid, record in ns.checkpoints.items()
                if (only_id is None or cid == only_id)
                and (before_id is None or cid < before_id)
                and (not want or metadata_matches(loads_json(record.metadata), want))
            ]
        keys.sort(reverse=True)  # newest first, as every backend (S2.4)
        if limit is not None:
            keys = keys[:limit]
        # Snapshots of append-encoded lists are decoded once per group of
        # tuples, a growing list's elements shared (records.page_memo).
        memo: DecodeMemo = {}
        for start in range(0, len(keys), GROUP):
            memo = page_memo(memo)
            for cid, tid, ns_name in keys[start : start + GROUP]:
                with self._lock:
                    read = self._read(tid, ns_name, cid)
                if read is not None:  # deleted since the listing began
                    yield self._assemble(read, memo)

    # --- writes ----------------------------------------------------------------------------

    def _namespace(self, tid: str, ns_name: str) -> _Namespace:
        """The namespace to write into, created when new (call under the lock)."""
        return self._threads.setdefault(tid, {}).setdefault(ns_name, _Namespace())

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        plan = encode_put(
            self.serde, self._codec, self._appends, config, checkpoint, metadata, new_versions
        )
        addr = plan.address
        assert addr.checkpoint_id is not None
        index = plan_index(plan, checkpoint, new_versions)
        with self._lock:
            before = self._threads.get(addr.thread_id, {}).get(addr.checkpoint_ns)
            fresh_ns = before is None or not before.checkpoints  # writes may come first
            ns = self._namespace(addr.thread_id, addr.checkpoint_ns)
            fresh = addr.checkpoint_id not in ns.checkpoints
            values = plan.resolve(lambda c, v: (c, v) in ns.blobs, self._appends, self._codec)
            missing = [c for c, v in plan.carried.items() if (c, v) not in ns.blobs]
            if missing:
                parent = ns.checkpoints.get(plan.parent_id) if plan.parent_id else None
                check_carried(
                    plan,
                    missing,
                    parent.versions if parent is not None else None,
                    parent.unstored if parent is not None else None,
                )
            for v in values:
                ns.blobs[(v.channel, v.version)] = v.stored
            ns.checkpoints[addr.checkpoint_id] = _Checkpoint(
                parent_id=plan.parent_id,
                run_id=plan.run_id,
                head=plan.head,
                versions=plan.versions,
                metadata=dumps_json(plan.metadata),
                unstored=tuple(sorted(missing)),
            )
            self._index_put(plan, index, ns, fresh=fresh, fresh_ns=fresh_ns)
        return addr.to_config()

    def _index_put(
        self, plan: PutPlan, index: IndexPut, ns: _Namespace, *, fresh: bool, fresh_ns: bool
    ) -> None:
        """The thread's index row after ``plan`` was stored (call under the lock)."""
        addr = plan.address
        cid = addr.checkpoint_id
        assert cid is not None
        now = self._clock()
        row = self._index.get(addr.thread_id)
        if row is None:
            row = self._index[addr.thread_id] = _ThreadRow(created=now, updated=now)
        row.updated = now
        row.checkpoints += fresh
        row.namespaces += fresh_ns
        row.bytes += index.bytes + len(dumps_json(plan.metadata))
        if index.root and (row.latest_id is None or cid >= row.latest_id):
            runnable = index.runnable or any(
                (blob := ns.blobs.get((c, v))) is not None and blob[0] != EMPTY_TAG
                for c, v in index.candidates.items()
            )
            row.latest_id, row.latest_step, row.latest_ts = cid, plan.metadata.get("step"), index.ts
            row.metadata = dumps_json(user_metadata(plan.metadata))
            row.runnable = runnable
            row.status = self._state(ns, cid, runnable)

    @staticmethod
    def _state(ns: _Namespace, cid: str, runnable: bool) -> str:
        writes = ns.writes.get(cid, {}).values()
        return state_of(((w.task_id, w.channel) for w in writes), runnable)

    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        addr, records = encode_writes(self.serde, self._codec, config, writes, task_id, task_path)
        assert addr.checkpoint_id is not None
        with self._lock:
            ns = self._namespace(addr.thread_id, addr.checkpoint_ns)
            bucket = ns.writes.setdefault(addr.checkpoint_id, {})
            for w in records:
                key = (w.task_id, w.idx)
                if w.replaces or key not in bucket:  # ordinary writes: insert-or-ignore
                    bucket[key] = w
            row = self._index.get(addr.thread_id)
            if row is not None:  # else the checkpoint is not stored (yet): its put counts
                row.updated = self._clock()
                row.bytes += write_bytes(w.value for w in records)
                if addr.checkpoint_ns == "" and addr.checkpoint_id == row.latest_id:
                    row.status = self._state(ns, addr.checkpoint_id, row.runnable)

    # --- thread operations -----------------------------------------------------------------

    def _forget(self, thread_ids: Sequence[str]) -> None:
        """Snapshots of these threads may be gone: new tails must not extend them."""
        if self._appends is not None and thread_ids:
            self._appends.forget_threads(thread_ids)

    def delete_thread(self, thread_id: str) -> None:
        tid = check_thread_id(thread_id, bounded=False)
        with self._lock:
            self._threads.pop(tid, None)
            self._index.pop(tid, None)
        self._forget([tid])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = set(check_thread_ids(run_ids, "run_ids", bounded=False))
        touched: list[str] = []
        with self._lock:
            for tid, spaces in list(self._threads.items()):
                for name, ns in list(spaces.items()):
                    doomed = [c for c, r in ns.checkpoints.items() if r.run_id in runs]
                    if not doomed:
                        continue
                    touched.append(tid)
                    for cid in doomed:
                        del ns.checkpoints[cid]
                        ns.writes.pop(cid, None)
                    ns.collect_blobs()
                    if not ns.checkpoints and not ns.writes:
                        del spaces[name]
                if not spaces:
                    del self._threads[tid]
            for tid in dict.fromkeys(touched):
                self._refresh(tid)
        self._forget(touched)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src = check_thread_id(source_thread_id, "source_thread_id", bounded=False)
        dst = check_thread_id(target_thread_id, "target_thread_id")
        if src == dst:
            raise ConfigError(f"copy_thread: source and target are the same thread {src!r}")
        with self._lock:
            source = self._threads.get(src)
            if not source:
                return
            # Sealed records are bound to their thread: sealed again for the
            # target (before anything changes, so a failure leaves it untouched).
            copied = {name: self._sealed_for(src, dst, name, ns) for name, ns in source.items()}
            target = self._threads.setdefault(dst, {})
            for name, ns in copied.items():
                into = target.setdefault(name, _Namespace())
                # Records are immutable: the two threads may share them.
                into.checkpoints.update(ns.checkpoints)
                into.blobs.update(ns.blobs)
                for cid, bucket in ns.writes.items():
                    into.writes.setdefault(cid, {}).update(bucket)
            self._refresh(dst, written=True)

    def _sealed_for(self, src: str, dst: str, name: str, ns: _Namespace) -> _Namespace:
        """A namespace's records as thread ``dst`` stores them (itself when nothing is sealed)."""
        from tether.backends._payload import ENCRYPTED

        crypt, codec = self._crypt, self._codec
        out = _Namespace()
        for cid, r in ns.checkpoints.items():
            meta = reseal_metadata(
                None if crypt is None else crypt.with_active(crypt.active, allow_plaintext=True),
                loads_json(r.metadata),
                src,
                dst,
                name,
                cid,
                r.versions,
                r.parent_id,
            )
            if meta is not None and src != dst and crypt is not None:
                r = replace(r, metadata=dumps_json(meta))
            out.checkpoints[cid] = r
        for (channel, version), blob in ns.blobs.items():
            if blob[1] & ENCRYPTED:
                if crypt is None:
                    raise refuse_copy(src)
                blob = reseal_value(codec, blob, src, dst, name, channel, version)
            out.blobs[(channel, version)] = blob
        for cid, bucket in ns.writes.items():
            out.writes[cid] = {
                key: reseal_write(codec, w, src, dst, name, cid) if w.encoding & ENCRYPTED else w
                for key, w in bucket.items()
            }
            if crypt is None and any(w.encoding & ENCRYPTED for w in bucket.values()):
                raise refuse_copy(src)
        return out

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        n = check_prune(strategy, keep)
        tids = check_thread_ids(thread_ids, bounded=False)
        with self._lock:
            for tid in tids:
                spaces = self._threads.get(tid)
                if spaces is None:
                    continue
                if n == 0:
                    del self._threads[tid]
                    self._index.pop(tid, None)
                    continue
                self._prune_thread(spaces, n)
                self._refresh(tid)
        self._forget(tids)

    @staticmethod
    def _prune_thread(spaces: dict[str, _Namespace], n: int) -> None:
        """Keep the newest ``n`` checkpoints of each namespace (call under the lock)."""
        for ns in spaces.values():
            kept = set(sorted(ns.checkpoints, reverse=True)[:n])
            ns.checkpoints = {c: r for c, r in ns.checkpoints.items() if c in kept}
            ns.writes = {c: w for c, w in ns.writes.items() if c in kept}
            ns.collect_blobs()

    # --- lifecycle (#15) ------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background sweeper, if any (the maps stay readable)."""
        self._stop_sweeper()

    def set_retention(self, thread_id: str, policy: Retention | None) -> None:
        tid = check_thread_id(thread_id, bounded=False)
        found = check_retention(policy, "policy")
        with self._lock:
            row = self._index.get(tid)
            if row is None:
                raise no_thread(tid)
            row.retention = None if found is None else found.to_json()

    def get_retention(self, thread_id: str) -> Retention | None:
        tid = check_thread_id(thread_id, bounded=False)
        with self._lock:
            row = self._index.get(tid)
            text = row.retention if row is not None else None
        return None if text is None else stored_policy(tid, text)

    def _touch(self, thread_id: str, now: int) -> None:
        with self._lock:
            row = self._index.get(thread_id)
            if row is not None and row.updated < now:
                row.updated = now

    def _retention_rows(self) -> builtins.list[tuple[str, Any]]:
        with self._lock:
            return [(t, r.retention) for t, r in self._index.items() if r.retention is not None]

    def _sweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        out: builtins.list[tuple[str, int, int]] = []
        with self._lock:
            for tid, cutoff in due:
                row = self._index.get(tid)
                if row is None or row.updated >= cutoff:
                    continue  # gone, or written since the sweep found it
                out.append((tid, row.checkpoints, row.bytes))
                if not dry_run:
                    self._threads.pop(tid, None)
                    del self._index[tid]
        if not dry_run:
            self._forget([tid for tid, _, _ in out])
        return out

    def _sweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        with self._lock:
            row = self._index.get(thread_id)
            spaces = self._threads.get(thread_id)
            if row is None or spaces is None or row.updated >= active_before:
                return None
            count, size = row.checkpoints, row.bytes
            if dry_run:  # prune copies (the prune replaces their maps) and recount them
                left = {n: replace(ns) for n, ns in spaces.items()}
                self._prune_thread(left, keep)
                kept = [ns for ns in left.values() if ns.checkpoints]
                if not kept:
                    return count, size
                left_count = sum(len(ns.checkpoints) for ns in kept)
                return count - left_count, max(0, size - sum(_bytes(ns) for ns in kept))
            self._prune_thread(spaces, keep)
            self._refresh(thread_id)
            after = self._index.get(thread_id)
        self._forget([thread_id])
        if after is None:
            return count, size
        return count - after.checkpoints, max(0, size - after.bytes)

    # --- the thread index (#15) ------------------------------------------------------------

    def _refresh(self, tid: str, *, written: bool = False) -> None:
        """Recount a thread's index row after a thread operation (call under the lock).

        The latest root checkpoint may have changed (``delete_for_runs``,
        ``copy_thread`` into it): then whether its next nodes would run is
        read from its decoded values (:func:`runnable_of`), and a value this
        saver cannot decode leaves the status unknown (``None``).
        """
        spaces = {n: ns for n, ns in self._threads.get(tid, {}).items() if ns.checkpoints}
        if not spaces:
            self._index.pop(tid, None)
            return
        now = self._clock()
        row = self._index.get(tid)
        if row is None:
            row = self._index[tid] = _ThreadRow(created=now, updated=now)
        if written:
            row.updated = now
        row.checkpoints = sum(len(ns.checkpoints) for ns in spaces.values())
        row.namespaces = len(spaces)
        row.bytes = sum(_bytes(ns) for ns in spaces.values())
        root = spaces.get("")
        latest = root.latest() if root is not None else None
        if latest is None or root is None:
            row.latest_id = row.latest_step = row.latest_ts = row.status = None
            row.metadata, row.runnable = "{}", False
            return
        if latest != row.latest_id:
            record = root.checkpoints[latest]
            meta = loads_json(record.metadata)
            read = self._read(tid, "", latest)
            assert read is not None
            try:
                tup = self._assemble(read)
            except DecodeError:
                tup = None
            row.latest_id, row.latest_step = latest, meta.get("step")
            row.latest_ts = tup.checkpoint.get("ts") if tup is not None else None
            row.metadata = dumps_json(user_metadata(meta))
            row.runnable = tup is not None and runnable_of(tup)
            row.status = None if tup is None else self._state(root, latest, row.runnable)
        elif row.status is not None:
            row.status = self._state(root, latest, row.runnable)

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
        query = check_threads_args(
            status, metadata, updated_before, updated_after, order, limit, cursor
        )
        if self._crypt is not None and query.metadata:
            self._crypt.check_filter(query.metadata)  # a sealed key is not in the index
        with self._lock:
            rows = [
                (tid, replace(row)) for tid, row in self._index.items() if _wanted(query, tid, row)
            ]
        rows.sort(key=lambda item: sort_key(query, item[1].updated, item[0]))
        page = [_summary(tid, row) for tid, row in rows[: query.limit]]
        return ThreadPage(page, cursor_after(query, page, len(rows) > query.limit))

    # --- maintenance -------------------------------------------------------------------------

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

        Values in clear (stored before encryption was turned on) are sealed
        too. Returns how many records were sealed again. ``batch`` and
        ``progress(n)`` as on the persistent savers.

        Raises:
            ConfigError: the saver has no keyring.
            DecodeError: a record does not open (its key is not in the ring).
        """
        crypt, codec = rekey_codec(self._crypt, self._codec, to)
        done = 0
        with self._lock:
            for tid, spaces in self._threads.items():
                for name, ns in spaces.items():
                    for (channel, version), blob in list(ns.blobs.items()):
                        if not is_current(crypt, blob[1], blob[2]):
                            ns.blobs[(channel, version)] = reseal_value(
                                codec, blob, tid, tid, name, channel, version
                            )
                            done += 1
                    for cid, bucket in ns.writes.items():
                        for key, w in list(bucket.items()):
                            if not is_current(crypt, w.encoding, w.value):
                                bucket[key] = reseal_write(codec, w, tid, tid, name, cid)
                                done += 1
                    for cid, r in list(ns.checkpoints.items()):
                        meta = loads_json(r.metadata)
                        if metadata_is_current(crypt, meta):
                            continue
                        sealed = reseal_metadata(
                            crypt, meta, tid, tid, name, cid, r.versions, r.parent_id
                        )
                        if sealed is not None:
                            ns.checkpoints[cid] = replace(r, metadata=dumps_json(sealed))
                            done += 1
        if progress is not None:
            progress(done)
        return done

    def rekey_pending(self, to: str | None = None) -> int:
        """How many records :meth:`rekey` would seal again."""
        crypt, _ = rekey_codec(self._crypt, self._codec, to)
        n = 0
        with self._lock:
            for spaces in self._threads.values():
                for ns in spaces.values():
                    n += sum(not is_current(crypt, b[1], b[2]) for b in ns.blobs.values())
                    n += sum(
                        not is_current(crypt, w.encoding, w.value)
                        for bucket in ns.writes.values()
                        for w in bucket.values()
                    )
                    n += sum(
                        not metadata_is_current(crypt, loads_json(r.metadata))
                        for r in ns.checkpoints.values()
                    )
        return n

    def stats(self) -> dict[str, int]:
        """Counts of stored checkpoints, values and writes, and the bytes they hold.

        ``bytes`` is the sum of the stored payloads (heads, metadata, channel
        values, writes), not Python's object overhead. Values that several
        threads share after :meth:`copy_thread` count once per thread.
        """
        out = {"checkpoints": 0, "blobs": 0, "writes": 0, "bytes": 0}
        with self._lock:
            for spaces in self._threads.values():
                for ns in spaces.values():
                    out["checkpoints"] += len(ns.checkpoints)
                    out["blobs"] += len(ns.blobs)
                    for r in ns.checkpoints.values():
                        out["bytes"] += len(r.head[1]) + len(r.metadata.encode())
                    out["bytes"] += sum(len(b[2] or b"") for b in ns.blobs.values())
                    for bucket in ns.writes.values():
                        out["writes"] += len(bucket)
                        out["bytes"] += sum(len(w.value or b"") for w in bucket.values())
        return out


def _bytes(ns: _Namespace) -> int:
    """What a namespace's records hold (:meth:`InMemorySaver.stats`'s ``bytes``)."""
    total = sum(len(r.head[1]) + len(r.metadata.encode()) for r in ns.checkpoints.values())
    total += sum(len(b[2] or b"") for b in ns.blobs.values())
    return total + sum(
        len(w.value or b"") for bucket in ns.writes.values() for w in bucket.values()
    )


def _wanted(query: ThreadQuery, tid: str, row: _ThreadRow) -> bool:
    if query.statuses is not None and row.status not in query.statuses:
        return False
    if query.updated_before is not None and not row.updated < query.updated_before:
        return False
    if query.updated_after is not None and not row.updated > query.updated_after:
        return False
    if query.metadata and not metadata_matches(loads_json(row.metadata), query.metadata):
        return False
    return after_cursor(query, row.updated, tid)


def _summary(tid: str, row: _ThreadRow) -> ThreadSummary:
    return summary(
        tid,
        row.status,
        row.created,
        row.updated,
        row.checkpoints,
        row.namespaces,
        row.bytes,
        row.latest_id,
        row.latest_step,
        row.latest_ts,
        loads_json(row.metadata),
    )

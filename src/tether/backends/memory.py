"""In-memory saver (SPEC S5.1): for tests, demos and short-lived processes.

Layout: thread -> namespace -> a small store holding checkpoints by id, channel
blobs by (channel, version) and writes by checkpoint. Channel values are kept
apart from checkpoints, so a channel that did not change between steps is
stored once (the reference keyed blobs the same way).

Growing lists (message histories) are stored as append deltas (SPEC S7, see
:mod:`tether.backends._delta`): an immutable snapshot blob under a version of
its own, and per channel version a tail blob that records the snapshot it
extends (its ``base``). Reading a version costs at most two blobs and a list
concatenation; garbage collection keeps the blobs checkpoints refer to plus
the snapshots those extend (one level). ``list`` decodes each snapshot once per
group of :data:`GROUP` tuples and shares its *elements* between the tuples of
that group (each tuple gets a list of its own), as the SQLite backend does per
page.

Everything stored is serialized (channel values and writes through the
saver's serializer, checkpoint heads and metadata through MessagePack), so a
caller that mutates its dicts after ``put`` or after a read never changes what
the saver holds, and the in-memory backend exercises the same serializer (and
the same allowlist) as the persistent ones.

One lock guards all maps, so the saver is safe under concurrent use
from many threads (the reference one is not) and from asyncio tasks: async
methods run the sync ones inline (:class:`~tether.backends._bridge.InlineAsyncMixin`);
no lock is ever held across an ``await``. Serializing and decoding happen
outside the lock; stored blobs are immutable, so a read copies references
under the lock and decodes them after releasing it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import ormsgpack

from tether.backends._bridge import InlineAsyncMixin
from tether.backends._common import (
    EMPTY,
    EMPTY_TAG,
    check_checkpoint,
    check_list_args,
    check_prune,
    check_thread_ids,
    decode_value,
    index_writes,
    merge_metadata,
    metadata_matches,
    split_channel_values,
)
from tether.backends._delta import DEFAULT_MIN_BYTES, AppendTracker, Row, join_append, supports
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    PendingWrite,
    address_fields,
)
from tether.errors import ConfigError, DecodeError, StorageError
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol

__all__ = ["GROUP", "InMemorySaver"]

#: ``list`` shares decoded snapshots between the tuples of groups this large.
GROUP = 64

_Typed = tuple[str, bytes]

# A stored channel value: (tag, serialized bytes, base). ``base`` is the
# snapshot version a tail extends (the value is snapshot + tail), else None.
_Blob = tuple[str, bytes, str | None]

_EMPTY_BLOB: _Blob = (EMPTY_TAG, b"", None)

# One channel of a checkpoint being read: (channel, its blob, the snapshot blob
# a tail extends or None).
_Part = tuple[str, _Blob, _Blob | None]


# A stored checkpoint: (head, metadata, run_id, parent_id, channels, versions).
# ``head`` is the checkpoint without channel_values, serialized; ``metadata``
# the JSON-safe metadata as MessagePack; ``channels`` and ``versions`` its
# channel_versions as two tuples (blob keys are str(version)). Stored data is
# plain tuples of strings and bytes, never a class or a dict, and few of them:
# the garbage collector stops tracking such tuples, so a large store adds
# nothing to later collections. (With a row object and a versions dict per
# checkpoint, W2's 10,000 puts set off a full collection the reference saver
# did not: a sixth of the put time.)
_Row = tuple[_Typed, bytes, Any, str | None, tuple[str, ...], tuple[Any, ...]]
_METADATA: Final = 1
_RUN_ID: Final = 2
_CHANNELS: Final = 4
_VERSIONS: Final = 5


# A stored write: (task_path, task_id, idx, channel, value). Tuples sort in
# the contract's read order (S2.4); (task_id, idx) is unique per checkpoint, so
# the comparison never reaches the channel or the value.
_Write = tuple[str, str, int, str, _Typed]


@dataclass(slots=True)
class _Namespace:
    checkpoints: dict[str, _Row] = field(default_factory=dict)
    blobs: dict[tuple[str, str], _Blob] = field(default_factory=dict)
    writes: dict[str, dict[tuple[str, int], _Write]] = field(default_factory=dict)
    latest: str | None = None

    def recompute_latest(self) -> None:
        self.latest = max(self.checkpoints) if self.checkpoints else None

    def collect_blobs(self) -> None:
        """Drop blobs no remaining checkpoint refers to, nor extends (one level)."""
        blobs = self.blobs
        live = {
            (ch, str(v))
            for row in self.checkpoints.values()
            for ch, v in zip(row[_CHANNELS], row[_VERSIONS], strict=True)
        }
        bases = set()
        for ch, v in live:
            blob = blobs.get((ch, v))
            if blob is not None and blob[2] is not None:
                bases.add((ch, blob[2]))
        live |= bases
        for key in [k for k in blobs if k not in live]:
            del blobs[key]

    def parts(self, row: _Row) -> list[_Part]:
        """The blobs a checkpoint's values are read from (call under the lock)."""
        blobs = self.blobs
        out: list[_Part] = []
        for channel, version in zip(row[_CHANNELS], row[_VERSIONS], strict=True):
            blob = blobs.get((channel, str(version)))
            if blob is None or blob[0] == EMPTY_TAG:
                continue
            base = blob[2]
            out.append((channel, blob, None if base is None else blobs.get((channel, base))))
        return out

    def sorted_writes(self, cid: str) -> list[_Write]:
        """A checkpoint's writes in contract order (call under the lock)."""
        bucket = self.writes.get(cid)
        return sorted(bucket.values()) if bucket else []


# A checkpoint copied out under the lock, decoded after releasing it.
_Raw = tuple[str, str, str, _Row, list[_Part], list[_Write]]

# A tail of a put: its channel, the snapshot it extends, the whole value otherwise.
_Needs = tuple[str, str, Row]


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
    ) -> None:
        super().__init__(serde=serde)
        self._appends = AppendTracker.create(delta_threshold)
        # Not re-entrant: no locked section calls back into a locked method.
        self._lock = threading.Lock()
        self._threads: dict[str, dict[str, _Namespace]] = {}

    def __enter__(self) -> InMemorySaver:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> InMemorySaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    # --- reads ------------------------------------------------------------------

    def _build(
        self, raw: _Raw, memo: dict[tuple[str, str, str, str], Any] | None
    ) -> CheckpointTuple:
        tid, ns_name, cid, (head_typed, metadata, _, parent, _, _), parts, writes = raw
        loads = self.serde.loads_typed
        # The common case goes straight to the serializer; on a DecodeError
        # _decode decodes again to name thread, checkpoint and channel.
        try:
            head: dict[str, Any] = loads(head_typed)
        except DecodeError:
            head = self._decode(head_typed, tid, ns_name, cid)
        values: dict[str, Any] = {}
        for channel, (tag, data, base), snap in parts:
            try:
                value = loads((tag, data))
            except DecodeError:
                value = self._decode((tag, data), tid, ns_name, cid, channel)
            if base is not None:
                value = self._join(tid, ns_name, cid, channel, base, snap, value, memo)
            values[channel] = value
        head["channel_values"] = values
        pending: list[PendingWrite] = []
        for _, task_id, _, channel, typed in writes:
            try:
                value = loads(typed)
            except DecodeError:
                value = self._decode(typed, tid, ns_name, cid, channel, task_id)
            pending.append((task_id, channel, value))
        return CheckpointTuple(
            {"configurable": {"thread_id": tid, "checkpoint_ns": ns_name, "checkpoint_id": cid}},
            head,  # type: ignore[arg-type]
            ormsgpack.unpackb(metadata),
            {"configurable": {"thread_id": tid, "checkpoint_ns": ns_name, "checkpoint_id": parent}}
            if parent
            else None,
            pending,
        )

    def _decode(
        self,
        typed: _Typed,
        tid: str,
        ns_name: str,
        cid: str,
        channel: str | None = None,
        task_id: str | None = None,
    ) -> Any:
        """Decode with the error naming where the value is (the slow path)."""
        at = Address(tid, ns_name, cid)
        return decode_value(self.serde, *typed, address=at, channel=channel, task_id=task_id)

    def _join(
        self,
        tid: str,
        ns_name: str,
        cid: str,
        channel: str,
        base: str,
        snap: _Blob | None,
        tail: Any,
        memo: dict[tuple[str, str, str, str], Any] | None,
    ) -> list[Any]:
        """An append-encoded value: the decoded snapshot (from ``memo`` when listing) + tail."""
        key = (tid, ns_name, channel, base)
        snapshot = memo.get(key, _MISSING) if memo is not None else _MISSING
        if snapshot is _MISSING:
            if snap is None:
                raise StorageError(
                    f"the snapshot {base!r} that value {_where(tid, ns_name, cid, channel)} "
                    "extends is missing; the store is damaged"
                )
            snapshot = self._decode((snap[0], snap[1]), tid, ns_name, cid, channel)
            if memo is not None:
                memo[key] = snapshot
        return join_append(snapshot, tail, where=_where(tid, ns_name, cid, channel))

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        tid, ns_name, cid = address_fields(config)
        with self._lock:
            spaces = self._threads.get(tid)
            ns = spaces.get(ns_name) if spaces else None
            if ns is None:
                return None
            if cid is None:
                cid = ns.latest
            row = ns.checkpoints.get(cid) if cid else None
            if cid is None or row is None:
                return None
            raw = (tid, ns_name, cid, row, ns.parts(row), ns.sorted_writes(cid))
        return self._build(raw, None)

    def list(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # Validate eagerly (not at the first next()), so bad input fails at the call.
        addr, want, before_id, limit = check_list_args(config, filter, before, limit)
        return self._list(addr, config, want, before_id, limit)

    def _list(
        self,
        addr: Address | None,
        config: Config | None,
        want: dict[str, Any],
        before_id: str | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        if limit == 0:
            return
        only_ns = addr.checkpoint_ns if addr is not None and addr.has_ns(config) else None
        if addr is not None and addr.checkpoint_id is not None:
            tup = self.get_tuple(addr.to_config())
            if (
                tup is not None
                and (before_id is None or tup.checkpoint["id"] < before_id)
                and metadata_matches(tup.metadata, want)
            ):
                yield tup
            return
        with self._lock:
            threads = [addr.thread_id] if addr is not None else list(self._threads)
            keys: list[tuple[str, str, str]] = []
            for tid in threads:
                for ns_name, ns in self._threads.get(tid, {}).items():
                    if only_ns is not None and ns_name != only_ns:
                        continue
                    keys.extend(
                        (cid, tid, ns_name)
                        for cid in ns.checkpoints
                        if before_id is None or cid < before_id
                    )
        keys.sort(reverse=True)
        produced = 0
        # Snapshots decoded for the current group of tuples (their elements are
        # shared by the group's tuples; a new group starts with an empty memo).
        memo: dict[tuple[str, str, str, str], Any] = {}
        for cid, tid, ns_name in keys:
            with self._lock:
                space = self._threads.get(tid, {}).get(ns_name)
                row = space.checkpoints.get(cid) if space else None
                if space is None or row is None:
                    continue  # deleted since the listing started
                if want and not metadata_matches(ormsgpack.unpackb(row[_METADATA]), want):
                    continue
                raw = (tid, ns_name, cid, row, space.parts(row), space.sorted_writes(cid))
            if produced % GROUP == 0:
                memo = {}
            yield self._build(raw, memo)
            produced += 1
            if limit is not None and produced >= limit:
                return

    # --- writes -----------------------------------------------------------------

    def _namespace(self, tid: str, ns_name: str) -> _Namespace:
        """The namespace to write into, created when new (call under the lock)."""
        spaces = self._threads.get(tid)
        if spaces is None:
            spaces = self._threads[tid] = {}
        ns = spaces.get(ns_name)
        if ns is None:
            ns = spaces[ns_name] = _Namespace()
        return ns

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        tid, ns_name, parent_id = address_fields(config)
        check_checkpoint(checkpoint, new_versions)
        meta = merge_metadata(config, metadata)
        head, values = split_channel_values(checkpoint, new_versions)
        serde = self.serde
        # Only tether's MessagePack decodes an array as the list of its elements.
        appends = self._appends if supports(serde) else None
        dumps = serde.dumps_typed
        cid = checkpoint["id"]
        # Serialize outside the lock: it is the expensive part and touches no shared state.
        blobs: dict[tuple[str, str], _Blob] = {}
        needs: list[_Needs] = []
        for channel, (version, value) in values.items():
            if value is EMPTY:
                blobs[(channel, version)] = _EMPTY_BLOB
                continue
            tag, data = dumps(value)
            # Short or non-list values are stored whole (plan() would say so too).
            if appends is None or tag != "msgpack" or len(data) < appends.min_bytes:
                blobs[(channel, version)] = (tag, data, None)
                continue
            plan = appends.plan((tid, ns_name, channel), version, tag, data)
            for r in plan.rows:
                blobs[(channel, r.version)] = (r.tag, r.data, r.base)
            if plan.needs is not None and plan.fallback is not None:
                needs.append((channel, plan.needs, plan.fallback))
        versions = head["channel_versions"]
        row: _Row = (
            dumps(head),
            ormsgpack.packb(meta),
            meta.get("run_id"),
            parent_id,
            tuple(versions),
            tuple(versions.values()),
        )
        with self._lock:
            ns = self._namespace(tid, ns_name)
            for channel, snapshot, whole in needs:
                # The tail extends a snapshot an earlier put wrote; a thread
                # operation may have dropped it since. Then store the whole value.
                if (channel, snapshot) not in ns.blobs:
                    assert appends is not None
                    appends.forget((tid, ns_name, channel))
                    blobs[(channel, whole.version)] = (whole.tag, whole.data, None)
            ns.blobs.update(blobs)
            ns.checkpoints[cid] = row
            if ns.latest is None or cid > ns.latest:
                ns.latest = cid
        return {"configurable": {"thread_id": tid, "checkpoint_ns": ns_name, "checkpoint_id": cid}}

    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        tid, ns_name, cid = address_fields(config)
        if cid is None:
            raise ConfigError(
                f"put_writes for thread {tid!r} needs the config of a checkpoint "
                "(configurable.checkpoint_id), as returned by put()"
            )
        rows = index_writes(writes, task_id, task_path)
        dumps = self.serde.dumps_typed
        encoded = [(task_path, task_id, idx, channel, dumps(value)) for idx, channel, value in rows]
        with self._lock:
            ns = self._namespace(tid, ns_name)
            bucket = ns.writes.get(cid)
            if bucket is None:
                bucket = ns.writes[cid] = {}
            for w in encoded:
                key = (task_id, w[2])
                if w[2] >= 0 and key in bucket:
                    continue  # ordinary writes are insert-or-ignore
                bucket[key] = w

    # --- thread operations ----------------------------------------------------------

    def _forget(self, thread_ids: Sequence[str]) -> None:
        """Snapshots of these threads may be gone: new tails must not extend them."""
        if self._appends is not None and thread_ids:
            self._appends.forget_threads(thread_ids)

    def delete_thread(self, thread_id: str) -> None:
        tid = str(thread_id)
        with self._lock:
            self._threads.pop(tid, None)
        self._forget([tid])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = set(check_thread_ids(run_ids, "run_ids"))
        if not runs:
            return
        touched: list[str] = []
        with self._lock:
            for tid in list(self._threads):
                spaces = self._threads[tid]
                for name in list(spaces):
                    ns = spaces[name]
                    doomed = [c for c, r in ns.checkpoints.items() if str(r[_RUN_ID]) in runs]
                    if not doomed:
                        continue
                    touched.append(tid)
                    for cid in doomed:
                        del ns.checkpoints[cid]
                        ns.writes.pop(cid, None)
                    ns.collect_blobs()
                    ns.recompute_latest()
                    if not ns.checkpoints and not ns.writes:
                        del spaces[name]
                if not spaces:
                    del self._threads[tid]
        self._forget(touched)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        src_id, dst_id = str(source_thread_id), str(target_thread_id)
        if src_id == dst_id:
            raise ConfigError(f"copy_thread: source and target are the same thread {src_id!r}")
        with self._lock:
            source = self._threads.get(src_id)
            if not source:
                return
            target = self._threads.setdefault(dst_id, {})
            for name, ns in source.items():
                dst = target.setdefault(name, _Namespace())
                # Rows, blobs and writes are immutable once stored (values are
                # bytes), so sharing them between threads is safe. Snapshots
                # come along with the tails that extend them.
                dst.checkpoints.update(ns.checkpoints)
                dst.blobs.update(ns.blobs)
                for cid, bucket in ns.writes.items():
                    dst.writes[cid] = dict(bucket)
                dst.recompute_latest()

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        n = check_prune(strategy, keep)
        tids = check_thread_ids(thread_ids)
        with self._lock:
            for tid in tids:
                spaces = self._threads.get(tid)
                if spaces is None:
                    continue
                if n == 0:
                    del self._threads[tid]
                    continue
                for ns in spaces.values():
                    kept = set(sorted(ns.checkpoints, reverse=True)[:n])
                    for cid in [c for c in ns.checkpoints if c not in kept]:
                        del ns.checkpoints[cid]
                    for cid in [c for c in ns.writes if c not in kept]:
                        del ns.writes[cid]
                    ns.collect_blobs()
                    ns.recompute_latest()
        self._forget(tids)

    # --- maintenance ---------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Counts of stored checkpoints, blobs and writes, and the bytes they hold.

        ``bytes`` is the sum of the serialized payloads (heads, metadata, channel
        values, writes), not Python's object overhead. Blobs that several
        threads share after :meth:`copy_thread` count once per thread.
        """
        out = {"checkpoints": 0, "blobs": 0, "writes": 0, "bytes": 0}
        with self._lock:
            for spaces in self._threads.values():
                for ns in spaces.values():
                    out["checkpoints"] += len(ns.checkpoints)
                    out["blobs"] += len(ns.blobs)
                    out["bytes"] += sum(
                        len(r[0][1]) + len(r[_METADATA]) for r in ns.checkpoints.values()
                    )
                    out["bytes"] += sum(len(b[1]) for b in ns.blobs.values())
                    for bucket in ns.writes.values():
                        out["writes"] += len(bucket)
                        out["bytes"] += sum(len(w[4][1]) for w in bucket.values())
        return out


_MISSING: Any = object()


def _where(tid: str, ns_name: str, cid: str, channel: str) -> str:
    ns = f", ns {ns_name!r}" if ns_name else ""
    return f"of thread {tid!r}{ns}, checkpoint {cid!r}, channel {channel!r}"

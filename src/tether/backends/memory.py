"""In-memory saver (SPEC S5.1): for tests, demos and short-lived processes.

Layout: thread -> namespace -> a small store holding checkpoints by id, channel
blobs by (channel, version) and writes by checkpoint. Channel values are kept
apart from checkpoints, so a channel that did not change between steps is
stored once (the reference keyed blobs the same way).

Everything stored is serialized (channel values and writes through the
saver's serializer, checkpoint heads and metadata through MessagePack), so a
caller that mutates its dicts after ``put`` or after a read never changes what
the saver holds, and the in-memory backend exercises the same serializer (and
the same allowlist) as the persistent ones.

One re-entrant lock guards all maps, so the saver is safe under concurrent use
from many threads (the reference one is not) and from asyncio tasks: async
methods run the sync ones inline (:class:`~tether.backends._bridge.InlineAsyncMixin`);
no lock is ever held across an ``await``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    merge_metadata,
    metadata_matches,
    prepare_writes,
    split_channel_values,
)
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    PendingWrite,
)
from tether.errors import ConfigError
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol

__all__ = ["InMemorySaver"]

_Typed = tuple[str, bytes]


@dataclass(slots=True)
class _Row:
    head: _Typed  # the checkpoint without channel_values, serialized
    metadata: bytes  # JSON-safe metadata, MessagePack
    run_id: Any
    parent_id: str | None
    versions: dict[str, str]  # channel -> version, for reads and blob GC


@dataclass(slots=True)
class _Write:
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: _Typed


@dataclass(slots=True)
class _Namespace:
    checkpoints: dict[str, _Row] = field(default_factory=dict)
    blobs: dict[tuple[str, str], _Typed] = field(default_factory=dict)
    writes: dict[str, dict[tuple[str, int], _Write]] = field(default_factory=dict)
    latest: str | None = None

    def recompute_latest(self) -> None:
        self.latest = max(self.checkpoints) if self.checkpoints else None

    def collect_blobs(self) -> None:
        """Drop blobs that no remaining checkpoint refers to."""
        live = {(ch, v) for row in self.checkpoints.values() for ch, v in row.versions.items()}
        for key in [k for k in self.blobs if k not in live]:
            del self.blobs[key]


class InMemorySaver(InlineAsyncMixin, BaseCheckpointSaver):
    """A thread-safe saver that keeps everything in process memory.

    Example:
        >>> from tether import InMemorySaver, make_config
        >>> saver = InMemorySaver()
        >>> saver.get_tuple(make_config("t1")) is None
        True
    """

    def __init__(
        self, *, serde: SerializerProtocol | UntypedSerializerProtocol | None = None
    ) -> None:
        super().__init__(serde=serde)
        self._lock = threading.RLock()
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

    def _tuple(self, addr: Address, ns: _Namespace, cid: str, row: _Row) -> CheckpointTuple:
        serde = self.serde
        at = addr.with_id(cid)
        head: dict[str, Any] = decode_value(serde, *row.head, address=at)
        values: dict[str, Any] = {}
        for channel, version in row.versions.items():
            blob = ns.blobs.get((channel, version))
            if blob is None or blob[0] == EMPTY_TAG:
                continue
            values[channel] = decode_value(serde, *blob, address=at, channel=channel)
        head["channel_values"] = values
        writes = ns.writes.get(cid)
        pending: list[PendingWrite] = []
        if writes:
            for w in sorted(writes.values(), key=lambda w: (w.task_path, w.task_id, w.idx)):
                pending.append(
                    (
                        w.task_id,
                        w.channel,
                        decode_value(
                            serde, *w.value, address=at, channel=w.channel, task_id=w.task_id
                        ),
                    )
                )
        parent = addr.with_id(row.parent_id).to_config() if row.parent_id else None
        return CheckpointTuple(
            config=at.to_config(),
            checkpoint=head,  # type: ignore[arg-type]
            metadata=ormsgpack.unpackb(row.metadata),
            parent_config=parent,
            pending_writes=pending,
        )

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        addr = Address.from_config(config)
        with self._lock:
            ns = self._threads.get(addr.thread_id, {}).get(addr.checkpoint_ns)
            if ns is None:
                return None
            cid = addr.checkpoint_id or ns.latest
            row = ns.checkpoints.get(cid) if cid else None
            if cid is None or row is None:
                return None
            return self._tuple(addr, ns, cid, row)

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
        for cid, tid, ns_name in keys:
            with self._lock:
                space = self._threads.get(tid, {}).get(ns_name)
                row = space.checkpoints.get(cid) if space else None
                if space is None or row is None:
                    continue  # deleted since the listing started
                if want and not metadata_matches(ormsgpack.unpackb(row.metadata), want):
                    continue
                tup = self._tuple(Address(tid, ns_name), space, cid, row)
            yield tup
            produced += 1
            if limit is not None and produced >= limit:
                return

    # --- writes -----------------------------------------------------------------

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
        head, blobs = split_channel_values(checkpoint, new_versions)
        serde = self.serde
        # Serialize outside the lock: it is the expensive part and touches no shared state.
        head_typed = serde.dumps_typed(head)
        blob_rows = {
            (channel, version): (EMPTY_TAG, b"") if value is EMPTY else serde.dumps_typed(value)
            for channel, (version, value) in blobs.items()
        }
        cid = checkpoint["id"]
        row = _Row(
            head=head_typed,
            metadata=ormsgpack.packb(meta),
            run_id=meta.get("run_id"),
            parent_id=addr.checkpoint_id,
            versions={k: str(v) for k, v in checkpoint["channel_versions"].items()},
        )
        with self._lock:
            ns = self._threads.setdefault(addr.thread_id, {}).setdefault(
                addr.checkpoint_ns, _Namespace()
            )
            ns.blobs.update(blob_rows)
            ns.checkpoints[cid] = row
            if ns.latest is None or cid > ns.latest:
                ns.latest = cid
        return Address(addr.thread_id, addr.checkpoint_ns, cid).to_config()

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
        encoded = [
            _Write(r.task_id, r.task_path, r.idx, r.channel, self.serde.dumps_typed(r.value))
            for r in rows
        ]
        with self._lock:
            ns = self._threads.setdefault(addr.thread_id, {}).setdefault(
                addr.checkpoint_ns, _Namespace()
            )
            bucket = ns.writes.setdefault(addr.checkpoint_id, {})
            for w in encoded:
                key = (w.task_id, w.idx)
                if w.idx >= 0 and key in bucket:
                    continue  # ordinary writes are insert-or-ignore
                bucket[key] = w

    # --- thread operations ----------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(str(thread_id), None)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = set(check_thread_ids(run_ids, "run_ids"))
        if not runs:
            return
        with self._lock:
            for tid in list(self._threads):
                spaces = self._threads[tid]
                for name in list(spaces):
                    ns = spaces[name]
                    doomed = [c for c, r in ns.checkpoints.items() if str(r.run_id) in runs]
                    if not doomed:
                        continue
                    for cid in doomed:
                        del ns.checkpoints[cid]
                        ns.writes.pop(cid, None)
                    ns.collect_blobs()
                    ns.recompute_latest()
                    if not ns.checkpoints and not ns.writes:
                        del spaces[name]
                if not spaces:
                    del self._threads[tid]

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
                # bytes), so sharing them between threads is safe.
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

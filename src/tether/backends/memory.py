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
the same allowlist) as the persistent ones, with one exception. Under tether's
own :class:`~tether.serde.MsgpackSerializer` (that class exactly: a subclass
may encode differently), a channel value or pending write whose type is
exactly ``int``, ``float``, ``bool``, ``NoneType``, or ``str`` holding only
ASCII, is kept as the object itself. That is safe because such an object is
immutable (no caller can change it after ``put``, nor change what a later read
returns by mutating it) and because that serializer accepts every such value
and reads it back as the same value of the same type, so a reader cannot tell
the difference. Other strings are serialized (MessagePack replaces a lone
surrogate), and so are subclasses (an ``IntEnum`` comes back as the enum, as
before). :meth:`InMemorySaver.stats` counts such a value as the bytes the
serializer would write for it. Under that serializer too, a checkpoint head of
plain values (dict, list, str, int, float, bool, None) is packed by ormsgpack
itself, to the bytes the serializer would write for it; any other head goes
through the serializer, with its types and its errors.

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
from typing import Any, Final

import ormsgpack

from tether.backends._bridge import InlineAsyncMixin
from tether.backends._common import (
    EMPTY,
    EMPTY_TAG,
    EXCLUDED_METADATA_KEYS,
    MAX_METADATA_DEPTH,
    PLAIN_ONLY,
    check_channel_names,
    check_checkpoint,
    check_head,
    check_list_args,
    check_prune,
    check_thread_id,
    check_thread_ids,
    checkpoint_address,
    decode_value,
    index_writes,
    merge_metadata,
    metadata_matches,
)
from tether.backends._delta import DEFAULT_MIN_BYTES, AppendTracker, Row, join_append, supports
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    MAX_NAME_BYTES,
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    PendingWrite,
    StoredWrite,
    address_fields,
)
from tether.errors import ConfigError, DecodeError, StorageError, TetherError
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol
from tether.serde.msgpack import MsgpackSerializer

__all__ = ["GROUP", "InMemorySaver"]

#: ``list`` shares decoded snapshots between the tuples of groups this large.
GROUP = 64

# What a serializer returns: (tag, bytes).
_Typed = tuple[str, bytes]

# A stored channel value: (tag, serialized bytes, base). ``base`` is the
# snapshot version a tail extends (the value is snapshot + tail), else None.
# Tag None: a value kept as is (see the module docs and _AS_IS), never a
# tail: a str itself, anything else boxed in a 1-tuple (so that every payload
# has a length, as the delta tests read blobs).
_Blob = tuple[str | None, Any, str | None]

#: Exact types of values kept as is under tether's MsgpackSerializer (a str
#: only when ASCII): immutable, and that serializer gives back the same value
#: of the same type, so skipping it changes nothing a reader can see.
_AS_IS: Final = frozenset({int, float, bool, type(None), str})
_NOTHING: Final[frozenset[type]] = frozenset()

# Blobs of the commonest values kept as is, shared (they are immutable): a
# put of a bool or small int channel allocates nothing to store it.
_TRUE_BLOB: Final[_Blob] = (None, (True,), None)
_FALSE_BLOB: Final[_Blob] = (None, (False,), None)
_INT_BLOBS: Final[tuple[_Blob, ...]] = tuple((None, (i,), None) for i in range(256))

_packb = ormsgpack.packb
_unpackb = ormsgpack.unpackb

#: What :meth:`InMemorySaver.stats` counts for a value kept as is.
_SIZER: Final = MsgpackSerializer(env_allowlist=False)  # sizes only; import never fails

_EMPTY_BLOB: _Blob = (EMPTY_TAG, b"", None)

# One channel of a checkpoint being read: (channel, its blob, the snapshot blob
# a tail extends or None).
_Part = tuple[str, _Blob, _Blob | None]


# A stored checkpoint: (head, metadata, run_id, parent_id, channels, versions,
# unstored). ``head`` is the checkpoint without channel_values: plain
# MessagePack bytes (see PLAIN_ONLY), else the serializer's (tag, bytes);
# ``metadata`` the JSON-safe metadata as MessagePack; ``channels`` and
# ``versions`` its channel_versions as two tuples, zipped they are the blob
# keys (a version that is not a str is keyed as str(version), see _key);
# ``unstored`` the channels of channel_versions that had no blob when it was
# put (read as absent; any other channel without a blob is a StorageError),
# None when there were none. Stored data is plain
# tuples of strings and bytes, never a class or a dict, and few of them: the
# garbage collector stops tracking such tuples, so a large store adds nothing
# to later collections. (With a row object and a versions dict per
# checkpoint, W2's 10,000 puts set off a full collection the reference saver
# did not: a sixth of the put time. Every tuple a put leaves behind counts
# towards the next young collection, hence two flat tuples rather than one
# tuple of pairs, and the shared blobs above.)
_Head = bytes | _Typed
_Row = tuple[
    _Head, bytes, Any, str | None, tuple[str, ...], tuple[Any, ...], tuple[str, ...] | None
]
_METADATA: Final = 1
_RUN_ID: Final = 2
_PARENT: Final = 3
_CHANNELS: Final = 4
_VERSIONS: Final = 5
_UNSTORED: Final = 6


# A stored write: (task_path, task_id, idx, channel, tag, data), tag and data
# as in a blob but never boxed (tag None: data is the value kept as is).
# Tuples sort in the contract's read order (S2.4); (task_id, idx) is unique
# per checkpoint, so the comparison never reaches the channel or the value.
_Write = tuple[str, str, int, str, str | None, Any]

_NO_VALUES: Final[Mapping[str, Any]] = {}
_NO_WRITES: Final[tuple[_Write, ...]] = ()


class _Namespace:
    __slots__ = ("blobs", "checkpoints", "latest", "writes")

    def __init__(self) -> None:
        # (by hand: a dataclass's default_factory fields cost twice as much to
        # build, and W2 starts a namespace every five puts)
        self.checkpoints: dict[str, _Row] = {}
        self.blobs: dict[tuple[str, str], _Blob] = {}
        self.writes: dict[str, dict[tuple[str, int], _Write]] = {}
        self.latest: str | None = None

    def recompute_latest(self) -> None:
        self.latest = max(self.checkpoints) if self.checkpoints else None

    def collect_blobs(self) -> None:
        """Drop blobs no remaining checkpoint refers to, nor extends (one level)."""
        blobs = self.blobs
        live = {
            _key(key)
            for row in self.checkpoints.values()
            for key in zip(row[_CHANNELS], row[_VERSIONS], strict=True)
        }
        bases = set()
        for ch, v in live:
            blob = blobs.get((ch, v))
            if blob is not None and blob[2] is not None:
                bases.add((ch, blob[2]))
        live |= bases
        for key in [k for k in blobs if k not in live]:
            del blobs[key]

    def read(
        self, row: _Row, where: tuple[str, str, str]
    ) -> tuple[dict[str, Any], list[_Part] | None]:
        """A checkpoint's channel values, as far as they are read under the lock.

        Returns the values dict, in channel_versions order, and the blobs of
        the channels still to decode (None when there are none), whose keys
        hold None until then; values kept as is are filled in. Call under the
        lock; decode after releasing it. ``where``: (thread, ns, checkpoint id)
        for the error when a blob the put found is gone.
        """
        blobs = self.blobs
        values: dict[str, Any] = {}
        parts: list[_Part] | None = None
        # (two tuples of one length: strict= would only cost a keyword call)
        for key in zip(row[_CHANNELS], row[_VERSIONS]):  # noqa: B905
            blob = blobs.get(key)
            if blob is None:
                blob = blobs.get(_key(key)) if type(key[1]) is not str else None
                if blob is None:
                    unstored = row[_UNSTORED]
                    if unstored is not None and key[0] in unstored:
                        continue  # never stored: absent, as the put was given it
                    raise StorageError(
                        f"the value {_where(*where, key[0])} at version {str(key[1])!r} is "
                        "missing: the checkpoint names it and its blob is gone; the store is "
                        "damaged"
                    )
            tag, data, base = blob
            if tag is None:
                values[key[0]] = data if type(data) is str else data[0]
            elif tag != EMPTY_TAG:
                values[key[0]] = None
                part = (key[0], blob, None if base is None else blobs.get((key[0], base)))
                if parts is None:
                    parts = [part]
                else:
                    parts.append(part)
        return values, parts

    def sorted_writes(self, cid: str) -> list[_Write]:
        """A checkpoint's writes in contract order (call under the lock)."""
        bucket = self.writes.get(cid)
        return sorted(bucket.values()) if bucket else []


# A tail of a put: its channel, the snapshot it extends, the whole value otherwise.
_Needs = tuple[str, str, Row]

# What put may do under a serializer (see InMemorySaver._modes_of).
_Modes = tuple[SerializerProtocol, AppendTracker | None, bool]


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
        self._modes = self._modes_of(self.serde)

    def _modes_of(self, serde: SerializerProtocol) -> _Modes:
        """What ``put`` may do under ``serde``: (serde, the append tracker or None, as-is)."""
        # Only tether's MessagePack decodes an array as the list of its elements;
        # only that exact class round-trips the _AS_IS scalars to themselves.
        return (
            serde,
            self._appends if supports(serde) else None,
            type(serde) is MsgpackSerializer,
        )

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
        self,
        tid: str,
        ns_name: str,
        cid: str,
        row: _Row,
        values: dict[str, Any],
        parts: list[_Part] | None,
        writes: Sequence[_Write],
        memo: dict[tuple[str, str, str, str], Any] | None,
    ) -> CheckpointTuple:
        """A checkpoint read under the lock (see _Namespace.read), decoded after releasing it."""
        head_data, metadata, _, parent, _, _, _ = row
        loads = self.serde.loads_typed
        # The common case goes straight to the serializer; on a DecodeError
        # _decode decodes again to name thread, checkpoint and channel.
        head: dict[str, Any]
        if isinstance(head_data, bytes):
            head = _unpackb(head_data)  # plain MessagePack that put wrote
        else:
            try:
                head = loads(head_data)
            except DecodeError:
                head = self._decode(head_data, tid, ns_name, cid)
        if head.get("id") != cid:
            raise StorageError(
                f"the stored head of thread {tid!r}, checkpoint {cid!r} says its checkpoint id "
                f"is {head.get('id')!r}; the store is damaged"
            )
        for channel, (tag, data, base), snap in parts or ():
            assert tag is not None  # read() filled in the values kept as is
            try:
                value = loads((tag, data))
            except DecodeError:
                value = self._decode((tag, data), tid, ns_name, cid, channel)
            if base is not None:
                value = self._join(tid, ns_name, cid, channel, base, snap, value, memo)
            values[channel] = value
        head["channel_values"] = values
        pending: list[PendingWrite] = []
        for _, task_id, _, channel, wtag, wdata in writes:
            if wtag is None:
                pending.append((task_id, channel, wdata))  # kept as is
                continue
            try:
                value = loads((wtag, wdata))
            except DecodeError:
                value = self._decode((wtag, wdata), tid, ns_name, cid, channel, task_id)
            pending.append((task_id, channel, value))
        # tuple.__new__: CheckpointTuple's own __new__ is Python code, and this is
        # the same five fields.
        out: CheckpointTuple = _new_tuple(
            CheckpointTuple,
            (
                {
                    "configurable": {
                        "thread_id": tid,
                        "checkpoint_ns": ns_name,
                        "checkpoint_id": cid,
                    }
                },
                head,
                _unpack_metadata(metadata),
                {
                    "configurable": {
                        "thread_id": tid,
                        "checkpoint_ns": ns_name,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None,
                pending,
            ),
        )
        return out

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
            tag = snap[0] if snap is not None else None  # a snapshot is never kept as is
            if snap is None or tag is None:
                raise StorageError(
                    f"the snapshot {base!r} that value {_where(tid, ns_name, cid, channel)} "
                    "extends is missing; the store is damaged"
                )
            snapshot = self._decode((tag, snap[1]), tid, ns_name, cid, channel)
            if memo is not None:
                memo[key] = snapshot
        return join_append(snapshot, tail, where=_where(tid, ns_name, cid, channel))

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        tid, ns_name, cid = address_fields(config, bounded=False)
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
            values, parts = ns.read(row, (tid, ns_name, cid))
            bucket = ns.writes.get(cid)
            writes = sorted(bucket.values()) if bucket else _NO_WRITES
        return self._build(tid, ns_name, cid, row, values, parts, writes, None)

    def get_writes(self, config: Config) -> list[StoredWrite]:
        addr = checkpoint_address(config, "get_writes")
        tid, ns_name, cid = addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id
        assert cid is not None
        with self._lock:
            spaces = self._threads.get(tid)
            ns = spaces.get(ns_name) if spaces else None
            writes = ns.sorted_writes(cid) if ns is not None else []
        out: list[StoredWrite] = []
        for task_path, task_id, idx, channel, wtag, wdata in writes:
            value = (
                wdata
                if wtag is None  # kept as is
                else self._decode((wtag, wdata), tid, ns_name, cid, channel, task_id)
            )
            out.append(StoredWrite(task_id, channel, value, task_path, idx))
        return out

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
                if want and not metadata_matches(_unpack_metadata(row[_METADATA]), want):
                    continue
                values, parts = space.read(row, (tid, ns_name, cid))
                writes = space.sorted_writes(cid)
            if produced % GROUP == 0:
                memo = {}
            yield self._build(tid, ns_name, cid, row, values, parts, writes, memo)
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
        # check_checkpoint and split_channel_values, inline for plain dicts: the
        # same checks in the same order; anything they would not pass at a
        # glance goes to check_checkpoint (which raises, or lets it through).
        values: Mapping[str, Any]
        cid: str
        versions: Any
        if type(checkpoint) is dict and type(new_versions) is dict:
            head: dict[str, Any] = dict(checkpoint)
            values = head.pop("channel_values", _NO_VALUES)
            cid = head.get("id")  # type: ignore[assignment]  # checked just below
            versions = head.get("channel_versions")
            if not (
                type(cid) is str
                and cid
                and cid.isascii()
                and "\x00" not in cid
                and len(cid) <= MAX_NAME_BYTES
                and type(versions) is dict
                and type(values) is dict
                and new_versions.items() <= versions.items()
            ):
                check_checkpoint(checkpoint, new_versions)
        else:
            check_checkpoint(checkpoint, new_versions)
            head = dict(checkpoint)
            values = head.pop("channel_values", _NO_VALUES)
            cid = head["id"]
            versions = head["channel_versions"]
        if type(cid) is not str:  # a str subclass: stored as the plain str
            cid = head["id"] = str.__str__(cid)
        fast = _packed_metadata(config, metadata)
        if fast is not None:
            meta_data, run_id = fast
        else:
            meta = merge_metadata(config, metadata)
            meta_data = _pack_metadata(meta)
            run_id = meta.get("run_id")
        # Plain JSON, as every backend requires: checked (and packed, in C)
        # before any value is serialized, so its errors come first everywhere.
        try:
            packed_head = check_head(head, cid)
        except ConfigError:
            check_channel_names(new_versions, cid)  # a bad name is named as such first
            raise
        get = values.get if values else _NO_VALUES.get
        serde = self.serde
        modes = self._modes
        if modes[0] is not serde:
            modes = self._modes = self._modes_of(serde)
        _, appends, plain = modes
        as_is = _AS_IS if plain else _NOTHING
        dumps = serde.dumps_typed
        # Serialize outside the lock: it is the expensive part and touches no shared state.
        blobs: dict[tuple[str, str], _Blob] = {}
        needs: list[_Needs] | None = None
        for channel, v in new_versions.items():
            if (
                type(channel) is not str
                or not channel.isascii()
                or "\x00" in channel
                or len(channel) > MAX_NAME_BYTES
                or (
                    type(v) is not int
                    and (
                        type(v) is not str
                        or not v.isascii()
                        or "\x00" in v
                        or len(v) > MAX_NAME_BYTES
                    )
                )
            ):
                check_channel_names({channel: v}, cid)
            version = str(v)
            value = get(channel, EMPTY)
            kind = type(value)
            if kind in as_is:
                if kind is str:
                    if value.isascii():
                        blobs[(channel, version)] = (None, value, None)
                        continue
                elif kind is bool:
                    blobs[(channel, version)] = _TRUE_BLOB if value else _FALSE_BLOB
                    continue
                elif kind is int and 0 <= value < 256:
                    blobs[(channel, version)] = _INT_BLOBS[value]
                    continue
                else:
                    blobs[(channel, version)] = (None, (value,), None)
                    continue
            if value is EMPTY:
                blobs[(channel, version)] = _EMPTY_BLOB
                continue
            try:
                tag, data = dumps(value)
            except TetherError:
                # A bad name or version later in new_versions is reported
                # first, as the backends that check them all up front do.
                check_channel_names(new_versions, cid)
                raise
            # Short or non-list values are stored whole (plan() would say so too).
            if appends is None or tag != "msgpack" or len(data) < appends.min_bytes:
                blobs[(channel, version)] = (tag, data, None)
                continue
            plan = appends.plan((tid, ns_name, channel), version, tag, data)
            for r in plan.rows:
                blobs[(channel, r.version)] = (r.tag, r.data, r.base)
            if plan.needs is not None and plan.fallback is not None:
                if needs is None:
                    needs = []
                needs.append((channel, plan.needs, plan.fallback))
        # A head of plain values (the usual one) is plain MessagePack, which
        # tether's serializer would write the same way; anything else is
        # the serializer's (its types, its errors).
        head_data: _Head
        head_data = packed_head if plain and packed_head is not None else dumps(head)
        row: _Row = (
            head_data,
            meta_data,
            run_id,
            parent_id,
            tuple(versions),
            tuple(versions.values()),
            None,
        )
        # Channels whose values earlier puts stored: checked under the lock.
        carried = (
            None
            if new_versions.keys() >= versions.keys()
            else [item for item in versions.items() if item[0] not in new_versions]
        )
        with self._lock:
            spaces = self._threads.get(tid)
            ns = spaces.get(ns_name) if spaces else None
            if ns is None:
                ns = self._namespace(tid, ns_name)
            if carried:
                missing = [c for c, v in carried if _key((c, v)) not in ns.blobs]
                if missing:
                    row = _with_unstored(ns, row, missing, tid, ns_name, cid)
            for channel, snapshot, whole in needs or ():
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
        serde = self.serde
        dumps = serde.dumps_typed
        as_is = type(serde) is MsgpackSerializer
        encoded: list[_Write] = []
        for idx, channel, value in rows:
            kind = type(value)
            if as_is and kind in _AS_IS and (kind is not str or value.isascii()):
                encoded.append((task_path, task_id, idx, channel, None, value))
            else:
                tag, data = dumps(value)
                encoded.append((task_path, task_id, idx, channel, tag, data))
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
        tid = check_thread_id(thread_id, bounded=False)
        with self._lock:
            self._threads.pop(tid, None)
        self._forget([tid])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = set(check_thread_ids(run_ids, "run_ids", bounded=False))
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
        src_id = check_thread_id(source_thread_id, "source_thread_id", bounded=False)
        dst_id = check_thread_id(target_thread_id, "target_thread_id")
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
        tids = check_thread_ids(thread_ids, bounded=False)
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
                    for r in ns.checkpoints.values():
                        head = r[0]
                        out["bytes"] += len(head if isinstance(head, bytes) else head[1])
                        out["bytes"] += len(r[_METADATA])
                    out["bytes"] += sum(_size(b[0], b[1], True) for b in ns.blobs.values())
                    for bucket in ns.writes.values():
                        out["writes"] += len(bucket)
                        out["bytes"] += sum(_size(w[4], w[5]) for w in bucket.values())
        return out


_MISSING: Any = object()

_new_tuple: Any = tuple.__new__


def _with_unstored(
    ns: _Namespace, row: _Row, missing: list[str], tid: str, ns_name: str, cid: str
) -> _Row:
    """The row recording the carried channels without a blob (call under the lock).

    A caller may name channels in channel_versions that no put wrote (they
    read as absent); a value the parent checkpoint had, though, is one the
    store lost: refused rather than carried over as absent.
    """
    parent_id = row[_PARENT]
    parent = ns.checkpoints.get(parent_id) if parent_id is not None else None
    if parent is not None:
        had = dict(zip(parent[_CHANNELS], parent[_VERSIONS], strict=True))
        lacked = parent[_UNSTORED] or ()
        mine = dict(zip(row[_CHANNELS], row[_VERSIONS], strict=True))
        for channel in missing:
            if channel in had and str(had[channel]) == str(mine[channel]) and channel not in lacked:
                raise StorageError(
                    f"the value of channel {channel!r} at version {str(mine[channel])!r} "
                    f"that checkpoint {parent_id!r} of thread {tid!r} names is missing: its "
                    f"blob is gone and the store is damaged. Checkpoint {cid!r}, which "
                    "carries it over, was not stored"
                )
    return (*row[:_UNSTORED], tuple(missing))


def _key(item: tuple[str, Any]) -> tuple[str, str]:
    """The blob key of a ``(channel, version)`` item: versions are keyed as str(version)."""
    return item if type(item[1]) is str else (item[0], str(item[1]))


_NESTED: Final = frozenset({dict, list})


def _packed_metadata(config: Config, metadata: CheckpointMetadata) -> tuple[bytes, Any] | None:
    """``(packb(merge_metadata(config, metadata)), run_id)`` for the common call, else None.

    The common call: a config with nothing to merge (no ``metadata``, only
    addressing keys in ``configurable``) and metadata that is a dict of plain
    JSON values (:data:`PLAIN_ONLY`, no bytes or float, no NUL in a string)
    without a ``"writes"`` key. merge_metadata would return an equal copy,
    packed to the same bytes. Anything else returns None: the caller runs
    merge_metadata (its checks, its errors).
    """
    if type(metadata) is not dict or type(config) is not dict or "writes" in metadata:
        return None
    if config.get("metadata"):
        return None
    conf = config.get("configurable")
    if conf and (type(conf) is not dict or not conf.keys() <= EXCLUDED_METADATA_KEYS):
        return None
    run_id: Any = metadata.get("run_id")
    if type(run_id) is dict or type(run_id) is list:
        return None  # the row keeps run_id: never a dict the caller holds
    if type(run_id) is str and len(run_id) * 4 > MAX_NAME_BYTES:
        return None  # maybe past the limit: merge_metadata checks it (#20.3)
    try:
        data = _packb(metadata, option=PLAIN_ONLY)
    except TypeError:
        return None
    # A bin header (bytes, which metadata refuses) or a float64 one (NaN and
    # inf are refused): the general path decides. Non-ASCII text and some
    # ints hold such bytes too; they just take the general path. (ormsgpack
    # writes no float32 for a Python float.)
    if 0xCB in data or 0xC4 in data or 0xC5 in data or 0xC6 in data:
        return None
    # Every level of nesting takes a byte: short metadata cannot be nested
    # deeper than merge_metadata allows; longer metadata with a nested
    # container takes the general path, which checks the depth.
    if len(data) > MAX_METADATA_DEPTH:
        for nested in metadata.values():
            if type(nested) in _NESTED and nested:
                return None
    # A NUL in a str (merge_metadata strips it) packs as a 0 byte, and so does
    # the int 0 (step 0). Only then look at the strings, at the top level;
    # a nested container then takes the general path.
    if 0 in data:
        value: Any
        for key, value in metadata.items():
            kind = type(value)
            if "\x00" in key or (kind is str and "\x00" in value) or (kind in _NESTED and value):
                return None
    return data, run_id


# Metadata is JSON (merge_metadata checked it), whose integers have no size
# limit; MessagePack's stop at 64 bits. Larger ones are kept as an ext type
# holding their decimal digits.
_EXT_BIG_INT: Final = 1


def _big_int(obj: Any) -> ormsgpack.Ext:
    if type(obj) is int:
        return ormsgpack.Ext(_EXT_BIG_INT, str(obj).encode())
    raise TypeError(f"metadata value of type {type(obj).__name__}")  # merge_metadata refused it


def _read_ext(code: int, data: bytes) -> Any:
    if code == _EXT_BIG_INT:
        return int(data)
    raise DecodeError(f"stored metadata holds an unknown MessagePack ext type {code}")


def _pack_metadata(meta: dict[str, Any]) -> bytes:
    """Stored metadata: plain MessagePack, integers beyond 64 bits as ext 1."""
    try:
        return _packb(meta)
    except TypeError:
        return _packb(meta, default=_big_int, option=ormsgpack.OPT_PASSTHROUGH_BIG_INT)


def _unpack_metadata(data: bytes) -> Any:
    return _unpackb(data, ext_hook=_read_ext)


def _size(tag: str | None, data: Any, boxed: bool = False) -> int:
    """The bytes :meth:`InMemorySaver.stats` counts for a stored value.

    A value kept as is (tag None; in a blob, boxed in a 1-tuple) counts as
    what tether's serializer would write for it.
    """
    if tag is not None:
        return len(data)
    return len(_SIZER.dumps_typed(data[0] if boxed and type(data) is tuple else data)[1])


def _where(tid: str, ns_name: str, cid: str, channel: str) -> str:
    ns = f", ns {ns_name!r}" if ns_name else ""
    return f"of thread {tid!r}{ns}, checkpoint {cid!r}, channel {channel!r}"

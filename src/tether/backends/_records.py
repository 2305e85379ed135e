"""The record layer (#14): what a put stores, and how stored records become a tuple.

I/O-free. A backend only moves records: it stores what :func:`encode_put` and
:func:`encode_writes` return and hands what it fetched to :func:`assemble` and
:func:`decode_writes`. Validation, serialization, payload encoding (checksum,
compression: :mod:`tether.backends._payload`), append deltas
(:mod:`tether.backends._delta`) and every decode error's context live here
once, not once per backend.

The records:

* :class:`PutPlan` -- one checkpoint to store: its head (the checkpoint
  without channel values, through the serializer), metadata (merged,
  JSON-safe), the text of every channel version, the value records of the
  channels the put names, and for each append tail the whole value to store
  instead if the snapshot it extends is gone (:meth:`PutPlan.resolve`).
* :class:`ValueRecord` / :data:`StoredValue` -- one channel value at one
  version, written / as read back.
* :class:`WriteRecord` -- one pending write.

What a backend still decides, because only it can see its storage in one
transaction: whether a snapshot a tail extends is still there, and which
channels the put carries over (``PutPlan.carried``) have no stored value
(:func:`check_carried` refuses the ones the parent promised).

Used by every backend. Postgres keeps small primitive values inline in its
JSONB head (``encode_put(inline=...)``) and resolves the channels a put
carries over inside its ``put`` statement (``postgres/_sql.py``), because
there that is one round trip; the records are the same. With a keyring, a
put's records are sealed by :mod:`tether.backends._seal_put`.

Why one long module: encoding a put or a batch of writes and assembling a
tuple back are the two directions of one record format, sharing its record
types and the context every decode error names; split, each half would
re-state what the other stores.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

import msgspec

from tether.backends._delta import (
    AppendTracker,
    Row,
    join_append,
    supports,
)
from tether.backends._pages import RUN, DecodeMemo, extend_run, part
from tether.backends._payload import ENCODING_PLAIN, ENCRYPTED, BlobCodec
from tether.backends._payload import where as _where
from tether.backends._seal_put import seal_put
from tether.checkpoint import (
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    PendingWrite,
    StoredWrite,
)
from tether.contract import (
    EMPTY,
    EMPTY_TAG,
    check_checkpoint,
    check_head,
    decode_value,
    loads_json,
    merge_metadata,
    prepare_writes,
    split_channel_values,
)
from tether.encryption import (
    SEALED_METADATA,
    metadata_place,
    open_checkpoint,
    open_head,
    value_place,
    write_place,
)
from tether.errors import ConfigError, DecodeError, StorageError
from tether.serde.base import SerializerProtocol

__all__ = [
    "HEAD_JSON",
    "BlobKey",
    "Fallback",
    "PutPlan",
    "StoredValue",
    "ValueRecord",
    "WriteRecord",
    "assemble",
    "assemble_inline",
    "check_carried",
    "decode_head",
    "decode_stored",
    "decode_values",
    "decode_writes",
    "encode_put",
    "encode_writes",
]

StoredValue: TypeAlias = tuple[str, int, bytes | None, str | None]
"""``(type, encoding, payload, base)`` of a value as read back (``base``: see _delta)."""


BlobKey: TypeAlias = tuple[str, str, str, str]
"""``(thread_id, checkpoint_ns, channel, version)``: the key of a stored value."""

#: The type of a checkpoint head stored as JSON text (UTF-8), as Postgres keeps
#: it in JSONB: every backend refuses a head that is not plain JSON
#: (:func:`~tether.contract.check_head`), so it needs no serializer.
#: Heads written before (SQLite schema < 6) carry the serializer's type and are
#: read through it.
HEAD_JSON = "head+json"

_MISSING: Any = object()
_encode_json = msgspec.json.encode
_new_tuple = tuple.__new__


# --- what a put stores ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValueRecord:
    """One channel value at one version, encoded (``base``: the snapshot a tail extends)."""

    channel: str
    version: str
    type: str
    encoding: int
    payload: bytes
    base: str | None = None

    @property
    def stored(self) -> StoredValue:
        return (self.type, self.encoding, self.payload, self.base)


@dataclass(frozen=True, slots=True)
class Fallback:
    """A tail that extends a snapshot an earlier put wrote, and what to store if it is gone.

    ``whole`` is the serializer's bytes of the whole value, encoded (checksum,
    compression) only when it is stored: almost never, and compressing a long
    history at every step doubled SQLite's put.
    """

    index: int  # of the tail in PutPlan.values
    snapshot: str  # the version of the snapshot it extends
    channel: str
    whole: Row


@dataclass(frozen=True, slots=True)
class PutPlan:
    """Everything one ``put`` stores, validated and encoded (see :func:`encode_put`)."""

    address: Address  # the new checkpoint's thread, namespace and id
    parent_id: str | None
    run_id: str | None
    # The checkpoint without channel values, (HEAD_JSON, JSON text); with
    # encode_put(inline=...), its channel_values hold the values kept inline.
    head: tuple[str, bytes]
    versions: dict[str, str]  # every channel of channel_versions -> its version as text
    carried: dict[str, str]  # the channels the put does not name: earlier puts stored them
    metadata: dict[str, Any]  # merged with the config's, JSON-safe
    values: tuple[ValueRecord, ...]
    fallbacks: tuple[Fallback, ...]
    # The channels the put names whose values the head keeps inline (no record).
    inlined: frozenset[str] = frozenset()

    @property
    def named(self) -> list[str]:
        """The channels the put names (``new_versions``): it stores their values."""
        carried = self.carried
        return [c for c in self.versions if c not in carried]

    def whole(self, appends: AppendTracker | None, codec: BlobCodec) -> list[ValueRecord]:
        """The value records with every tail stored whole (its snapshot may be gone).

        For a backend that learns only from a refused write that a snapshot was
        deleted (Postgres: the foreign key), and so cannot tell which.
        """
        return self.resolve(lambda _channel, _version: False, appends, codec)

    def resolve(
        self,
        has_value: Callable[[str, str], bool],
        appends: AppendTracker | None,
        codec: BlobCodec,
    ) -> list[ValueRecord]:
        """The value records to store: a tail whose snapshot is gone becomes its whole value.

        ``has_value(channel, version)`` looks in storage, inside the backend's
        write transaction (another process may have pruned the snapshot since
        this one wrote it).
        """
        values = list(self.values)
        for fb in self.fallbacks:
            if not has_value(fb.channel, fb.snapshot):
                if appends is not None:
                    addr = self.address
                    appends.forget((addr.thread_id, addr.checkpoint_ns, fb.channel))
                tid, ns = self.address.thread_id, self.address.checkpoint_ns
                place = value_place(tid, ns, fb.channel, fb.whole.version, None)
                whole = codec.encode_bytes(
                    fb.whole.tag, fb.whole.data, place if codec.crypt else None
                )
                values[fb.index] = ValueRecord(fb.channel, fb.whole.version, *whole)
        return values


def encode_put(
    serde: SerializerProtocol,
    codec: BlobCodec,
    appends: AppendTracker | None,
    config: Config,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    inline: Callable[[Any], bool] | None = None,
    envelope: bool = False,
) -> PutPlan:
    """Validate and encode one ``put`` (the contract's checks, then the serializer).

    ``appends`` stores long lists as a snapshot plus tails (only under a
    serializer :func:`~tether.backends._delta.supports`; ``None`` stores
    every value whole). ``inline(value)`` says which values the head keeps
    in its ``channel_values`` instead of a value record (values that survive
    the backend's JSON exactly, type included); ``None``: none. ``envelope``:
    with encryption, seal those values with the metadata, as one value
    (:func:`~tether.encryption.checkpoint_to_seal`), for a backend that carries
    a value over in Python (it seals it on its own in the new head:
    :func:`~tether.encryption.seal_inline`); Postgres copies heads' values in
    SQL, so it seals each on its own.

    Raises:
        ConfigError: the config, checkpoint, versions or metadata are not storable.
        EncodeError: a value cannot be serialized, or is larger than the codec allows.
    """
    addr = Address.from_config(config)
    check_checkpoint(checkpoint, new_versions)
    meta = merge_metadata(config, metadata)
    head, named = split_channel_values(checkpoint, new_versions)
    cid = head["id"]
    check_head(head, cid)  # plain JSON, as on every backend
    tid, ns = addr.thread_id, addr.checkpoint_ns
    if appends is not None and not supports(serde):
        appends = None
    crypt = codec.crypt
    values: list[ValueRecord] = []
    fallbacks: list[Fallback] = []
    inlined: dict[str, Any] = {}
    if crypt is None:
        for channel, (version, value) in named.items():
            if inline is not None and value is not EMPTY and inline(value):
                inlined[channel] = value
            elif appends is None or value is EMPTY:
                values.append(ValueRecord(channel, version, *codec.encode(serde, value)))
            else:
                plan = appends.plan((tid, ns, channel), version, *serde.dumps_typed(value))
                for ver, tag, encoding, payload, base in codec.encode_plan(plan):
                    values.append(ValueRecord(channel, ver, tag, encoding, payload, base))
                if plan.needs is not None and plan.fallback is not None:
                    fallbacks.append(Fallback(len(values) - 1, plan.needs, channel, plan.fallback))
    versions = {c: str(v) for c, v in checkpoint["channel_versions"].items()}
    run_id = meta.get("run_id")
    if crypt is not None:
        sealed = seal_put(
            crypt,
            codec,
            serde,
            appends,
            (tid, ns, cid, addr.checkpoint_id),
            named,
            versions,
            meta,
            inline,
            envelope,
        )
        values = [ValueRecord(*row) for row in sealed.rows]
        fallbacks = [Fallback(*fb) for fb in sealed.fallbacks]
        inlined, meta = sealed.inlined, sealed.metadata
    if inline is not None:
        head["channel_values"] = inlined
    return PutPlan(
        address=addr.with_id(cid),
        parent_id=addr.checkpoint_id,
        run_id=None if run_id is None else str(run_id),
        head=(HEAD_JSON, _encode_json(head)),  # check_head: plain JSON only
        versions=versions,
        carried={c: v for c, v in versions.items() if c not in new_versions},
        metadata=meta,
        values=tuple(values),
        fallbacks=tuple(fallbacks),
        inlined=frozenset(inlined),
    )


def check_carried(
    plan: PutPlan,
    missing: Collection[str],
    parent_versions: Mapping[str, str] | None,
    parent_unstored: Collection[str] | None,
) -> None:
    """Refuse a put that carries over a value its parent had and storage lost.

    ``missing``: the carried channels the backend found no stored value for.
    A caller may name channels in ``channel_versions`` that no put wrote (the
    contract allows it; they read as absent, and the backend records them as
    unstored). A value the parent checkpoint had, though -- same version, not
    among the parent's own unstored channels -- is one the store lost.
    ``parent_versions`` is ``None`` when the parent is not stored (or its
    record predates the rule).

    Raises:
        StorageError: naming the channel, the parent and the refused checkpoint.
    """
    if parent_versions is None:
        return
    lacked = parent_unstored or ()
    for channel in missing:
        version = plan.versions[channel]
        if parent_versions.get(channel) == version and channel not in lacked:
            addr = plan.address
            raise StorageError(
                f"the value of channel {channel!r} at version {version!r} that checkpoint "
                f"{plan.parent_id!r} of thread {addr.thread_id!r} names is missing: its "
                f"stored value is gone and the store is damaged. Checkpoint "
                f"{addr.checkpoint_id!r}, which carries it over, was not stored"
            )


# --- pending writes ---------------------------------------------------------------------------


class WriteRecord(NamedTuple):
    """One stored pending write.

    A named tuple rather than a frozen dataclass: a listing builds one per
    write row, and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) cost as much as verifying the row.
    """

    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    encoding: int
    value: bytes | None

    @property
    def replaces(self) -> bool:
        """Special writes (negative idx) replace; ordinary ones are insert-or-ignore (S2.4)."""
        return self.idx < 0

    @property
    def order(self) -> tuple[str, str, int]:
        """Pending writes are read back in this order (S2.4)."""
        return (self.task_path, self.task_id, self.idx)


def encode_writes(
    serde: SerializerProtocol,
    codec: BlobCodec,
    config: Config,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> tuple[Address, list[WriteRecord]]:
    """Validate and encode one ``put_writes`` batch: the checkpoint's address and its records.

    Raises:
        ConfigError: the config names no checkpoint, or the batch is malformed.
        EncodeError: a value cannot be serialized.
    """
    addr = Address.from_config(config)
    if addr.checkpoint_id is None:
        raise ConfigError(
            f"put_writes for thread {addr.thread_id!r} needs the config of a checkpoint "
            "(configurable.checkpoint_id), as returned by put()"
        )
    tid, ns, cid = addr.thread_id, addr.checkpoint_ns, addr.checkpoint_id
    prepared = prepare_writes(writes, task_id, task_path)
    if codec.crypt is None:
        return addr, [
            WriteRecord(r.task_id, r.task_path, r.idx, r.channel, *codec.encode(serde, r.value))
            for r in prepared
        ]
    encoded = codec.encode_many(
        serde,
        [(r.value, write_place(tid, ns, cid, r.task_id, r.idx, r.channel)) for r in prepared],
    )
    return addr, [
        WriteRecord(r.task_id, r.task_path, r.idx, r.channel, *e)
        for r, e in zip(prepared, encoded, strict=True)
    ]


def decode_writes(
    serde: SerializerProtocol,
    codec: BlobCodec,
    address: Address,
    writes: Sequence[WriteRecord],
) -> list[StoredWrite]:
    """``get_writes``: stored write records decoded, in the order given, with their keys."""
    tid, ns, cid = address.thread_id, address.checkpoint_ns, address.checkpoint_id or ""
    sealed = codec.crypt is not None
    return [
        StoredWrite(
            w.task_id,
            w.channel,
            codec.decode(
                serde,
                w.type,
                w.encoding,
                w.value,
                address=address,
                channel=w.channel,
                task_id=w.task_id,
                place=write_place(tid, ns, cid, w.task_id, w.idx, w.channel) if sealed else None,
            ),
            w.task_path,
            w.idx,
        )
        for w in writes
    ]


# --- reading a checkpoint back ------------------------------------------------------------------


def decode_head(
    serde: SerializerProtocol, head: tuple[str, bytes] | dict[str, Any], address: Address
) -> Any:
    """A stored head: JSON text (:data:`HEAD_JSON`), the serializer's (older rows), or
    a dict the backend's driver already decoded (Postgres JSONB).

    Raises:
        DecodeError: naming thread, namespace and checkpoint.
    """
    if isinstance(head, dict):
        return head
    tag, data = head
    if tag != HEAD_JSON:
        return decode_value(serde, tag, data, address=address)
    try:
        return loads_json(data)
    except ValueError as exc:
        raise DecodeError(
            "stored checkpoint head is not JSON; the row is damaged (restore it from a backup)",
            context={
                "thread_id": address.thread_id,
                "checkpoint_ns": address.checkpoint_ns or None,
                "checkpoint_id": address.checkpoint_id,
            },
        ) from exc


def decode_stored(
    serde: SerializerProtocol,
    codec: BlobCodec,
    address: Address,
    tag: str,
    encoding: int,
    payload: bytes | None,
    channel: str,
    task_id: str | None = None,
    place: bytes | None = None,
) -> Any:
    """One stored value or write, decoded; a failure names thread, namespace,
    checkpoint, channel (and task). ``place``: where it is stored, for a sealed
    value (:mod:`tether.encryption`)."""
    # The common case (plain bytes, no encryption) goes straight to the
    # serializer; the error path still names thread, namespace, checkpoint and channel.
    data = codec.clear_body(encoding, payload)
    if data is not None:
        try:
            return serde.loads_typed((tag, data))
        except DecodeError:
            pass  # decode again below, where the error gets its context
    return codec.decode(
        serde,
        tag,
        encoding,
        payload,
        address=address,
        channel=channel,
        task_id=task_id,
        place=place,
    )


def decode_values(
    serde: SerializerProtocol,
    codec: BlobCodec,
    *,
    address: Address,
    versions: Mapping[str, str],
    blobs: Mapping[BlobKey, StoredValue],
    values: dict[str, Any],
    memo: DecodeMemo | None = None,
    appends: AppendTracker | None = None,
    unstored: Collection[str] | None = (),
    envelope: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A checkpoint's channel values: ``values`` (those kept inline, returned with
    the others added) and the stored value of every other channel of ``versions``.

    The arguments are :func:`assemble`'s; ``envelope``: the values sealed with
    the checkpoint's metadata (:func:`~tether.encryption.open_checkpoint`),
    which ``values`` marks ``[]``. A channel stored as empty is left
    out; one without a stored value is left out when ``unstored`` names it
    (or is ``None``) and is damage otherwise.

    Raises:
        StorageError: a value, or the snapshot an append tail extends, is missing.
        DecodeError: a stored value cannot be decoded (thread, namespace,
            checkpoint and channel named).
    """
    tid, ns = address.thread_id, address.checkpoint_ns
    crypt = codec.crypt
    if values and (crypt is not None or any(type(v) is list for v in values.values())):
        values = open_head(
            crypt, tid, ns, versions, values, lambda c: _where(address, c, None), envelope
        )

    def place_of(channel: str, version: str, base: str | None) -> bytes | None:
        return value_place(tid, ns, channel, version, base) if crypt is not None else None

    for channel, version in versions.items():
        if channel in values:
            continue  # kept inline
        blob = blobs.get((tid, ns, channel, version))
        if blob is None:
            if unstored is None or channel in unstored:
                continue  # never stored: absent, as the put was given it
            raise lost_value(address, channel, version)
        if blob[0] == EMPTY_TAG:
            if crypt is not None and (blob[1] & ENCRYPTED or not crypt.allow_plaintext):
                # authenticated like any value
                _bytes_of(codec, address, blob, channel, place_of(channel, version, None))
            continue
        base = blob[3]
        if base is None:
            at = place_of(channel, version, None)
            values[channel] = decode_stored(serde, codec, address, *blob[:3], channel, None, at)
            continue
        key = (tid, ns, channel, base)
        found = memo.get(key, _MISSING) if memo is not None else _MISSING
        if found is _MISSING:
            stored = blobs.get(key)
            if stored is None:
                raise StorageError(
                    f"the snapshot {base!r} that value {_where(address, channel, None)} "
                    "extends is missing; the store is damaged"
                )
            plain = None
            if appends is not None and stored[1] != ENCODING_PLAIN:
                plain = appends.known((tid, ns, channel), base)
            if memo is None:
                if plain is not None:
                    snapshot = _plain(serde, address, stored[0], channel)(plain)
                else:
                    at = place_of(channel, base, None)
                    snapshot = decode_stored(serde, codec, address, *stored[:3], channel, None, at)
                at = place_of(channel, version, base)
                tail = decode_stored(serde, codec, address, *blob[:3], channel, None, at)
                values[channel] = join_append(snapshot, tail, where=_where(address, channel, None))
                continue
            if plain is not None:
                data = plain
            else:
                data = _bytes_of(codec, address, stored, channel, place_of(channel, base, None))
            decode = _plain(serde, address, stored[0], channel)
            found = part(memo, (tid, ns, channel, RUN), data, None, decode)
            memo[key] = found
        assert memo is not None
        # A listing: the elements of a growing list are shared (_pages).
        run_key = (tid, ns, channel, RUN)
        data = _bytes_of(codec, address, blob, channel, place_of(channel, version, base))
        tail_part = part(memo, run_key, data, found, _plain(serde, address, blob[0], channel))
        values[channel] = join_append(
            found.items, tail_part.items, where=_where(address, channel, None)
        )
        extend_run(memo, run_key, found, tail_part)
    return values


def _bytes_of(
    codec: BlobCodec, address: Address, stored: StoredValue, channel: str, place: bytes | None
) -> bytes:
    """A stored value's serializer bytes (checksum checked, opened, decompressed)."""
    return codec.decode_bytes(
        stored[1],
        stored[2],
        where=lambda: _where(address, channel, None),
        tag=stored[0],
        place=place,
    )


def _plain(
    serde: SerializerProtocol, address: Address, tag: str, channel: str
) -> Callable[[bytes], Any]:
    """Decoding of a value's bytes already out of their payload (opened, decompressed)."""
    return lambda data: decode_value(serde, tag, data, address=address, channel=channel)


def lost_value(address: Address, channel: str, version: str) -> StorageError:
    return StorageError(
        f"the value {_where(address, channel, None)} at version {version!r} is "
        "missing: the checkpoint names it and its row is gone; the store is damaged "
        "(restore it from a backup)"
    )


def assemble_inline(
    serde: SerializerProtocol,
    codec: BlobCodec,
    *,
    row: Sequence[Any],
    metadata: Mapping[str, Any],
    writes: Sequence[WriteRecord],
    unstored: Collection[str] | None,
) -> CheckpointTuple | None:
    """:func:`assemble` of a checkpoint whose values are all in its JSON head, or ``None``.

    A small state (#19): no value record to look at, nothing sealed. ``row``
    is ``(thread, namespace, id, parent id, head type, head bytes, ...)``.
    The tuple is the one :func:`assemble` builds; ``None`` whenever anything
    is not that simple (a head that is not JSON or not this checkpoint's,
    encryption, a channel with neither an inline value nor a place in
    ``unstored``), and then the caller calls :func:`assemble`, which reads
    or refuses it as always.
    """
    if codec.crypt is not None or row[4] != HEAD_JSON or SEALED_METADATA in metadata:
        return None
    try:
        checkpoint = loads_json(row[5])
    except ValueError:
        return None
    cid = row[2]
    if type(checkpoint) is not dict or checkpoint.get("id") != cid:
        return None
    values = checkpoint.get("channel_values") or {}
    if list in map(type, values.values()):  # sealed with the metadata: open_head
        return None
    for channel in checkpoint.get("channel_versions") or ():
        if channel not in values and unstored is not None and channel not in unstored:
            return None  # a lost value: assemble names it
    checkpoint["channel_values"] = values
    tid, ns = row[0], row[1]
    pending: list[PendingWrite] = []
    if writes:
        loads = serde.loads_typed
        for w in writes:
            # decode_stored's common case, without building the Address its
            # errors name: a payload in clear whose bytes read back.
            body = codec.clear_body(w[5], w[6])
            if body is not None:
                try:
                    pending.append((w[0], w[3], loads((w[4], body))))
                    continue
                except DecodeError:
                    pass  # decoded again below, where the error gets its context
            value = decode_stored(serde, codec, Address(tid, ns, cid), w[4], w[5], w[6], w[3], w[0])
            pending.append((w[0], w[3], value))
    parent_id = row[3]
    parent = (
        {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": parent_id}}
        if parent_id
        else None
    )
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
    # CheckpointTuple's fields in order, without its Python-level __new__
    return _new_tuple(CheckpointTuple, (config, checkpoint, metadata, parent, pending))


def assemble(
    serde: SerializerProtocol,
    codec: BlobCodec,
    *,
    address: Address,
    parent_id: str | None,
    head: tuple[str, bytes] | dict[str, Any],
    metadata: Mapping[str, Any],
    versions: Mapping[str, str] | None,
    blobs: Mapping[BlobKey, StoredValue],
    writes: Sequence[WriteRecord],
    memo: DecodeMemo | None = None,
    appends: AppendTracker | None = None,
    unstored: Collection[str] | None = (),
) -> CheckpointTuple:
    """A :class:`~tether.checkpoint.CheckpointTuple` from stored records.

    Args:
        address: thread, namespace and id of the checkpoint.
        parent_id: its parent's id, if any.
        head: ``(type, bytes)`` of the checkpoint without its channel values,
            or that head already decoded (a dict the function may change). Its
            ``channel_values``, if any, are the values kept inline
            (``encode_put(inline=...)``): the blobs are not looked at for them.
        metadata: the stored metadata, decoded (the backend's own format).
        versions: channel -> version (text) of the checkpoint; ``None`` takes
            them from the decoded head.
        blobs: the stored values fetched for the checkpoint (or page), with
            the snapshots that append tails among them extend. A channel
            stored as empty is absent from ``channel_values``; a channel
            whose value is missing raises StorageError (see ``unstored``).
        writes: the checkpoint's pending writes, already in contract order.
        memo: decoded snapshots shared by the tuples of one page: their
            elements are decoded once and shared between those tuples (each
            gets a list of its own). ``None`` decodes everything afresh.
        appends: the saver's tracker; a snapshot it still holds is decoded
            from its bytes instead of decompressing the stored payload.
        unstored: the channels the put found no stored value for (a caller
            may name channels in ``channel_versions`` that no put wrote): read
            as absent. Any other channel without a value was deleted after the
            put. ``None``: not recorded (a record written before the rule), so
            every channel without a value is read as absent.

    Raises:
        StorageError: a value is missing, or the head is not this checkpoint's.
        DecodeError: a stored value cannot be decoded (thread, namespace,
            checkpoint and channel named).
    """
    checkpoint = decode_head(serde, head, address)
    if not isinstance(checkpoint, dict):
        raise DecodeError(
            f"stored checkpoint head is a {type(checkpoint).__name__}, not a dict",
            context={"thread_id": address.thread_id, "checkpoint_id": address.checkpoint_id},
        )
    if checkpoint.get("id") != address.checkpoint_id:
        raise StorageError(
            f"the stored head {_where(address, None, None)} says its checkpoint id is "
            f"{checkpoint.get('id')!r}; the row is damaged (restore it from a backup, or "
            "delete the checkpoint)"
        )
    if versions is None:
        stored = checkpoint.get("channel_versions") or {}
        versions = {str(k): str(v) for k, v in stored.items()}
    tid, ns = address.thread_id, address.checkpoint_ns
    crypt = codec.crypt
    envelope = None
    if crypt is not None or SEALED_METADATA in metadata:
        metadata, envelope = open_checkpoint(
            crypt,
            metadata,
            metadata_place(tid, ns, address.checkpoint_id or ""),
            versions,
            parent_id,
            lambda: _where(address, None, None),
        )
    values = decode_values(
        serde,
        codec,
        address=address,
        versions=versions,
        blobs=blobs,
        values=checkpoint.get("channel_values") or {},
        memo=memo,
        appends=appends,
        unstored=unstored,
        envelope=envelope,
    )
    checkpoint["channel_values"] = values
    cid = address.checkpoint_id or ""

    pending: list[PendingWrite]
    if crypt is None:
        pending = [
            (w[0], w[3], decode_stored(serde, codec, address, w[4], w[5], w[6], w[3], w[0]))
            for w in writes
        ]
    else:
        pending = [
            (
                w.task_id,
                w.channel,
                decode_stored(
                    *(serde, codec, address, w.type, w.encoding, w.value, w.channel, w.task_id),
                    write_place(tid, ns, cid, w.task_id, w.idx, w.channel),
                ),
            )
            for w in writes
        ]
    parent = address.with_id(parent_id).to_config() if parent_id else None
    return CheckpointTuple(
        config=address.to_config(),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=metadata,  # type: ignore[arg-type]
        parent_config=parent,
        pending_writes=pending,
    )

"""LangGraph ``DeltaChannel`` history from ancestor records, I/O-free (#19).

LangGraph rebuilds a DeltaChannel value that a checkpoint does not store from
the checkpoint's ancestors (``get_delta_channel_history``): their pending
writes to the channel, back to the nearest ancestor that stores a value for
it (the seed). Its default walks ``get_tuple`` once per ancestor; a backend
answers instead in one round trip, giving :func:`walk_delta` the ancestors
it fetched, and :func:`delta_history` decodes what the walk kept. The walk
decides "stores a value" by the rules of
:func:`~tether.backends._records.decode_values`, so the result is what the
default walk over this backend's ``get_tuple`` returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.backends._delta import AppendTracker
from tether.backends._payload import BlobCodec, where
from tether.backends._records import (
    BlobKey,
    StoredValue,
    WriteRecord,
    decode_stored,
    decode_values,
    lost_value,
)
from tether.checkpoint import Address, ChannelHistory, text_problem
from tether.contract import EMPTY_TAG
from tether.encryption import (
    in_envelope,
    metadata_place,
    open_checkpoint,
    open_head,
    write_place,
)
from tether.errors import StorageError
from tether.serde.base import SerializerProtocol

__all__ = [
    "MAX_WALKED",
    "Ancestor",
    "DeltaWalk",
    "delta_history",
    "seeds_at",
    "walk_delta",
    "walked_channels",
]


#: Channels a backend's one statement walks (bits of a 64-bit integer).
MAX_WALKED = 62


def walked_channels(channels: Sequence[str]) -> list[str] | None:
    """``channels`` without repeats, as a backend's walk takes them; ``None`` when
    they are more than it walks at once, or a name no stored row can hold (the
    caller then leaves the walk to LangGraph's ``get_tuple`` loop)."""
    names = list(dict.fromkeys(channels))
    if len(names) > MAX_WALKED or any(text_problem(c) for c in names):
        return None
    return names


@dataclass(frozen=True, slots=True)
class Ancestor:
    """One checkpoint on the walk, as :func:`walk_delta` needs it."""

    checkpoint_id: str
    parent_id: str | None
    versions: Mapping[str, str]  # channel -> version (text), the walked channels' at least
    inline: Mapping[str, Any]  # values kept inline in the head (as stored, sealed or not)
    unstored: Collection[str] | None  # as for decode_values
    writes: Sequence[WriteRecord]  # its pending writes to the walked channels, in S2.4 order
    # For a head whose inline values are in its envelope ("[]", format 3): its stored
    # metadata and every channel's version, which the envelope is bound to.
    envelope: tuple[Mapping[str, Any], Mapping[str, str]] | None = None


@dataclass(slots=True)
class DeltaWalk:
    """What :func:`walk_delta` found, still encoded."""

    channels: list[str]
    # per channel, its writes, each with the checkpoint it is stored on, oldest first
    writes: dict[str, list[tuple[Address, WriteRecord]]]
    # per channel with a seed: the ancestor, and the version stored there (None: inline)
    seeds: dict[str, tuple[Address, str | None]]
    # the inline seeds' values (Postgres), as the head keeps them (sealed or in clear)
    inline: dict[str, Any]
    # the inline seeds' versions (a sealed one is bound to its version)
    inline_versions: dict[str, str] = field(default_factory=dict)
    # the inline seeds kept in their checkpoint's envelope: (metadata, versions, parent)
    envelopes: dict[str, tuple[Mapping[str, Any], Mapping[str, str], str | None]] = field(
        default_factory=dict
    )


def seeds_at(
    address: Address,
    ancestor: Ancestor,
    channels: Collection[str],
    stored: Callable[[str, str], StoredValue | None],
) -> dict[str, str | None]:
    """Which of ``channels`` the checkpoint at ``address`` stores a value for (a seed):
    channel -> its version (``None``: kept inline).

    ``stored(channel, version)`` is the value record the backend holds, if any.
    The rules are :func:`decode_values`': a channel kept inline or with a
    stored value that is not empty has one; a channel without a version, or
    that the put recorded as unstored, has none.

    Raises:
        StorageError: the checkpoint names a value whose record is gone.
    """
    out: dict[str, str | None] = {}
    for channel in channels:
        if channel in ancestor.inline:
            out[channel] = None
            continue
        version = ancestor.versions.get(channel)
        if version is None:
            continue
        blob = stored(channel, version)
        if blob is None:
            if ancestor.unstored is None or channel in ancestor.unstored:
                continue
            raise lost_value(address, channel, version)
        if blob[0] != EMPTY_TAG:
            out[channel] = version
    return out


def walk_delta(
    target: Address,
    parent_id: str | None,
    channels: Sequence[str],
    ancestor: Callable[[str], Ancestor | None],
    stored: Callable[[str, str], StoredValue | None],
) -> DeltaWalk:
    """Walk the parents of the checkpoint ``target`` for the writes and seeds of ``channels``.

    As LangGraph's default ``get_delta_channel_history``: the target's own
    writes and values are not read; from its parent (``parent_id``) on, each
    ancestor gives its writes to the channels still walked, then every such
    channel it stores a value for is seeded there and stops. The walk ends
    when every channel is seeded, at a root, or at a checkpoint met again (a
    checkpoint put again under one of its descendants makes a loop; the
    official savers stop there too). ``ancestor(checkpoint_id)`` is the
    backend's record of a checkpoint, ``None`` when it has none.

    Raises:
        StorageError: a parent on the walk is missing (a prune or a deletion cut
            the chain, so the channels would read back short), or an ancestor
            names a value whose record is gone.
    """
    remaining = list(dict.fromkeys(channels))
    walk = DeltaWalk(remaining.copy(), {c: [] for c in remaining}, {}, {})
    blocks: dict[str, list[list[tuple[Address, WriteRecord]]]] = {c: [] for c in remaining}
    seen: set[str] = set()
    child, cursor = target, parent_id
    while cursor is not None and remaining and cursor not in seen:
        seen.add(cursor)
        found = ancestor(cursor)
        at = target.with_id(cursor)
        if found is None:
            raise _cut(target, child, at, remaining)
        for channel in remaining:
            mine = [(at, w) for w in found.writes if w.channel == channel]
            if mine:
                blocks[channel].append(mine)
        for channel, version in seeds_at(at, found, remaining, stored).items():
            walk.seeds[channel] = (at, version)
            if version is None:
                walk.inline[channel] = found.inline[channel]
                walk.inline_versions[channel] = str(found.versions.get(channel))
                if found.envelope is not None and in_envelope(found.inline[channel]):
                    walk.envelopes[channel] = (*found.envelope, found.parent_id)
            remaining.remove(channel)
        child, cursor = at, found.parent_id
    for channel, groups in blocks.items():
        walk.writes[channel] = [w for group in reversed(groups) for w in group]
    return walk


def _cut(target: Address, child: Address, parent: Address, channels: Sequence[str]) -> StorageError:
    ns = f" (namespace {target.checkpoint_ns!r})" if target.checkpoint_ns else ""
    return StorageError(
        f"checkpoint {parent.checkpoint_id!r} of thread {target.thread_id!r}{ns}, the parent "
        f"of checkpoint {child.checkpoint_id!r}, is missing: checkpoint "
        f"{target.checkpoint_id!r} rebuilds channel(s) {', '.join(map(repr, channels))} "
        "(LangGraph DeltaChannel) from the writes of its ancestors back to a stored value, "
        "and without it they would read back short. A prune or delete that knew nothing "
        "of the graph removed it (the drop-in savers' prune keeps it); restore the thread "
        "from a backup, or delete it"
    )


def _write_place(codec: BlobCodec, at: Address, w: WriteRecord) -> bytes | None:
    """Where a pending write is stored, for a sealed one (:mod:`tether.encryption`)."""
    if codec.crypt is None:
        return None
    return write_place(
        at.thread_id, at.checkpoint_ns, at.checkpoint_id or "", w.task_id, w.idx, w.channel
    )


def _envelope(
    codec: BlobCodec,
    at: Address,
    channel: str,
    sealed: tuple[Mapping[str, Any], Mapping[str, str], str | None] | None,
) -> dict[str, Any] | None:
    """A seed's value from its checkpoint's envelope (format 3), as ``open_head`` takes it."""
    if sealed is None:
        return None
    metadata, versions, parent_id = sealed
    place = metadata_place(at.thread_id, at.checkpoint_ns, at.checkpoint_id or "")
    _, values = open_checkpoint(
        codec.crypt, metadata, place, versions, parent_id, functools.partial(where, at)
    )
    return {channel: values[channel]} if values and channel in values else {}


def delta_history(
    serde: SerializerProtocol,
    codec: BlobCodec,
    walk: DeltaWalk,
    blobs: Mapping[BlobKey, StoredValue],
    appends: AppendTracker | None = None,
) -> dict[str, ChannelHistory]:
    """The walk's writes and seeds, decoded: LangGraph's ``get_delta_channel_history``.

    ``blobs`` holds the seeds' value records, with the snapshots append tails
    among them extend.

    Raises:
        StorageError: a seed's record, or the snapshot it extends, is missing.
        DecodeError: a write or a seed cannot be decoded (thread, namespace,
            checkpoint, channel named).
    """
    out: dict[str, ChannelHistory] = {}
    for channel in walk.channels:
        entry: ChannelHistory = {
            "writes": [
                (
                    w.task_id,
                    channel,
                    decode_stored(
                        serde,
                        codec,
                        at,
                        w.type,
                        w.encoding,
                        w.value,
                        channel,
                        w.task_id,
                        _write_place(codec, at, w),
                    ),
                )
                for at, w in walk.writes[channel]
            ]
        }
        seed = walk.seeds.get(channel)
        if seed is not None:
            at, version = seed
            if version is None:
                stored = {channel: walk.inline[channel]}
                versions = {channel: walk.inline_versions.get(channel, "")}
                opened = open_head(
                    codec.crypt,
                    at.thread_id,
                    at.checkpoint_ns,
                    versions,
                    stored,
                    functools.partial(where, at),
                    _envelope(codec, at, channel, walk.envelopes.get(channel)),
                )
                entry["seed"] = opened[channel]
            else:
                value = decode_values(
                    serde,
                    codec,
                    address=at,
                    versions={channel: version},
                    blobs=blobs,
                    values={},
                    appends=appends,
                    unstored=(),
                )
                entry["seed"] = value[channel]
        out[channel] = entry
    return out

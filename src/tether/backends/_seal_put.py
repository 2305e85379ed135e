"""What an encrypting put stores (#17), I/O-free: :func:`~tether.backends._records.encode_put`
with a keyring.

Every value is sealed at its place (:mod:`tether.encryption`): value rows, the
small values the head keeps, and the metadata. A put seals them together at
its end, one call (:meth:`~tether.encryption.Encryption.seal_many`: one read
of the random source for all nonces). With ``envelope`` (and a ring that seals
metadata), the head's small values are sealed *with* the metadata, as one
value, the checkpoint's envelope (format 3,
:func:`~tether.encryption.checkpoint_to_seal`), and the head marks each ``[]``.

Why an envelope: a W1 chat step (one growing list, two small channels, a
metadata dict) made four seals in its put, and measured, each seal cost more
than its cipher (the call into OpenSSL, a nonce, the framing of its place, its
base64 in the head's JSON). The envelope makes it two. A value in an envelope
names its checkpoint, so a put that carries it over cannot copy it: the
backend opens the envelope and seals the value on its own in the new head
(:func:`~tether.backends._sealing.carried_from_envelope`), once, after which
later puts copy it. Postgres copies a carried value inside its put statement,
so it seals each small value on its own (no envelope).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from tether.backends._delta import AppendTracker, Row
from tether.backends._payload import BlobCodec, sealed_payload
from tether.contract import EMPTY, EMPTY_TAG
from tether.encryption import (
    Encryption,
    checkpoint_to_seal,
    inline_place,
    inline_stored,
    metadata_place,
    metadata_to_seal,
    sealed_metadata,
    value_place,
)
from tether.serde.base import SerializerProtocol

__all__ = ["SealedPut", "seal_put"]

_encode_json = msgspec.json.encode

#: ``(channel, version, type, encoding, payload, base)`` of a value row.
SealedRow = tuple[str, str, str, int, bytes, "str | None"]


class SealedPut:
    """What :func:`seal_put` made: value rows, the head's inline values, the metadata
    to store, and the append tails that have a whole value to fall back to."""

    __slots__ = ("fallbacks", "inlined", "metadata", "rows")

    def __init__(
        self,
        rows: list[SealedRow],
        inlined: dict[str, Any],
        metadata: dict[str, Any],
        fallbacks: list[tuple[int, str, str, Row]],
    ) -> None:
        self.rows = rows
        self.inlined = inlined
        self.metadata = metadata
        # (index of the tail in rows, snapshot it extends, channel, whole value)
        self.fallbacks = fallbacks


def seal_put(
    crypt: Encryption,
    codec: BlobCodec,
    serde: SerializerProtocol,
    appends: AppendTracker | None,
    where: tuple[str, str, str, str | None],
    named: Mapping[str, tuple[str, Any]],
    versions: Mapping[str, str],
    metadata: dict[str, Any],
    inline: Callable[[Any], bool] | None,
    envelope: bool,
) -> SealedPut:
    """The sealed records of a put.

    ``where``: thread, namespace, checkpoint id and parent id; ``named``:
    channel -> (version, value) of the channels the put names; ``versions``:
    every channel's version (the metadata's associated data); the rest as
    :func:`~tether.backends._records.encode_put`'s.

    Raises:
        ConfigError: the metadata uses the reserved key.
        EncodeError: a value cannot be serialized, or is larger than the codec allows.
    """
    tid, ns, cid, parent_id = where
    bundle = envelope and crypt.metadata
    # (channel, version, type, encoding, base) of each value row, and what it seals
    heads: list[tuple[str, str, str, int, str | None]] = []
    seals: list[tuple[bytes, bytes]] = []
    fallbacks: list[tuple[int, str, str, Row]] = []
    inlined: dict[str, Any] = {}
    alone: list[str] = []  # small values sealed on their own, after the rows
    kept: dict[str, Any] = {}  # small values sealed with the metadata
    to_seal = codec.to_seal
    for channel, (version, value) in named.items():
        if inline is not None and value is not EMPTY and inline(value):
            if bundle:
                inlined[channel] = []
                kept[channel] = value
            else:
                inlined[channel] = None  # sealed below; the head keeps the put's order
                alone.append(channel)
            continue
        if appends is None or value is EMPTY:
            tag, data = (EMPTY_TAG, b"") if value is EMPTY else serde.dumps_typed(value)
            encoding, bound, body = to_seal(tag, data, value_place(tid, ns, channel, version, None))
            heads.append((channel, version, tag, encoding, None))
            seals.append((bound, body))
            continue
        plan = appends.plan((tid, ns, channel), version, *serde.dumps_typed(value))
        for row in plan.rows:
            place = value_place(tid, ns, channel, row.version, row.base)
            encoding, bound, body = to_seal(row.tag, row.data, place)
            heads.append((channel, row.version, row.tag, encoding, row.base))
            seals.append((bound, body))
        if plan.needs is not None and plan.fallback is not None:
            fallbacks.append((len(heads) - 1, plan.needs, channel, plan.fallback))
    for channel in alone:
        version, value = named[channel]
        seals.append((inline_place(tid, ns, channel, version), _encode_json(value)))
    place = metadata_place(tid, ns, cid)
    whole = None
    if kept:
        whole = checkpoint_to_seal(metadata, place, versions, parent_id, kept)
    else:
        item = metadata_to_seal(crypt, metadata, place, versions, parent_id)
        if item is not None:
            seals.append(item)
    sealed = crypt.seal_many(seals, whole) if seals or whole is not None else []
    pairs = zip(heads, sealed, strict=False)  # the metadata, if sealed, comes after
    rows: list[SealedRow] = [(h[0], h[1], h[2], h[3], sealed_payload(s), h[4]) for h, s in pairs]
    n = len(heads)
    for i, channel in enumerate(alone, n):
        inlined[channel] = inline_stored(sealed[i])
    if len(sealed) > n + len(alone):  # the metadata was sealed, last
        metadata = sealed_metadata(crypt, metadata, sealed[-1])
    return SealedPut(rows, inlined, metadata, fallbacks)

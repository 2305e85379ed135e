"""Stored records sealed again, I/O-free (#17): for ``copy_thread`` and ``tether rekey``.

A sealed value is bound to its place, thread id included
(:mod:`tether.encryption`), so a copy into another thread cannot reuse the
ciphertext as the rows' checksums let it: it is opened at the source's place
and sealed at the target's. ``rekey`` seals at the same place under the
active key, and seals values still stored in clear (a store that had
encryption turned on later); a head's small values are sealed where they
are. Every backend moves the records; what changes in them is decided here
once.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from typing import Any

import msgspec

from tether.backends._payload import ENCRYPTED, BlobCodec, where
from tether.backends._records import StoredValue, WriteRecord
from tether.checkpoint import Address
from tether.encryption import (
    SEALED_METADATA,
    Encryption,
    in_envelope,
    inline_place,
    inline_sealed,
    inline_stored,
    metadata_place,
    open_checkpoint,
    open_inline,
    seal_inline,
    seal_metadata,
    value_place,
    write_place,
)
from tether.errors import ConfigError, DecodeError

_encode_json = msgspec.json.encode

__all__ = [
    "carried_from_envelope",
    "head_is_current",
    "is_current",
    "metadata_is_current",
    "refuse_copy",
    "rekey_codec",
    "reseal_head",
    "reseal_metadata",
    "reseal_value",
    "reseal_write",
]


def rekey_codec(
    crypt: Encryption | None, codec: BlobCodec, to: str | None = None
) -> tuple[Encryption, BlobCodec]:
    """The keyring and codec a rekey seals with: the saver's, with key ``to`` (default:
    its active key) sealing, reading clear values too.

    Raises:
        ConfigError: the saver has no keyring.
    """
    if crypt is None:
        raise ConfigError(
            "rekey needs the saver's keyring (encryption= or TETHER_KEYS), with the key to "
            "seal under as the active one"
        )
    crypt = crypt.with_active(to or crypt.active, allow_plaintext=True)
    return crypt, dataclasses.replace(codec, crypt=crypt)


def reseal_head(
    crypt: Encryption | None, head: Mapping[str, Any], src: str, dst: str, ns: str
) -> dict[str, Any] | None:
    """A head of thread ``src`` with its inline values as sealed for thread ``dst``
    (``None``: nothing to change).

    ``src == dst`` (rekey): values sealed under another key, and values in
    clear (a head written before encryption was on), are sealed under the
    active key. A copy (``src != dst``) seals its sealed values again for the
    target and leaves values in clear as they are, as it does value rows.
    Values marked ``[]`` are in the checkpoint's envelope, sealed again with
    its metadata (:func:`reseal_metadata`): they stay as they are.

    Raises:
        ConfigError: sealed values and no keyring (a copy by a saver without keys).
        DecodeError: a sealed value does not open (as on read).
    """
    inline = head.get("channel_values")
    if not inline or not isinstance(inline, dict):
        return None
    versions = head.get("channel_versions") or {}
    out: dict[str, Any] = {}
    changed = False
    for channel, stored in inline.items():
        if in_envelope(stored):
            out[channel] = stored
            continue
        raw = inline_sealed(stored)
        if (raw is None and src != dst) or (
            raw is not None and src == dst and crypt is not None and raw.startswith(crypt.header())
        ):
            out[channel] = stored
            continue
        if crypt is None:
            raise refuse_copy(src)
        version = str(versions.get(channel))
        shown = where(Address(src, ns, head.get("id")), channel) + f" version {version!r}"
        value = open_inline(crypt, stored, inline_place(src, ns, channel, version), shown.__str__)
        out[channel] = seal_inline(crypt, inline_place(dst, ns, channel, version), value)
        changed = True
    return {**head, "channel_values": out} if changed else None


def carried_from_envelope(
    crypt: Encryption | None,
    source: Address,
    parent_id: str | None,
    head_versions: Mapping[str, Any],
    metadata: Mapping[str, Any],
    carried: Mapping[str, str],
) -> dict[str, list[str]]:
    """Small values a put carries over from a checkpoint that sealed them in its envelope
    (format 3), each sealed on its own for the new head (:func:`~tether.encryption.seal_inline`):
    the envelope names its checkpoint, the new head cannot copy it.

    ``source``: the checkpoint whose head marks the values ``[]`` (its parent,
    versions and stored metadata given); ``carried``: channel -> version of the
    values to carry (the source head's versions, checked by the caller).

    Raises:
        DecodeError: the envelope does not open (no keys, another key, changed),
            or does not hold a value its head marks (as on read).
    """
    tid, ns, cid = source.thread_id, source.checkpoint_ns, source.checkpoint_id or ""
    versions = {str(k): str(v) for k, v in head_versions.items()}
    _, values = open_checkpoint(
        crypt, metadata, metadata_place(tid, ns, cid), versions, parent_id, lambda: where(source)
    )
    assert crypt is not None  # open_checkpoint refuses sealed metadata without keys
    items = []
    for channel, version in carried.items():
        if values is None or channel not in values:
            raise DecodeError(
                f"value {where(source, channel)} is marked as sealed with its checkpoint's "
                "metadata, which does not hold it: the head was changed; it is not carried over"
            )
        items.append((inline_place(tid, ns, channel, version), _encode_json(values[channel])))
    sealed = crypt.seal_many(items) if items else []
    return {c: inline_stored(s) for c, s in zip(carried, sealed, strict=True)}


def head_is_current(crypt: Encryption, head: Mapping[str, Any]) -> bool:
    """Whether every value a head keeps inline is sealed under the active key."""
    inline = head.get("channel_values")
    if not inline or not isinstance(inline, dict):
        return True
    for stored in inline.values():
        if in_envelope(stored):
            continue  # sealed with the metadata (metadata_is_current)
        try:
            raw = inline_sealed(stored)
        except DecodeError:
            return False  # damaged: the rekey names it
        if raw is None or not raw.startswith(crypt.header()):
            return False
    return True


def is_current(crypt: Encryption, encoding: int, payload: bytes | None) -> bool:
    """Whether a stored payload is sealed under the active key, in the current format
    (rekey skips it)."""
    if not encoding & ENCRYPTED or payload is None:
        return False
    return payload.startswith(crypt.header(), 4)


def metadata_is_current(crypt: Encryption, metadata: Mapping[str, Any]) -> bool:
    """Whether stored metadata is as the active key would store it."""
    sealed = metadata.get(SEALED_METADATA)
    if sealed is None:
        return not crypt.metadata
    try:
        raw = base64.b64decode(sealed, validate=True) if isinstance(sealed, str) else b""
    except (binascii.Error, ValueError):
        return False
    return crypt.is_active(raw)  # the active key, in a current format (2, or 3: an envelope)


def refuse_copy(source: str) -> ConfigError:
    """The error of a ``copy_thread`` of sealed rows by a saver without keys."""
    return ConfigError(
        f"thread {source!r} holds encrypted values, which are bound to their thread: "
        "copy_thread must open and seal them again and needs the keyring "
        "(encryption= or TETHER_KEYS)"
    )


def reseal_value(
    codec: BlobCodec,
    stored: StoredValue,
    src: str,
    dst: str,
    ns: str,
    channel: str,
    version: str,
) -> StoredValue:
    """A stored channel value of thread ``src`` as sealed for thread ``dst`` (same place else).

    ``src == dst``: sealed again under the active key (rekey).
    """
    tag, encoding, payload, base = stored
    old = value_place(src, ns, channel, version, base)
    new = old if src == dst else value_place(dst, ns, channel, version, base)
    at = Address(src, ns, None)
    enc, data = codec.rewrap(
        tag, encoding, payload, old, new, where=lambda: where(at, channel) + f" version {version!r}"
    )
    return tag, enc, data, base


def reseal_write(
    codec: BlobCodec, w: WriteRecord, src: str, dst: str, ns: str, checkpoint_id: str
) -> WriteRecord:
    """A stored pending write of thread ``src`` as sealed for thread ``dst``."""
    old = write_place(src, ns, checkpoint_id, w.task_id, w.idx, w.channel)
    new = old if src == dst else write_place(dst, ns, checkpoint_id, w.task_id, w.idx, w.channel)
    at = Address(src, ns, checkpoint_id)
    enc, data = codec.rewrap(
        w.type, w.encoding, w.value, old, new, where=lambda: where(at, w.channel, w.task_id)
    )
    return w._replace(encoding=enc, value=data)


def reseal_metadata(
    crypt: Encryption | None,
    metadata: Mapping[str, Any],
    src: str,
    dst: str,
    ns: str,
    checkpoint_id: str,
    versions: Mapping[str, str],
    parent_id: str | None,
) -> dict[str, Any] | None:
    """Stored metadata of thread ``src`` as sealed for ``dst`` (``None``: keep it as is).

    Metadata in clear is sealed (rekey of a store encrypted later); sealed
    metadata is opened and checked against the checkpoint first. An envelope
    (format 3) is sealed again as an envelope with the values it holds, even
    by a ring that keeps new metadata in clear: its head marks them ``[]``.

    Raises:
        ConfigError: sealed metadata and no keyring.
        DecodeError: it does not open (as on read).
    """
    if SEALED_METADATA not in metadata and (crypt is None or not crypt.metadata):
        return None
    if crypt is None:
        raise refuse_copy(src)

    at = Address(src, ns, checkpoint_id)
    meta, values = open_checkpoint(
        crypt,
        metadata,
        metadata_place(src, ns, checkpoint_id),
        versions,
        parent_id,
        lambda: where(at),
    )
    return seal_metadata(
        crypt, meta, metadata_place(dst, ns, checkpoint_id), versions, parent_id, values
    )

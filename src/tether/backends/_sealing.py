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

from tether.backends._payload import ENCRYPTED, BlobCodec, where
from tether.backends._records import StoredValue, WriteRecord
from tether.checkpoint import Address
from tether.encryption import (
    SEALED_METADATA,
    Encryption,
    inline_place,
    inline_sealed,
    metadata_place,
    open_inline,
    open_metadata,
    seal_inline,
    seal_metadata,
    value_place,
    write_place,
)
from tether.errors import ConfigError, DecodeError

__all__ = [
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


def head_is_current(crypt: Encryption, head: Mapping[str, Any]) -> bool:
    """Whether every value a head keeps inline is sealed under the active key."""
    inline = head.get("channel_values")
    if not inline or not isinstance(inline, dict):
        return True
    for stored in inline.values():
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
    return raw.startswith(crypt.header())  # the active key, in the current format


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
    metadata is opened and checked against the checkpoint first.

    Raises:
        ConfigError: sealed metadata and no keyring.
        DecodeError: it does not open (as on read).
    """
    if SEALED_METADATA not in metadata and (crypt is None or not crypt.metadata):
        return None
    if crypt is None:
        raise refuse_copy(src)

    at = Address(src, ns, checkpoint_id)
    meta = open_metadata(
        crypt,
        metadata,
        metadata_place(src, ns, checkpoint_id),
        versions,
        parent_id,
        lambda: where(at),
    )
    return seal_metadata(
        crypt, dict(meta), metadata_place(dst, ns, checkpoint_id), versions, parent_id
    )

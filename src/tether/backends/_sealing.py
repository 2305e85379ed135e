"""Stored records sealed again, I/O-free (#17): for ``copy_thread`` and ``tether rekey``.

A sealed value is bound to its place, thread id included
(:mod:`tether.encryption`), so a copy into another thread cannot reuse the
ciphertext as the rows' checksums let it: it is opened at the source's place
and sealed at the target's. ``rekey`` seals at the same place under the
active key, and seals values still stored in clear (a store that had
encryption turned on later). Every backend moves the records; what changes
in them is decided here once.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Mapping
from typing import Any

from tether.backends._payload import ENCRYPTED, BlobCodec, where
from tether.backends._records import StoredValue, ValueRecord, WriteRecord
from tether.checkpoint import Address
from tether.encryption import (
    SEALED_METADATA,
    Encryption,
    key_id_of,
    metadata_place,
    open_metadata,
    seal_metadata,
    value_place,
    write_place,
)
from tether.errors import ConfigError
from tether.serde.base import SerializerProtocol

__all__ = [
    "inline_out",
    "is_current",
    "metadata_is_current",
    "refuse_copy",
    "rekey_codec",
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


def inline_out(
    codec: BlobCodec,
    serde: SerializerProtocol,
    thread_id: str,
    ns: str,
    head: Mapping[str, Any],
) -> tuple[dict[str, Any], list[ValueRecord]] | None:
    """A head that keeps values in clear (written before encryption was on), without them,
    and those values as sealed value records at their versions (``None``: none inline).

    A value is the same at a version wherever it is kept, so the records may
    already exist (a later checkpoint carried the value over in its own head).
    """
    inline = head.get("channel_values")
    if not inline or not isinstance(inline, dict):
        return None
    versions = head.get("channel_versions") or {}
    records = []
    for channel, value in inline.items():
        version = str(versions.get(channel))
        place = value_place(thread_id, ns, channel, version, None)
        records.append(ValueRecord(channel, version, *codec.encode(serde, value, place)))
    out = dict(head)
    del out["channel_values"]
    return out, records


def is_current(crypt: Encryption, encoding: int, payload: bytes | None) -> bool:
    """Whether a stored payload is sealed under the active key (rekey skips it)."""
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
    return key_id_of(raw) == crypt.active


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

"""I/O-free logic the SQL backends share (SQLite and Postgres).

Nothing here opens a connection or writes SQL text: a backend turns what its
driver returns into the plain tuples these functions take, and sends what they
return as bound parameters. What lives here:

* **Blob encoding** is :mod:`tether.backends._payload` (:class:`BlobCodec`,
  re-exported here): the serializer's bytes behind a checksum, zstd-compressed
  when large, every damage a :class:`~tether.errors.StorageError`.
* **Append deltas** (:mod:`tether.backends._delta`) are orthogonal to the
  encoding: a row whose ``base`` column names a snapshot holds only the tail
  appended since that snapshot (itself compressed or not, per ``encoding``).
* **Channel values are blob rows in SQLite.** The contract says only the
  channels in ``new_versions`` are written and the others are found through
  ``channel_versions`` in blobs written by earlier puts. A primitive copied
  into one checkpoint row would be invisible to a later checkpoint that kept
  the same version without rewriting it, unless the read did another query or
  trusted the caller's ``channel_values`` for channels it did not name. So
  every value is a blob row; small ones cost one short row, and a page's
  blobs still come back in one query. (Postgres keeps small primitives in
  its JSONB checkpoint and carries unchanged ones over by version in its put
  statement; see ``postgres/_sql.py``.)
* **Records** (what a put stores, how rows become a tuple) are
  :mod:`tether.backends._records`, shared with the in-memory saver.
* **Row checksums.** :func:`row_checksum`, :func:`value_checksum` and
  :func:`write_checksum` are the xxh3 a checkpoint, blob or write row carries
  over its own content (SQLite), so a damaged row is refused rather than read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import ormsgpack
import xxhash

from tether.backends._payload import (
    CHECKSUM,
    ENCODING_PLAIN,
    ENCODING_ZLIB,
    ENCODING_ZSTD,
    BlobCodec,
    EncodedValue,
)
from tether.checkpoint import (
    Address,
)
from tether.contract import loads_json
from tether.errors import DecodeError, StorageError

__all__ = [
    "ENCODING_PLAIN",
    "ENCODING_ZLIB",
    "ENCODING_ZSTD",
    "BlobCodec",
    "EncodedValue",
    "check_write_count",
    "metadata_from_json",
    "row_checksum",
    "value_checksum",
    "versions_from_json",
    "versions_to_json",
    "write_checksum",
    "write_checksum_v1",
]


# --- versions and metadata columns ---------------------------------------------------


def versions_to_json(versions: Mapping[str, str | int | float]) -> str:
    """``channel_versions`` as a JSON object of *strings*, the form blob keys use.

    The blob table keys versions as text; storing them as text here lets SQL
    join checkpoints to blobs (for reads and for garbage collection) without
    type juggling. The checkpoint head keeps the original types.
    """
    return json.dumps({str(k): str(v) for k, v in versions.items()}, separators=(",", ":"))


def versions_from_json(text: str | None) -> dict[str, str]:
    """Inverse of :func:`versions_to_json`."""
    if not text:
        return {}
    out: dict[str, str] = loads_json(text)
    return out


def metadata_from_json(text: str | bytes | None, *, address: Address) -> dict[str, Any]:
    """The metadata column back as a dict."""
    if text is None:
        return {}
    try:
        out = loads_json(text)
    except ValueError as exc:
        raise DecodeError(
            f"stored metadata is not JSON: {exc}",
            context={"thread_id": address.thread_id, "checkpoint_id": address.checkpoint_id},
        ) from exc
    if not isinstance(out, dict):
        raise DecodeError(
            "stored metadata is not a JSON object",
            context={"thread_id": address.thread_id, "checkpoint_id": address.checkpoint_id},
        )
    return out


# --- row checksums ------------------------------------------------------------------------

_SIGN = 1 << 63
_packb = ormsgpack.packb


def row_checksum(
    checkpoint_id: str,
    parent_id: str | None,
    type_: str,
    head: bytes,
    versions: str,
    metadata: str,
    unstored: str | None,
) -> int:
    """The checksum of a checkpoint row: xxh3-64 as a signed 64-bit int (an SQL INTEGER).

    Over the row's content: its id, parent id, head type and bytes, the
    ``channel_versions`` and metadata texts, and the channels the put found
    no stored value for. Not over thread and namespace, so that a row copied
    to another thread (``copy_thread``, by SQL) keeps a valid checksum. The
    fields are framed by a header of their lengths (characters for text,
    bytes for the head, -1 for NULL), so no two rows of different fields
    hash the same input.

    Raises:
        TypeError: a field is not of the type tether stores (a damaged row).
    """
    text = (
        f"{len(checkpoint_id)}:{-1 if parent_id is None else len(parent_id)}:{len(type_)}:"
        f"{len(versions)}:{len(metadata)}:{-1 if unstored is None else len(unstored)}:"
        f"{len(head)}|{checkpoint_id}{parent_id or ''}{type_}{versions}{metadata}{unstored or ''}"
    )
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate: only in a damaged row
        data = text.encode("utf-8", "surrogatepass")
    value = xxhash.xxh3_64_intdigest(data + head)
    return value - (_SIGN << 1) if value >= _SIGN else value


def _signed(value: int) -> int:
    return value - (_SIGN << 1) if value >= _SIGN else value


def _framed(fields: Sequence[str | int | None]) -> bytes:
    """Fields as one byte string, framed by their lengths (-1 for NULL)."""
    # One pass (this runs for every row a read returns): "" and -1 for NULL,
    # else str(field) and its length in characters.
    lengths: list[str] = []
    texts: list[str] = []
    for f in fields:
        if f is None:
            lengths.append("-1")
            continue
        t = f if type(f) is str else str(f)
        texts.append(t)
        lengths.append(str(len(t)))
    return _utf8(":".join(lengths) + "|" + "".join(texts))


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: only in a damaged row
        return text.encode("utf-8", "surrogatepass")


def _payload_digest(encoding: int, payload: bytes | None) -> bytes:
    """What a row checksum takes of its payload: the payload's own checksum when it has one.

    A payload written with a checksum header (encoding bit 4) is verified
    against it on read, so the row checksum covers those 4 bytes only and a
    large value is hashed once, not twice.
    """
    if payload is None:
        return b""
    if encoding & CHECKSUM:
        return bytes(payload[:4])
    return bytes(payload)


def value_checksum(
    channel: str, version: str, type_: str, encoding: int, base: str | None, payload: bytes | None
) -> int:
    """The checksum of a blob row: its channel, version, type, encoding, base and payload.

    Not over thread and namespace (rows are copied to other threads by SQL).
    A flipped byte in a key column would otherwise make a row stand for
    another value (a tail extending another snapshot, say).

    Raises:
        TypeError: a field is not of the type tether stores (a damaged row).
    """
    if (
        type(channel) is str
        and type(version) is str
        and type(type_) is str
        and type(encoding) is int
        and (base is None or type(base) is str)
    ):  # the rows tether writes: _framed's bytes, in one f-string
        e = str(encoding)
        text = (
            f"{len(channel)}:{len(version)}:{len(type_)}:{len(e)}:"
            f"{-1 if base is None else len(base)}|{channel}{version}{type_}{e}{base or ''}"
        )
        head = _utf8(text)
    else:
        head = _framed((channel, version, type_, encoding, base))
    return _signed(xxhash.xxh3_64_intdigest(head + _payload_digest(encoding, payload)))


def write_checksum(
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    idx: int,
    channel: str,
    type_: str,
    encoding: int,
    payload: bytes | None,
) -> int:
    """The checksum of a pending-write row: its checkpoint id, keys, channel, type and payload.

    Not over thread and namespace (``copy_thread``). With the write count of
    its checkpoint row (``nwrites``), a write that changed, moved or vanished
    is refused rather than replayed differently. The fields are framed as one
    MessagePack array (self-delimiting, so no two rows of different fields
    hash the same input), built in one C call: a listing verifies every write
    row it returns, and the text framing of :func:`write_checksum_v1` cost more
    than decoding the write.

    Raises:
        TypeError: a field is not of the type tether stores (a damaged row), or
            text that is not UTF-8 (a lone surrogate).
    """
    data = _packb(
        (
            checkpoint_id,
            task_id,
            task_path,
            idx,
            channel,
            type_,
            encoding,
            _payload_digest(encoding, payload),
        )
    )
    value = xxhash.xxh3_64_intdigest(data)
    return value - (_SIGN << 1) if value >= _SIGN else value


def write_checksum_v1(
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    idx: int,
    channel: str,
    type_: str,
    encoding: int,
    payload: bytes | None,
) -> int:
    """The checksum write rows carried before schema version 11: the fields as text,
    framed by a header of their lengths (as :func:`value_checksum`). Only the
    migration to version 11 reads it, to re-checksum the rows that match it.

    Raises:
        TypeError: a field is not of the type tether stores (a damaged row).
    """
    head = _framed((checkpoint_id, task_id, task_path, idx, channel, type_, encoding))
    return _signed(xxhash.xxh3_64_intdigest(head + _payload_digest(encoding, payload)))


def check_write_count(address: Address, recorded: int | None, found: int, where: str) -> None:
    """Refuse a checkpoint whose pending-write rows are not as many as it recorded.

    ``recorded`` is the checkpoint row's ``nwrites`` (``None``: a row from
    before the count, not checked); ``where`` names the store.

    Raises:
        StorageError: write rows were lost, added or moved.
    """
    if recorded is None or recorded == found:
        return
    ns = f" (namespace {address.checkpoint_ns!r})" if address.checkpoint_ns else ""
    raise StorageError(
        f"checkpoint {address.checkpoint_id!r} of thread {address.thread_id!r}{ns} in {where} "
        f"has {found} pending write rows where it recorded {recorded!r}: write rows were "
        "lost, added or moved and the store is damaged. Restore it from a backup"
    )

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
* **Row decoding.** :func:`build_tuple` turns a checkpoint row, the blobs it
  refers to and its writes into a :class:`~tether.checkpoint.CheckpointTuple`;
  every decode failure names thread, namespace, checkpoint and channel. A
  channel of ``channel_versions`` whose value row is missing is a
  :class:`~tether.errors.StorageError` unless the put recorded that it had no
  stored value (``unstored``), and so is a head whose ``id`` is not its row's.
* **Row checksums.** :func:`row_checksum`, :func:`value_checksum` and
  :func:`write_checksum` are the xxh3 a checkpoint, blob or write row carries
  over its own content (SQLite), so a damaged row is refused rather than read.
* **Page grouping.** :func:`group_writes` buckets one query's write rows by
  checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import xxhash

from tether.backends._common import EMPTY_TAG, decode_value, loads_json
from tether.backends._delta import AppendTracker, join_append
from tether.backends._payload import (
    CHECKSUM,
    ENCODING_PLAIN,
    ENCODING_ZLIB,
    ENCODING_ZSTD,
    BlobCodec,
    EncodedValue,
)
from tether.backends._payload import where as _where
from tether.checkpoint import (
    Address,
    ChannelVersions,
    CheckpointTuple,
    PendingWrite,
    StoredWrite,
)
from tether.errors import DecodeError, StorageError
from tether.serde.base import SerializerProtocol

__all__ = [
    "ENCODING_PLAIN",
    "ENCODING_ZLIB",
    "ENCODING_ZSTD",
    "BlobCodec",
    "BlobKey",
    "EncodedValue",
    "StoredValue",
    "WriteRecord",
    "build_tuple",
    "check_write_count",
    "decode_writes",
    "group_writes",
    "metadata_from_json",
    "row_checksum",
    "value_checksum",
    "versions_from_json",
    "versions_to_json",
    "write_checksum",
]

StoredValue: TypeAlias = tuple[str, int, bytes | None, str | None]
"""``(type, encoding, payload, base)`` of a blob row as read back (``base``: see _delta)."""

DecodeMemo: TypeAlias = dict[tuple[str, str, str, str], Any]
"""Snapshots decoded while building one page of tuples, by blob key."""

BlobKey: TypeAlias = tuple[str, str, str, str]
"""``(thread_id, checkpoint_ns, channel, version)``: the key of a blob row."""


_MISSING: Any = object()


# --- versions and metadata columns ---------------------------------------------------


def versions_to_json(versions: ChannelVersions) -> str:
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
    texts = ["" if f is None else str(f) for f in fields]
    lengths = [-1 if f is None else len(t) for f, t in zip(fields, texts, strict=True)]
    text = ":".join(map(str, lengths)) + "|" + "".join(texts)
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
    is refused rather than replayed differently.

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


# --- page grouping ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WriteRecord:
    """One stored write as a backend reads it back."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    encoding: int
    value: bytes | None


def group_writes(
    rows: Iterable[tuple[str, str, str, WriteRecord]],
) -> dict[tuple[str, str, str], list[WriteRecord]]:
    """Bucket ``(thread, ns, checkpoint_id, write)`` rows by checkpoint, each bucket sorted.

    The order is the contract's: ``(task_path, task_id, idx)``.
    """
    out: dict[tuple[str, str, str], list[WriteRecord]] = {}
    for thread_id, ns, cid, rec in rows:
        out.setdefault((thread_id, ns, cid), []).append(rec)
    for bucket in out.values():
        bucket.sort(key=lambda w: (w.task_path, w.task_id, w.idx))
    return out


def decode_writes(
    serde: SerializerProtocol,
    codec: BlobCodec,
    address: Address,
    writes: Iterable[WriteRecord],
) -> list[StoredWrite]:
    """``get_writes``: stored write rows decoded, in the order given, with their keys."""
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
            ),
            w.task_path,
            w.idx,
        )
        for w in writes
    ]


# --- tuples ------------------------------------------------------------------------------


def build_tuple(
    serde: SerializerProtocol,
    codec: BlobCodec,
    *,
    address: Address,
    parent_id: str | None,
    head: tuple[str, bytes],
    metadata: str | bytes | None,
    versions: Mapping[str, str] | None,
    blobs: Mapping[BlobKey, StoredValue],
    writes: Sequence[WriteRecord],
    memo: DecodeMemo | None = None,
    appends: AppendTracker | None = None,
    unstored: Collection[str] | None = (),
) -> CheckpointTuple:
    """Assemble a :class:`~tether.checkpoint.CheckpointTuple` from stored rows.

    Args:
        address: thread, namespace and id of the checkpoint.
        parent_id: the ``parent_checkpoint_id`` column.
        head: ``(type, bytes)`` of the checkpoint without its channel values.
        metadata: the JSON metadata column.
        versions: channel -> version (text) of the checkpoint; ``None`` takes
            them from the decoded head.
        blobs: blob rows fetched for the page, with the snapshots that append
            tails among them refer to. A channel stored as empty is absent
            from ``channel_values``; a channel whose row is missing raises
            :class:`~tether.errors.StorageError` (see ``unstored``).
        writes: the checkpoint's pending writes, already in contract order.
        memo: decoded snapshots shared by the tuples of one page: their
            elements are decoded once and shared between those tuples (each
            gets a list of its own). ``None`` decodes everything afresh.
        appends: the saver's tracker; a snapshot it still holds is decoded
            from its bytes instead of decompressing the stored payload.
        unstored: the channels the put found no stored value for (a caller
            may name channels in ``channel_versions`` that no put wrote): read
            as absent. Any other channel without a row was deleted after the
            put. ``None``: not recorded (a row written before the rule), so
            every channel without a row is read as absent.

    Raises:
        StorageError: a value row is missing, or the head is not this row's.
        DecodeError: a stored value cannot be decoded (thread, namespace,
            checkpoint and channel named).
    """
    checkpoint: dict[str, Any] = decode_value(serde, head[0], head[1], address=address)
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
    loads = serde.loads_typed

    def value(
        tag: str, encoding: int, payload: bytes | None, channel: str, task_id: str | None
    ) -> Any:
        # The common case (plain bytes) goes straight to the serializer; the
        # error path still names thread, namespace, checkpoint and channel.
        if encoding == ENCODING_PLAIN and type(payload) is bytes:
            try:
                return loads((tag, payload))
            except DecodeError:
                pass  # decode again below, where the error gets its context
        return codec.decode(
            serde, tag, encoding, payload, address=address, channel=channel, task_id=task_id
        )

    values: dict[str, Any] = {}
    tid, ns = address.thread_id, address.checkpoint_ns
    for channel, version in versions.items():
        blob = blobs.get((tid, ns, channel, version))
        if blob is None:
            if unstored is None or channel in unstored:
                continue  # never stored: absent, as the put was given it
            raise StorageError(
                f"the value {_where(address, channel, None)} at version {version!r} is "
                "missing: the checkpoint names it and its row is gone; the store is damaged "
                "(restore it from a backup)"
            )
        if blob[0] == EMPTY_TAG:
            continue
        base = blob[3]
        if base is None:
            values[channel] = value(blob[0], blob[1], blob[2], channel, None)
            continue
        key = (tid, ns, channel, base)
        snapshot = memo.get(key, _MISSING) if memo is not None else _MISSING
        if snapshot is _MISSING:
            stored = blobs.get(key)
            if stored is None:
                raise StorageError(
                    f"the snapshot {base!r} that value {_where(address, channel, None)} "
                    "extends is missing; the store is damaged"
                )
            plain = None
            if appends is not None and stored[1] != ENCODING_PLAIN:
                plain = appends.known((tid, ns, channel), base)
            if plain is not None:
                snapshot = value(stored[0], ENCODING_PLAIN, plain, channel, None)
            else:
                snapshot = value(stored[0], stored[1], stored[2], channel, None)
            if memo is not None:
                memo[key] = snapshot
        tail = value(blob[0], blob[1], blob[2], channel, None)
        values[channel] = join_append(snapshot, tail, where=_where(address, channel, None))
    checkpoint["channel_values"] = values
    pending: list[PendingWrite] = [
        (w.task_id, w.channel, value(w.type, w.encoding, w.value, w.channel, w.task_id))
        for w in writes
    ]
    parent = address.with_id(parent_id).to_config() if parent_id else None
    return CheckpointTuple(
        config=address.to_config(),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=metadata_from_json(metadata, address=address),  # type: ignore[arg-type]
        parent_config=parent,
        pending_writes=pending,
    )

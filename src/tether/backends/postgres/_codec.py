"""Rows <-> tether values for the Postgres backend; I/O-free, shared by both cores.

Payload encoding (plain or zlib, the ``encoding`` column) is
:class:`tether.backends._sqlbase.BlobCodec`, shared with SQLite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from tether.backends._common import (
    EMPTY_TAG,
    check_checkpoint,
    dumps_json,
    merge_metadata,
    prepare_writes,
    split_channel_values,
)
from tether.backends._sqlbase import BlobCodec
from tether.checkpoint import (
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    PendingWrite,
)
from tether.errors import ConfigError, EncodeError
from tether.serde.base import SerializerProtocol

__all__ = ["INLINE_MAX_CHARS", "decode_row", "encode_put", "encode_writes", "jsonb"]

#: Strings up to this length are kept inline in the checkpoint row; longer
#: ones go to blobs, where an unchanged value is stored once, not per step.
INLINE_MAX_CHARS = 256


def jsonb(value: Any) -> Jsonb:
    """A JSONB parameter, dumped compactly."""
    return Jsonb(value, dumps=dumps_json)


def _inline(value: Any) -> bool:
    """Whether a channel value survives a JSONB round trip exactly (type included)."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return True
    if kind is str:
        return len(value) <= INLINE_MAX_CHARS and "\x00" not in value
    if kind is float:
        # JSONB stores numerics as decimals: 1e16 would come back as an int and
        # -0.0 as 0.0, so only plain positional floats stay inline.
        return (
            math.isfinite(value)
            and "e" not in repr(value)
            and not (value == 0 and math.copysign(1.0, value) < 0)
        )
    return False


def encode_put(
    serde: SerializerProtocol,
    config: Config,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    codec: BlobCodec,
    inline: bool,
) -> tuple[Address, dict[str, Any]]:
    """The address of the new checkpoint and the parameters of the ``put`` statement.

    Small primitive values of the channels in ``new_versions`` are stored in
    the checkpoint's JSONB; the ``put`` statement carries the parent's inline
    values of unchanged channels over (same version), so a later checkpoint
    finds them without trusting the caller's ``channel_values`` for channels
    it did not name. Every other written channel becomes one blob row.
    """
    addr = Address.from_config(config)
    check_checkpoint(checkpoint, new_versions)
    meta = merge_metadata(config, metadata)
    head, blobs = split_channel_values(checkpoint, new_versions)
    inline_values: dict[str, Any] = {}
    channels: list[str] = []
    versions: list[str] = []
    types: list[str] = []
    encodings: list[int] = []
    data: list[bytes] = []
    for channel, (version, value) in blobs.items():
        if inline and _inline(value):
            inline_values[channel] = value
            continue
        tag, encoding, raw = codec.encode(serde, value)
        channels.append(channel)
        versions.append(version)
        types.append(tag)
        encodings.append(encoding)
        data.append(raw)
    head["channel_values"] = inline_values
    cid = checkpoint["id"]
    try:
        head_text = dumps_json(head)
    except (TypeError, ValueError) as exc:
        raise EncodeError(
            f"checkpoint {cid} of thread {addr.thread_id!r}: its fields other than "
            f"channel_values must be JSON values ({exc})"
        ) from exc
    params = {
        "thread_id": addr.thread_id,
        "ns": addr.checkpoint_ns,
        "checkpoint_id": cid,
        "parent_id": addr.checkpoint_id,
        "checkpoint": head_text,
        "metadata": dumps_json(meta),
        "channels": channels,
        "versions": versions,
        "types": types,
        "encodings": encodings,
        "blobs": data,
        "named": list(blobs),
    }
    return addr.with_id(cid), params


def encode_writes(
    serde: SerializerProtocol,
    config: Config,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    *,
    codec: BlobCodec,
) -> tuple[Address, dict[str, Any]]:
    """The parameters of the ``put_writes`` statement (special and ordinary halves)."""
    addr = Address.from_config(config)
    if addr.checkpoint_id is None:
        raise ConfigError(
            f"put_writes for thread {addr.thread_id!r} needs the config of a checkpoint "
            "(configurable.checkpoint_id), as returned by put()"
        )
    rows = prepare_writes(writes, task_id, task_path)
    params: dict[str, Any] = {
        "thread_id": addr.thread_id,
        "ns": addr.checkpoint_ns,
        "checkpoint_id": addr.checkpoint_id,
        "task_id": task_id,
        "task_path": task_path,
    }
    for prefix in ("s_", "o_"):
        for col in ("idx", "channels", "types", "encodings", "blobs"):
            params[prefix + col] = []
    for row in rows:
        tag, encoding, raw = codec.encode(serde, row.value)
        prefix = "s_" if row.replaces else "o_"
        params[prefix + "idx"].append(row.idx)
        params[prefix + "channels"].append(row.channel)
        params[prefix + "types"].append(tag)
        params[prefix + "encodings"].append(encoding)
        params[prefix + "blobs"].append(raw)
    return addr, params


def decode_row(serde: SerializerProtocol, codec: BlobCodec, row: Sequence[Any]) -> CheckpointTuple:
    """A :class:`CheckpointTuple` from one row of the read statements (see ``_sql``)."""
    (
        thread_id,
        ns,
        cid,
        parent_id,
        head,
        metadata,
        b_channels,
        b_types,
        b_encodings,
        b_blobs,
        w_tasks,
        w_channels,
        w_types,
        w_encodings,
        w_blobs,
    ) = row
    at = Address(thread_id, ns, cid)
    values: dict[str, Any] = head.get("channel_values") or {}
    if b_channels:
        for channel, tag, enc, raw in zip(b_channels, b_types, b_encodings, b_blobs, strict=True):
            if tag == EMPTY_TAG:
                continue
            values[channel] = codec.decode(serde, tag, enc, raw, address=at, channel=channel)
    head["channel_values"] = values
    pending: list[PendingWrite] = []
    if w_tasks:
        for task, channel, tag, enc, raw in zip(
            w_tasks, w_channels, w_types, w_encodings, w_blobs, strict=True
        ):
            value = codec.decode(serde, tag, enc, raw, address=at, channel=channel, task_id=task)
            pending.append((task, channel, value))
    return CheckpointTuple(
        config=at.to_config(),
        checkpoint=head,
        metadata=metadata,
        parent_config=at.with_id(parent_id).to_config() if parent_id else None,
        pending_writes=pending,
    )

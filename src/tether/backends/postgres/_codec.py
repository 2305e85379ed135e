"""Rows <-> tether values for the Postgres backend; I/O-free, shared by both cores.

Payload encoding (plain or compressed, the ``encoding`` column) is
:class:`tether.backends._sqlbase.BlobCodec`, and append deltas are
:mod:`tether.backends._delta`, both shared with SQLite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from psycopg.types.json import Jsonb

from tether.backends._delta import AppendTracker, Row, join_append, supports
from tether.backends._records import DecodeMemo, WriteRecord
from tether.backends._sqlbase import (
    ENCODING_PLAIN,
    BlobCodec,
    check_write_count,
)
from tether.backends.postgres._arrays import BYTEA, INT2, INT4, TEXT
from tether.checkpoint import (
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    PendingWrite,
)
from tether.contract import (
    EMPTY,
    EMPTY_TAG,
    check_checkpoint,
    check_head,
    dumps_json,
    merge_metadata,
    prepare_writes,
    split_channel_values,
)
from tether.errors import ConfigError, EncodeError, StorageError
from tether.serde.base import SerializerProtocol

__all__ = [
    "INLINE_MAX_CHARS",
    "TailFallback",
    "decode_row",
    "encode_put",
    "encode_writes",
    "jsonb",
    "pack_put",
    "store_whole",
    "write_records",
]

#: A tail in the put's blob arrays: its index, its (thread, ns, channel), the whole value.
TailFallback = tuple[int, tuple[str, str, str], Row]

#: Strings up to this length are kept inline in the checkpoint row; longer
#: ones go to blobs, where an unchanged value is stored once, not per step.
INLINE_MAX_CHARS = 256


def metadata_json(meta: dict[str, Any]) -> str:
    """Metadata as JSON text whose floats come back from JSONB as floats.

    JSONB stores numbers as ``numeric``: a float JSON writes in exponent form
    with no fraction (``1e+16``, ``2.5e+16``) is read back as an integer. Such
    floats are written positionally with a ``.0`` (the digits of their
    shortest repr, which read back as the same float), which ``numeric``
    keeps as a fraction.
    """
    text = dumps_json(meta)
    if "e+" not in text and "E+" not in text:
        return text  # no float in exponent form is integral below 1e16
    out: list[str] = []
    _write_json(meta, out)
    return "".join(out)


def _write_json(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(dumps_json(key))
            out.append(":")
            _write_json(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write_json(item, out)
        out.append("]")
    elif type(value) is float and "e" in (text := repr(value)) and value == int(value):
        # The shortest repr's digits, positionally: the same decimal that JSON
        # writes (a filter's "1e+308" equals it), and it reads back as the float.
        out.append(format(Decimal(text), "f") + ".0")
    else:
        out.append(dumps_json(value))


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
    appends: AppendTracker | None = None,
) -> tuple[Address, dict[str, Any], list[TailFallback]]:
    """The address of the new checkpoint, the ``put`` statement's parameters, its tails.

    Small primitive values of the channels in ``new_versions`` are stored in
    the checkpoint's JSONB; the ``put`` statement carries the parent's inline
    values of unchanged channels over (same version), so a later checkpoint
    finds them without trusting the caller's ``channel_values`` for channels
    it did not name. Every other written channel becomes one blob row, or,
    for a growing list, a tail (and maybe a new snapshot) planned by
    ``appends``. The tails that extend a snapshot of an earlier put are
    returned with the whole value to store instead (:func:`store_whole`) if
    the database refuses them because the snapshot is gone.
    """
    addr = Address.from_config(config)
    check_checkpoint(checkpoint, new_versions)
    meta = merge_metadata(config, metadata)
    head, blobs = split_channel_values(checkpoint, new_versions)
    check_head(head, head["id"])  # plain JSON, as on every backend
    if not supports(serde):
        appends = None
    inline_values: dict[str, Any] = {}
    channels: list[str] = []
    versions: list[str] = []
    types: list[str] = []
    encodings: list[int] = []
    data: list[bytes] = []
    bases: list[str | None] = []
    tails: list[TailFallback] = []
    for channel, (version, value) in blobs.items():
        if inline and _inline(value):
            inline_values[channel] = value
            continue
        if appends is None or value is EMPTY:
            tag, encoding, raw = codec.encode(serde, value)
            channels.append(channel)
            versions.append(version)
            types.append(tag)
            encodings.append(encoding)
            data.append(raw)
            bases.append(None)
            continue
        key = (addr.thread_id, addr.checkpoint_ns, channel)
        plan = appends.plan(key, version, *serde.dumps_typed(value))
        for ver, tag, encoding, raw, base in codec.encode_plan(plan):
            channels.append(channel)
            versions.append(ver)
            types.append(tag)
            encodings.append(encoding)
            data.append(raw)
            bases.append(base)
        if plan.fallback is not None:
            tails.append((len(channels) - 1, key, plan.fallback))
    head["channel_values"] = inline_values
    cid = head["id"]
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
        "metadata": metadata_json(meta),
        "channels": channels,
        "versions": versions,
        "types": types,
        "encodings": encodings,
        "blobs": data,
        "bases": bases,
        # A JSON object: the put statement tests each channel with `?`, a
        # binary search, where `= ANY(array)` would scan the array per channel.
        "named": dumps_json(dict.fromkeys(blobs, 1)),
    }
    return addr.with_id(cid), params, tails


def pack_put(params: dict[str, Any]) -> dict[str, Any]:
    """``put`` parameters with their row lists as binary arrays (:mod:`._arrays`)."""
    return {
        **params,
        "channels": TEXT(params["channels"]),
        "versions": TEXT(params["versions"]),
        "types": TEXT(params["types"]),
        "encodings": INT2(params["encodings"]),
        "blobs": BYTEA(params["blobs"]),
        "bases": TEXT(params["bases"]),
    }


def store_whole(
    params: dict[str, Any],
    tails: Sequence[TailFallback],
    codec: BlobCodec,
    appends: AppendTracker | None,
) -> dict[str, Any]:
    """``put`` parameters with every tail replaced by its whole value.

    For a put the database refused because a snapshot its tails extend was
    deleted meanwhile (another process pruned the thread); the channels are
    forgotten, so their next write starts a new snapshot.
    """
    out = {**params, "types": list(params["types"]), "encodings": list(params["encodings"])}
    out["blobs"] = list(params["blobs"])
    out["bases"] = list(params["bases"])
    for index, key, whole in tails:
        if appends is not None:
            appends.forget(key)
        tag, encoding, raw = codec.encode_bytes(whole.tag, whole.data)
        out["types"][index] = tag
        out["encodings"][index] = encoding
        out["blobs"][index] = raw
        out["bases"][index] = None
    return out


def encode_writes(
    serde: SerializerProtocol,
    config: Config,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    *,
    codec: BlobCodec,
) -> tuple[Address, dict[str, Any], bool]:
    """The parameters of the ``put_writes`` statement, and whether it has special writes.

    Without special writes (negative indexes, S2.4) the statement's upsert
    half is left out (``Statements.put_writes_ordinary``).
    """
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
    lists: dict[str, list[Any]] = {}
    for prefix in ("s_", "o_"):
        for col in ("idx", "channels", "types", "encodings", "blobs"):
            lists[prefix + col] = []
    for row in rows:
        tag, encoding, raw = codec.encode(serde, row.value)
        prefix = "s_" if row.replaces else "o_"
        lists[prefix + "idx"].append(row.idx)
        lists[prefix + "channels"].append(row.channel)
        lists[prefix + "types"].append(tag)
        lists[prefix + "encodings"].append(encoding)
        lists[prefix + "blobs"].append(raw)
    for prefix in ("s_", "o_"):
        params[prefix + "idx"] = INT4(lists[prefix + "idx"])
        params[prefix + "channels"] = TEXT(lists[prefix + "channels"])
        params[prefix + "types"] = TEXT(lists[prefix + "types"])
        params[prefix + "encodings"] = INT2(lists[prefix + "encodings"])
        params[prefix + "blobs"] = BYTEA(lists[prefix + "blobs"])
    return addr, params, bool(lists["s_idx"])


def decode_row(
    serde: SerializerProtocol,
    codec: BlobCodec,
    row: Sequence[Any],
    memo: DecodeMemo | None = None,
    appends: AppendTracker | None = None,
) -> CheckpointTuple:
    """A :class:`CheckpointTuple` from one row of the read statements (see ``_sql``).

    ``memo`` shares decoded snapshots between the rows of one page, as in
    :func:`tether.backends._records.assemble`.
    """
    (
        thread_id,
        ns,
        cid,
        parent_id,
        head,
        metadata,
        absent,
        nwrites,
        b_channels,
        b_types,
        b_encodings,
        b_blobs,
        b_bases,
        s_encodings,
        s_blobs,
        w_tasks,
        w_channels,
        w_types,
        w_encodings,
        w_blobs,
    ) = row
    at = Address(thread_id, ns, cid)
    if head.get("id") != cid:
        raise StorageError(
            f"checkpoint {cid} of thread {thread_id!r}"
            + (f" (namespace {ns!r})" if ns else "")
            + f" holds a checkpoint whose id is {head.get('id')!r}; the row is damaged"
        )
    values: dict[str, Any] = head.get("channel_values") or {}
    if b_channels:
        for channel, tag, enc, raw, base, s_enc, s_raw in zip(
            b_channels, b_types, b_encodings, b_blobs, b_bases, s_encodings, s_blobs, strict=True
        ):
            if tag is None:  # no blob row at the version the checkpoint lists
                if absent is None or (channel not in absent and None not in absent):
                    raise StorageError(
                        f"the value of channel {channel!r} (version "
                        f"{head['channel_versions'][channel]!r}) of checkpoint {cid} in thread "
                        f"{thread_id!r}"
                        + (f" (namespace {ns!r})" if ns else "")
                        + " is missing: no row holds it; the store is damaged"
                    )
                continue  # no put stored a value (recorded), or a row older than that record
            if tag == EMPTY_TAG:
                continue
            if base is None:
                values[channel] = codec.decode(serde, tag, enc, raw, address=at, channel=channel)
                continue
            key = (thread_id, ns, channel, base)
            snapshot = memo.get(key, _MISSING) if memo is not None else _MISSING
            if snapshot is _MISSING:
                if s_enc is None:
                    raise StorageError(
                        f"the snapshot {base!r} that channel {channel!r} of checkpoint {cid} "
                        f"in thread {thread_id!r}"
                        + (f" (namespace {ns!r})" if ns else "")
                        + " extends is missing; the store is damaged"
                    )
                plain = None
                if appends is not None and s_enc != ENCODING_PLAIN:
                    plain = appends.known((thread_id, ns, channel), base)
                if plain is not None:  # this process wrote it: skip the decompression
                    s_enc, s_raw = ENCODING_PLAIN, plain
                snapshot = codec.decode(serde, tag, s_enc, s_raw, address=at, channel=channel)
                if memo is not None:
                    memo[key] = snapshot
            tail = codec.decode(serde, tag, enc, raw, address=at, channel=channel)
            values[channel] = join_append(
                snapshot, tail, where=f"of channel {channel!r} in thread {thread_id!r}"
            )
    head["channel_values"] = values
    check_write_count(at, nwrites, len(w_tasks) if w_tasks else 0, "the Postgres store")
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


def write_records(rows: Sequence[Sequence[Any]], address: Address) -> list[WriteRecord]:
    """The write rows of the ``get_writes`` statement, checked against the checkpoint's count.

    Its first row, when the checkpoint row exists, holds only the count.
    """
    recorded: int | None = None
    if rows and rows[0][0] is None:
        recorded, rows = rows[0][7], rows[1:]
    check_write_count(address, recorded, len(rows), "the Postgres store")
    return [WriteRecord(*r[:7]) for r in rows]


_MISSING: Any = object()

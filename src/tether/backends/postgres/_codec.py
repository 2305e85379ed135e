"""Records <-> statement parameters and rows for the Postgres backend; I/O-free.

What a put or write stores, and how stored records become a tuple, is
:mod:`tether.backends._records`, shared by every backend; this module only
lays records out as the statements of :mod:`._sql` take and return them
(parallel binary arrays, JSONB). Which values stay inline in the JSONB head
is the shared rule :func:`tether.backends._records.inline_value`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, cast

from psycopg.types.json import Jsonb

from tether.backends._delta import AppendTracker
from tether.backends._pages import DecodeMemo
from tether.backends._records import (
    BlobKey,
    PutPlan,
    StoredValue,
    ValueRecord,
    WriteRecord,
    assemble,
)
from tether.backends._sqlbase import BlobCodec, check_write_count
from tether.backends.postgres._arrays import BYTEA, INT2, INT4, TEXT
from tether.checkpoint import Address, CheckpointTuple
from tether.contract import dumps_json
from tether.serde.base import SerializerProtocol

__all__ = [
    "decode_row",
    "jsonb",
    "put_params",
    "write_params",
    "write_records",
]


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


def put_params(plan: PutPlan, values: Sequence[ValueRecord]) -> dict[str, Any]:
    """The ``put`` statement's parameters for a planned put and the value rows it stores.

    Small primitive values of the channels the put names are in the head's
    JSONB (``encode_put(inline=inline_value)``); the statement carries the
    parent's inline values of unchanged channels over (same version), so a
    later checkpoint finds them without trusting the caller's
    ``channel_values`` for channels it did not name. The row lists go as
    binary arrays (:mod:`._arrays`).
    """
    addr = plan.address
    return {
        "thread_id": addr.thread_id,
        "ns": addr.checkpoint_ns,
        "checkpoint_id": addr.checkpoint_id,
        "parent_id": plan.parent_id,
        "checkpoint": plan.head[1].decode(),
        "metadata": metadata_json(plan.metadata),
        "channels": TEXT([v.channel for v in values]),
        "versions": TEXT([v.version for v in values]),
        "types": TEXT([v.type for v in values]),
        "encodings": INT2([v.encoding for v in values]),
        "blobs": BYTEA([v.payload for v in values]),
        "bases": TEXT([v.base for v in values]),
        # A JSON object: the put statement tests each channel with `?`, a
        # binary search, where `= ANY(array)` would scan the array per channel.
        "named": dumps_json(dict.fromkeys(plan.named, 1)),
    }


def write_params(
    address: Address, task_id: str, task_path: str, records: Sequence[WriteRecord]
) -> tuple[dict[str, Any], bool]:
    """The ``put_writes`` statement's parameters for encoded writes, and whether any is special.

    Without special writes (negative indexes, S2.4) the statement's upsert
    half is left out (``Statements.put_writes_ordinary``).
    """
    params: dict[str, Any] = {
        "thread_id": address.thread_id,
        "ns": address.checkpoint_ns,
        "checkpoint_id": address.checkpoint_id,
        "task_id": task_id,
        "task_path": task_path,
    }
    special = False
    for prefix, rows in (
        ("s_", [r for r in records if r.replaces]),
        ("o_", [r for r in records if not r.replaces]),
    ):
        special = special or (prefix == "s_" and bool(rows))
        params[prefix + "idx"] = INT4([r.idx for r in rows])
        params[prefix + "channels"] = TEXT([r.channel for r in rows])
        params[prefix + "types"] = TEXT([r.type for r in rows])
        params[prefix + "encodings"] = INT2([r.encoding for r in rows])
        # encode_writes always sets the payload (None only reads back from damage)
        params[prefix + "blobs"] = BYTEA(cast("list[bytes]", [r.value for r in rows]))
    return params, special


def decode_row(
    serde: SerializerProtocol,
    codec: BlobCodec,
    row: Sequence[Any],
    memo: DecodeMemo | None = None,
    appends: AppendTracker | None = None,
) -> CheckpointTuple:
    """A :class:`CheckpointTuple` from one row of the read statements (see ``_sql``).

    The row's arrays become records for :func:`tether.backends._records.assemble`
    (``memo`` as there).
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
    check_write_count(at, nwrites, len(w_tasks) if w_tasks else 0, "the Postgres store")
    blobs: dict[BlobKey, StoredValue] = {}
    if b_channels:
        versions = head.get("channel_versions") or {}
        for channel, tag, enc, raw, base, s_enc, s_raw in zip(
            b_channels, b_types, b_encodings, b_blobs, b_bases, s_encodings, s_blobs, strict=True
        ):
            if tag is None:  # no value row at the version the checkpoint names
                continue
            blobs[(thread_id, ns, channel, str(versions.get(channel)))] = (tag, enc, raw, base)
            if base is not None and s_enc is not None:
                blobs[(thread_id, ns, channel, base)] = (tag, s_enc, s_raw, None)
    writes = (
        [
            WriteRecord(task, "", 0, channel, tag, enc, raw)
            for task, channel, tag, enc, raw in zip(
                w_tasks, w_channels, w_types, w_encodings, w_blobs, strict=True
            )
        ]
        if w_tasks
        else ()
    )
    # absent: NULL when the put found every value; {NULL} on rows put before
    # it was recorded (then any channel without a value reads as absent).
    unstored = () if absent is None else None if None in absent else absent
    return assemble(
        serde,
        codec,
        address=at,
        parent_id=parent_id,
        head=head,
        metadata=metadata,
        versions=None,
        blobs=blobs,
        writes=writes,
        memo=memo,
        appends=appends,
        unstored=unstored,
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

"""Records <-> statement parameters and rows for the Postgres backend; I/O-free.

What a put or write stores, and how stored records become a tuple, is
:mod:`tether.backends._records`, shared by every backend; this module only
lays records out as the statements of :mod:`._sql` take and return them
(parallel binary arrays, JSONB). Which values stay inline in the JSONB head
is the shared rule :func:`tether.backends._inline.inline_value`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from operator import attrgetter
from typing import Any, cast

import msgspec
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


_encode_json = msgspec.json.encode
# A number in exponent form with a positive exponent, as msgspec writes it ("1e16").
_EXPONENT = re.compile(rb"[0-9]e[0-9]")


def metadata_json(meta: dict[str, Any], *, checked: bool = False) -> str:
    """Metadata as JSON text whose floats come back from JSONB as floats.

    JSONB stores numbers as ``numeric``: a float JSON writes in exponent form
    with no fraction (``1e+16``, ``2.5e+16``) is read back as an integer. Such
    floats are written positionally with a ``.0`` (the digits of their
    shortest repr, which read back as the same float), which ``numeric``
    keeps as a fraction.

    ``checked``: ``meta`` is what ``merge_metadata`` returns (plain str keys;
    str, int, bool, None, finite floats, lists and dicts of them), for which
    msgspec writes the same JSON as the json module, 10x faster: a put's
    metadata cost about 12 us of client CPU as ``dumps_json`` (#19 goal 7).
    msgspec writes a float with a positive exponent as ``1e16``; those take the
    walk below (a string that merely looks like one does too, harmlessly).
    Unchecked metadata (read back for copy and rekey: a stored number beyond
    float range reads as inf, which msgspec would write as null) takes
    ``dumps_json``, which refuses it.
    """
    if checked:
        data = _encode_json(meta)
        if _EXPONENT.search(data) is None:
            return data.decode()
    else:
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
        "metadata": metadata_json(plan.metadata, checked=True),
        "channels": TEXT([v.channel for v in values]),
        "versions": TEXT([v.version for v in values]),
        "types": TEXT([v.type for v in values]),
        "encodings": INT2([v.encoding for v in values]),
        "blobs": BYTEA([v.payload for v in values]),
        "bases": TEXT([v.base for v in values]),
        # A JSON object: the put statement tests each channel with `?`, a
        # binary search, where `= ANY(array)` would scan the array per channel.
        # Channel names are checked text (check_text): msgspec writes them as
        # the json module would.
        "named": _encode_json(dict.fromkeys(plan.named, 1)).decode(),
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
    specials = [r for r in records if r.replaces]
    # Without special writes the statement has no special half to pass arrays to.
    halves: Sequence[tuple[str, Sequence[WriteRecord]]] = (
        (("s_", specials), ("o_", [r for r in records if not r.replaces]))
        if specials
        else (("o_", records),)
    )
    for prefix, rows in halves:
        params[prefix + "idx"] = INT4([r.idx for r in rows])
        params[prefix + "channels"] = TEXT([r.channel for r in rows])
        params[prefix + "types"] = TEXT([r.type for r in rows])
        params[prefix + "encodings"] = INT2([r.encoding for r in rows])
        # encode_writes always sets the payload (None only reads back from damage)
        params[prefix + "blobs"] = BYTEA(cast("list[bytes]", [r.value for r in rows]))
    return params, bool(specials)


#: WriteRecord.order (S2.4), as a C getter.
_write_order = attrgetter("task_path", "task_id", "idx")


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
        w_paths,
        w_channels,
        w_types,
        w_encodings,
        w_blobs,
        w_idxs,  # for the associated data of sealed writes (#17)
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
    writes: Sequence[WriteRecord] = ()
    if w_tasks:
        # In scan order: put in S2.4 order here (see _sql._read_joins).
        writes = sorted(
            (
                WriteRecord(task, path, idx, channel, tag, enc, raw)
                for task, path, channel, tag, enc, raw, idx in zip(
                    w_tasks,
                    w_paths,
                    w_channels,
                    w_types,
                    w_encodings,
                    w_blobs,
                    w_idxs,
                    strict=True,
                )
            ),
            key=_write_order,
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

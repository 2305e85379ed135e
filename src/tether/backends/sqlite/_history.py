"""LangGraph ``DeltaChannel`` history on SQLite: the walk as one statement, and its rows.

``get_delta_channel_history`` asks, for some channels of a checkpoint, for
the pending writes on its ancestors back to the nearest one storing a value
for each channel (:func:`tether.backends._walk.walk_delta` states the
rules). :func:`statement` answers it in one SELECT, so in one read snapshot:

* ``walk``, a recursive CTE, follows ``parent_checkpoint_id`` from the target.
  Each row carries ``walked``, the bits of the channels still walked when it
  is reached (the target's row: 0, its own values and writes are not read),
  and per channel its version there (``v0``, ...) and what is stored at that
  version (``s0``, ...: 0 not walked or no version, 1 stored empty, 2 a value,
  3 no row, 4 kept inline in the row's JSON head). Only bits of ``walked``
  cost a lookup (the head's JSON, then a primary-key probe).
  The recursion stops at a row after which no channel is left, at a root,
  or at a row already produced (``UNION``: a checkpoint put again under a
  descendant makes a loop).
* then, ``UNION ALL``: the checkpoint rows of the walk (checked against their
  checksums, with their write counts), the value rows of the seeds (state 2)
  with the snapshots their append tails extend, and the walked ancestors'
  writes to the asked channels.

A version is read from the row's ``channel_versions`` with ``json_extract``
and a path, for names that a path can spell in SQLite 3.40 (printable ASCII
without ``"`` and ``\\``); any other name with a ``json_each`` lookup.
The version of a channel kept inline, which since schema 9 only the head
names, is read from the head in Python (:class:`Walked`). Everything else is a
bound parameter; the text is composed from the
fragments below, per channel count and name kind, and cached.
"""

# ruff: noqa: S608 -- the only formatted-in text is fixed fragments of this module
# and integers (channel bits and parameter numbers).

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tether.backends._inline import head_inline
from tether.backends._records import HEAD_JSON, BlobKey, StoredValue, WriteRecord
from tether.backends._sqlbase import metadata_from_json
from tether.backends._walk import (
    Ancestor,
)
from tether.backends.sqlite._rows import (
    check_row,
    check_value_row,
    check_write_count,
    check_write_row,
    row_unstored,
)
from tether.backends.sqlite._sql import CHECKPOINT_COLUMNS
from tether.checkpoint import Address
from tether.contract import EMPTY_TAG
from tether.encryption import in_envelope

__all__ = ["Walked", "params", "path_safe", "statement"]

# States of a channel at a walked checkpoint (the s<i> columns).
_NONE, _EMPTY, _VALUE, _NO_ROW, _INLINE = 0, 1, 2, 3, 4

# A row stored as empty, for the walk's lookups (its payload is not fetched).
_EMPTY_ROW: StoredValue = (EMPTY_TAG, 0, None, None)

# Parameters: ?1 thread, ?2 namespace, ?3 checkpoint id (unused for the latest),
# ?4 every channel's bit; channel i: ?<5+2i> its name, ?<6+2i> its JSON path.
_FIXED = 4


def _name(i: int) -> str:
    return f"?{_FIXED + 1 + 2 * i}"


def _path(i: int) -> str:
    return f"?{_FIXED + 2 + 2 * i}"


def path_safe(channel: str) -> bool:
    """Whether ``json_extract`` finds ``channel`` under the path ``$."channel"``."""
    return (
        channel.isascii() and channel.isprintable() and '"' not in channel and "\\" not in channel
    )


def _version(i: int, safe: bool, row: str) -> str:
    """Channel i's version in the ``channel_versions`` of checkpoint row ``row``."""
    if safe:
        return f"json_extract({row}.channel_versions, {_path(i)})"
    return f"(SELECT j.value FROM json_each({row}.channel_versions) AS j WHERE j.key = {_name(i)})"


def _inline(i: int, safe: bool, row: str) -> str:
    """Whether channel i is kept inline in the JSON head of checkpoint row ``row``
    (its ``channel_values``; only a ``head+json`` row has them, checked first)."""
    head = f"CAST({row}.checkpoint AS TEXT)"
    if safe:  # the path $."name" of the versions, under channel_values
        found = f"json_type({head}, '$.channel_values' || substr({_path(i)}, 2)) IS NOT NULL"
    else:
        found = (
            f"EXISTS (SELECT 1 FROM json_each({head}, '$.channel_values') AS j "
            f"WHERE j.key = {_name(i)})"
        )
    return f"CASE WHEN {row}.type <> '{HEAD_JSON}' THEN 0 ELSE {found} END"


def _state(i: int, safe: bool, walked: str) -> str:
    """Channel i's state (``_NONE``...) at checkpoint row ``c``, reached with ``walked``."""
    version = _version(i, safe, "c")
    # Inline first: since schema 9 the row's channel_versions names only the
    # channels not kept inline (Walked reads an inline one's version from the head).
    return (
        f"CASE WHEN ({walked}) & {1 << i} = 0 THEN {_NONE} "
        f"WHEN {_inline(i, safe, 'c')} THEN {_INLINE} "
        f"WHEN {version} IS NULL THEN {_NONE} "
        f"ELSE coalesce((SELECT CASE WHEN b.type = '{EMPTY_TAG}' THEN {_EMPTY} ELSE {_VALUE} END "
        f"FROM tether_blobs AS b WHERE b.thread_id = ?1 AND b.checkpoint_ns = ?2 "
        f"AND b.channel = {_name(i)} AND b.version = {version}), {_NO_ROW}) END"
    )


def _value_columns(alias: str) -> str:
    """A value row as the reads return it (``check_value_row``'s columns after the kind)."""
    cols = ("thread_id", "checkpoint_ns", "channel", "version", "type", "value", "encoding")
    return ", ".join(f"{alias}.{col}" for col in (*cols, "base", "checksum"))


def _value_of(alias: str, channel: str, version: str) -> str:
    """The join condition of value row ``alias`` at (``channel``, ``version``) of the thread."""
    return (
        f"{alias}.thread_id = ?1 AND {alias}.checkpoint_ns = ?2 AND {alias}.channel = {channel} "
        f"AND {alias}.version = {version}"
    )


@functools.lru_cache(maxsize=64)
def statement(safe: tuple[bool, ...], latest: bool) -> str:
    """The walk for channels whose names are path-safe as ``safe`` says (one per channel)."""
    n = len(safe)
    states = [f"s{i}" for i in range(n)]
    versions = [f"v{i}" for i in range(n)]
    # The channels a parent row is reached with: the child's, less those seeded there.
    seeded = " | ".join(
        f"(CASE WHEN w.s{i} IN ({_VALUE}, {_INLINE}) THEN {1 << i} ELSE 0 END)" for i in range(n)
    )
    walked = f"CASE WHEN w.walked = 0 THEN ?4 ELSE w.walked & ~({seeded}) END"
    target = "SELECT * FROM tether_checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2 " + (
        "ORDER BY checkpoint_id DESC LIMIT 1" if latest else "AND checkpoint_id = ?3"
    )
    found = [_version(i, s, "c") for i, s in enumerate(safe)]
    anchor_cols = ", ".join(["0"] * n + found)
    step_cols = ", ".join([_state(i, s, walked) for i, s in enumerate(safe)] + found)
    width = 14 + 2 * n  # kind, the checkpoint columns, walked, write count, states, versions
    keys = " UNION ".join(
        f"SELECT {_name(i)} AS ch, w.v{i} AS v FROM walk AS w WHERE w.s{i} = {_VALUE}"
        for i in range(n)
    )
    checkpoint_cols = ", ".join(f"c.{col.strip()}" for col in CHECKPOINT_COLUMNS.split(","))
    names = ", ".join(_name(i) for i in range(n))
    return f"""
WITH RECURSIVE walk(checkpoint_id, parent, walked, {", ".join(states + versions)}) AS (
    SELECT c.checkpoint_id, c.parent_checkpoint_id, 0, {anchor_cols}
    FROM ({target}) AS c
    UNION
    SELECT c.checkpoint_id, c.parent_checkpoint_id, {walked}, {step_cols}
    FROM walk AS w CROSS JOIN tether_checkpoints AS c
    ON c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.checkpoint_id = w.parent
    WHERE ({walked}) <> 0
),
k(ch, v) AS ({keys})
SELECT 0, {checkpoint_cols}, w.walked,
       CASE WHEN w.walked = 0 THEN NULL ELSE (SELECT count(*) FROM tether_writes AS x
           WHERE x.thread_id = ?1 AND x.checkpoint_ns = ?2 AND x.checkpoint_id = w.checkpoint_id)
       END, {", ".join(f"w.{col}" for col in states + versions)}
FROM walk AS w CROSS JOIN tether_checkpoints AS c
ON c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.checkpoint_id = w.checkpoint_id
UNION ALL
SELECT 1, {_value_columns("b")}{", NULL" * (width - 10)}
FROM k CROSS JOIN tether_blobs AS b ON {_value_of("b", "k.ch", "k.v")}
UNION ALL
SELECT 1, {_value_columns("s")}{", NULL" * (width - 10)}
FROM k CROSS JOIN tether_blobs AS t ON {_value_of("t", "k.ch", "k.v")}
CROSS JOIN tether_blobs AS s ON {_value_of("s", "k.ch", "t.base")}
UNION ALL
SELECT 2, x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.task_id, x.task_path, x.idx,
       x.channel, x.type, x.encoding, x.value, x.checksum{", NULL" * (width - 12)}
FROM walk AS w CROSS JOIN tether_writes AS x
ON x.thread_id = ?1 AND x.checkpoint_ns = ?2 AND x.checkpoint_id = w.checkpoint_id
WHERE w.walked <> 0 AND x.channel IN ({names})
"""


def params(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str | None, channels: Sequence[str]
) -> list[Any]:
    """The statement's parameters (``checkpoint_id`` ``None``: the latest)."""
    out: list[Any] = [thread_id, checkpoint_ns, checkpoint_id or "", (1 << len(channels)) - 1]
    for channel in channels:
        out += [channel, f'$."{channel}"' if path_safe(channel) else None]
    return out


class Walked:
    """The statement's rows as the walk's records (:func:`~tether.backends._walk.walk_delta`).

    ``target``: the target checkpoint's row (``None``: no such checkpoint);
    ``ancestors`` by id; ``stored`` the value rows by ``(channel, version)``
    (the seeds' whole, a row stored empty as its type only); ``blobs`` the
    seeds' rows with the snapshots they extend, for decoding.
    """

    def __init__(self, rows: Iterable[Sequence[Any]], channels: Sequence[str], where: str) -> None:
        self.target: Sequence[Any] | None = None
        self.ancestors: dict[str, Ancestor] = {}
        self.stored: dict[tuple[str, str], StoredValue] = {}
        self.blobs: dict[BlobKey, StoredValue] = {}
        n = len(channels)
        heads: list[Sequence[Any]] = []
        writes: dict[str, list[WriteRecord]] = {}
        for r in rows:
            kind = r[0]
            if kind == 0:
                head = r[1:12]
                check_row(head, where)
                if not r[12]:
                    self.target = head
                    continue
                check_write_count(head, r[13], where)
                heads.append(r)
            elif kind == 1:
                if r[9] is not None:
                    check_value_row(r, where)
                value: StoredValue = (r[5], r[7], r[6], r[8])
                self.blobs[(r[1], r[2], r[3], r[4])] = value
                self.stored[(r[3], r[4])] = value
            else:
                if r[11] is not None:
                    check_write_row(r, where)
                record = WriteRecord(r[4], r[5], r[6], r[7], r[8], r[9], r[10])
                writes.setdefault(r[3], []).append(record)
        for r in heads:
            versions: dict[str, str] = {}
            inline: dict[str, Any] = {}
            envelope: tuple[Mapping[str, Any], Mapping[str, str]] | None = None
            for i, channel in enumerate(channels):
                state, version = r[14 + i], r[14 + n + i]
                if state == _NONE:
                    continue
                if state == _INLINE:
                    at, values = head_inline(r[5], r[6])
                    inline[channel] = values[channel]
                    version = str(at.get(channel))
                    if envelope is None and in_envelope(values[channel]):
                        # sealed in the head's envelope: bound to every channel's version
                        meta = metadata_from_json(r[8], address=Address(r[1], r[2], r[3]))
                        envelope = (meta, {str(k): str(v) for k, v in at.items()})
                elif state == _EMPTY:
                    self.stored.setdefault((channel, version), _EMPTY_ROW)
                versions[channel] = version
            cid = r[3]
            mine = writes.get(cid, [])
            mine.sort(key=lambda w: w.order)
            unstored = row_unstored(r[1:12])
            self.ancestors[cid] = Ancestor(cid, r[4], versions, inline, unstored, mine, envelope)

"""LangGraph ``DeltaChannel`` history on Postgres: the walk as one statement, and its rows.

I/O-free. ``get_delta_channel_history`` asks, for some channels of a
checkpoint, for the pending writes on its ancestors back to the nearest one
storing a value for each channel (:func:`tether.backends._walk.walk_delta`
states the rules). :class:`HistoryStatements` answers it in one statement,
one round trip:

* ``walk``, a recursive CTE, follows ``parent_checkpoint_id`` from the target.
  Each row carries ``walked``, the bits of the channels still walked when it
  is reached (the target's row: 0, its own values and writes are not read),
  and per channel its version there (``v0``, ...) and what is stored for it
  (``s0``, ...: 0 not walked or no version, 1 stored empty, 2 a value row, 3
  no row, 4 kept inline in the head). Only channels of ``walked`` cost a lookup (a
  primary-key probe). The recursion stops at a row after which no channel is
  left, at a root, or at a row already produced (``UNION``: a checkpoint put
  again under a descendant makes a loop).
* then, ``UNION ALL``: the walked rows (their parent, ``absent`` list, inline
  values when a seed is inline, recorded and found write counts), the value
  rows of the seeds (state 2) with the snapshots their append tails extend,
  and the walked ancestors' writes to the asked channels.

Every lookup is a ``LATERAL`` subquery with ``LIMIT`` or ``OFFSET 0``, so the
planner cannot turn it into a hash join over the whole thread (as for the
reads in ``_sql``).
"""

# ruff: noqa: S608 -- the only formatted-in text is the schema-qualified table
# names (check_schema_name) and integers (channel bits, parameter numbers); values
# always travel as bound parameters.

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tether.backends._records import (
    BlobKey,
    StoredValue,
    WriteRecord,
)
from tether.backends._sqlbase import check_write_count
from tether.backends._walk import (
    Ancestor,
)
from tether.checkpoint import Address
from tether.contract import EMPTY_TAG

__all__ = ["HistoryStatements", "Walked", "params"]

# States of a channel at a walked checkpoint.
_NONE, _EMPTY, _VALUE, _NO_ROW, _INLINE = 0, 1, 2, 3, 4

# A row stored as empty, for the walk's lookups (its payload is not fetched).
_EMPTY_ROW: StoredValue = (EMPTY_TAG, 0, None, None)


def _channel(i: int) -> str:
    return f"%(c{i})s::text"


def _version(i: int) -> str:
    """Channel i's version in the checkpoint row ``c``."""
    return f"c.checkpoint -> 'channel_versions' ->> {_channel(i)}"


def _state(i: int, blobs: str) -> str:
    """Channel i's state at checkpoint row ``c``, reached with ``n.walked``."""
    return f"""CASE WHEN (n.walked & {1 << i}) = 0 THEN {_NONE}
        WHEN coalesce(c.checkpoint -> 'channel_values' ? {_channel(i)}, false) THEN {_INLINE}
        WHEN {_version(i)} IS NULL THEN {_NONE}
        ELSE coalesce((SELECT CASE WHEN b.type = '{EMPTY_TAG}' THEN {_EMPTY} ELSE {_VALUE} END
                       FROM {blobs} b
                       WHERE b.thread_id = %(t)s AND b.checkpoint_ns = %(ns)s
                         AND b.channel = {_channel(i)} AND b.version = {_version(i)}
                       LIMIT 1), {_NO_ROW}) END::smallint"""


class HistoryStatements:
    """The walk's text for one schema, per channel count: by checkpoint id, or the latest.

    One text per channel count, with a parameter per channel (not one
    ``text[]``): the planner then estimates a prepared statement's generic
    plan as it does the custom one and keeps it, where an array's unknown
    length made it plan every call again (1-2 ms).
    """

    def __init__(self, checkpoints: str, blobs: str, writes: str, counts: str) -> None:
        self._tables = (checkpoints, blobs, writes, counts)
        self._texts: dict[tuple[int, bool], str] = {}

    def text(self, n: int, latest: bool) -> str:
        """The statement for ``n`` channels, from the latest checkpoint or ``%(cid)s``."""
        key = (n, latest)
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = self._compose(n, latest)
        return found

    def _compose(self, n: int, latest: bool) -> str:
        checkpoints, blobs, writes, counts = self._tables
        target = (
            "ORDER BY c.checkpoint_id DESC LIMIT 1" if latest else "AND c.checkpoint_id = %(cid)s"
        )
        cols = [f"s{i}" for i in range(n)] + [f"v{i}" for i in range(n)]
        # The channels a parent row is reached with: the child's, less those it
        # found a value for (the target's row: every channel).
        seeded = " | ".join(
            f"CASE WHEN w.s{i} IN ({_VALUE}, {_INLINE}) THEN {1 << i} ELSE 0 END" for i in range(n)
        )
        walked = f"CASE WHEN w.walked = 0 THEN %(all)s::bigint ELSE w.walked & ~({seeded}) END"
        anchor = ", ".join(["0::smallint"] * n + ["NULL::text"] * n)
        step = ", ".join([_state(i, blobs) for i in range(n)] + [_version(i) for i in range(n)])
        keys = " UNION ".join(
            f"SELECT {_channel(i)} AS ch, w.v{i} AS v FROM walk w WHERE w.s{i} = {_VALUE}"
            for i in range(n)
        )
        names = ", ".join(_channel(i) for i in range(n))
        pad = ", NULL" * (2 * n)
        return f"""
WITH RECURSIVE walk(checkpoint_id, parent, walked, {", ".join(cols)}) AS (
    (SELECT c.checkpoint_id, c.parent_checkpoint_id, 0::bigint, {anchor}
     FROM {checkpoints} c
     WHERE c.thread_id = %(t)s AND c.checkpoint_ns = %(ns)s {target})
    UNION
    SELECT c.checkpoint_id, c.parent_checkpoint_id, n.walked, {step}
    FROM walk w
    CROSS JOIN LATERAL (SELECT {walked} AS walked) n
    CROSS JOIN LATERAL (
        SELECT c.checkpoint_id, c.parent_checkpoint_id, c.checkpoint FROM {checkpoints} c
        WHERE c.thread_id = %(t)s AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = w.parent
        LIMIT 1
    ) c
    WHERE n.walked <> 0
),
k AS ({keys})
SELECT 0, w.checkpoint_id, w.parent, NULL::text, NULL::text, w.walked, c.absent,
       CASE WHEN {_INLINE} IN ({", ".join(f"w.s{i}" for i in range(n))})
            THEN c.checkpoint -> 'channel_values' END,
       CASE WHEN w.walked <> 0 THEN coalesce((
           SELECT wc.n FROM {counts} wc WHERE wc.thread_id = %(t)s
           AND wc.checkpoint_ns = %(ns)s AND wc.checkpoint_id = w.checkpoint_id), 0) END,
       CASE WHEN w.walked <> 0 THEN (
           SELECT count(*) FROM {writes} cw WHERE cw.thread_id = %(t)s
           AND cw.checkpoint_ns = %(ns)s AND cw.checkpoint_id = w.checkpoint_id) END,
       NULL::text, NULL::smallint, NULL::bytea, {", ".join(f"w.{col}" for col in cols)}
FROM walk w
CROSS JOIN LATERAL (
    SELECT c.absent, c.checkpoint FROM {checkpoints} c
    WHERE c.thread_id = %(t)s AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = w.checkpoint_id
    LIMIT 1
) c
UNION ALL
SELECT 1, b.channel, b.version, b.base, NULL, NULL, NULL, NULL, NULL, NULL,
       b.type, b.encoding, b.blob{pad}
FROM k CROSS JOIN LATERAL (
    SELECT b.channel, b.version, b.base, b.type, b.encoding, b.blob FROM {blobs} b
    WHERE b.thread_id = %(t)s AND b.checkpoint_ns = %(ns)s AND b.channel = k.ch
      AND b.version = k.v
    LIMIT 1
) b
UNION ALL
SELECT 1, s.channel, s.version, s.base, NULL, NULL, NULL, NULL, NULL, NULL,
       s.type, s.encoding, s.blob{pad}
FROM k CROSS JOIN LATERAL (
    SELECT s.channel, s.version, s.base, s.type, s.encoding, s.blob
    FROM {blobs} b JOIN {blobs} s
    ON s.thread_id = b.thread_id AND s.checkpoint_ns = b.checkpoint_ns
       AND s.channel = b.channel AND s.version = b.base
    WHERE b.thread_id = %(t)s AND b.checkpoint_ns = %(ns)s AND b.channel = k.ch
      AND b.version = k.v
    LIMIT 1
) s
UNION ALL
SELECT 2, cw.checkpoint_id, cw.task_id, cw.task_path, cw.channel, cw.idx, NULL, NULL, NULL,
       NULL, cw.type, cw.encoding, cw.blob{pad}
FROM walk w CROSS JOIN LATERAL (
    SELECT cw.checkpoint_id, cw.task_id, cw.task_path, cw.channel, cw.idx, cw.type,
           cw.encoding, cw.blob
    FROM {writes} cw
    WHERE cw.thread_id = %(t)s AND cw.checkpoint_ns = %(ns)s
      AND cw.checkpoint_id = w.checkpoint_id AND cw.channel IN ({names})
    OFFSET 0
) cw
WHERE w.walked <> 0
"""


def params(address: Address, channels: Sequence[str]) -> dict[str, Any]:
    """The walk's parameters."""
    out: dict[str, Any] = {
        "t": address.thread_id,
        "ns": address.checkpoint_ns,
        "cid": address.checkpoint_id,
        "all": (1 << len(channels)) - 1,
    }
    for i, channel in enumerate(channels):
        out[f"c{i}"] = channel
    return out


class Walked:
    """The statement's rows as the walk's records (:func:`~tether.backends._walk.walk_delta`).

    ``target``: the target checkpoint's id and parent (``None``: no such
    checkpoint); ``ancestors`` by id; ``stored`` the value rows by
    ``(channel, version)`` (the seeds' whole, a row stored empty as its type
    only); ``blobs`` the seeds' rows with the snapshots they extend.
    """

    def __init__(
        self, rows: Iterable[Sequence[Any]], address: Address, channels: Sequence[str]
    ) -> None:
        self.target: tuple[str, str | None] | None = None
        self.ancestors: dict[str, Ancestor] = {}
        self.stored: dict[tuple[str, str], StoredValue] = {}
        self.blobs: dict[BlobKey, StoredValue] = {}
        tid, ns = address.thread_id, address.checkpoint_ns
        heads: list[Sequence[Any]] = []
        writes: dict[str, list[WriteRecord]] = {}
        n = len(channels)
        for r in rows:
            kind = r[0]
            if kind == 0:
                if not r[5]:
                    self.target = (r[1], r[2])
                else:
                    heads.append(r)
            elif kind == 1:
                value: StoredValue = (r[10], r[11], r[12], r[3])
                self.blobs[(tid, ns, r[1], r[2])] = value
                self.stored[(r[1], r[2])] = value
            else:
                record = WriteRecord(r[2], r[3], r[5], r[4], r[10], r[11], r[12])
                writes.setdefault(r[1], []).append(record)
        for r in heads:
            cid = r[1]
            mine = writes.get(cid, [])
            check_write_count(address.with_id(cid), r[8], r[9], "the Postgres store")
            mine.sort(key=lambda w: w.order)
            versions: dict[str, str] = {}
            for i, channel in enumerate(channels):
                state, version = r[13 + i], r[13 + n + i]
                if state == _NONE:
                    continue
                versions[channel] = version  # an inline one too: a sealed value is bound to it
                if state == _EMPTY:
                    self.stored.setdefault((channel, version), _EMPTY_ROW)
            # absent: NULL when the put found every value; {NULL} on rows put
            # before it was recorded (then a channel without a value is absent).
            absent = r[6]
            unstored = () if absent is None else None if None in absent else absent
            inline = r[7] or {}
            self.ancestors[cid] = Ancestor(cid, r[2], versions, inline, unstored, mine)

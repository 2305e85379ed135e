"""The SQLite saver's thread index (#15): ``tether_threads``, kept in its write transactions.

The rules are :mod:`tether.backends._threads`'; this module moves them into
rows. Every function takes the connection of a transaction the saver opened
(``BEGIN IMMEDIATE`` for writes), so the index commits or rolls back with
the checkpoint rows it describes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from tether.backends._sqlbase import metadata_from_json
from tether.backends._threads import (
    BUCKET_BITS,
    ThreadQuery,
    cursor_after,
    runnable_of,
    summary,
    user_metadata,
)
from tether.backends.sqlite._sql import (
    INDEX_CREATE,
    INDEX_DROP_EMPTY,
    INDEX_LATEST,
    INDEX_RECOUNT,
    INDEX_RESTATE,
    INDEX_SET_LATEST,
)
from tether.checkpoint import Address, CheckpointTuple
from tether.contract import dumps_json, loads_json, metadata_matches
from tether.errors import DecodeError
from tether.threads import ThreadPage, ThreadSummary

__all__ = ["ReadLatest", "create", "query", "reindex"]

#: Reads a thread's root checkpoint ``(thread, id)`` inside the caller's
#: transaction: its decoded tuple (``None``: a value the serializer refuses),
#: and its metadata as stored.
ReadLatest = Callable[[sqlite3.Connection, str, str], tuple[CheckpointTuple | None, dict[str, Any]]]


def create(conn: sqlite3.Connection, tid: str, now: int) -> None:
    """An empty index row for ``tid`` if it has none (a copy writes into it)."""
    conn.execute(INDEX_CREATE, (tid, now))


def reindex(conn: sqlite3.Connection, tid: str, read: ReadLatest) -> None:
    """Recount ``tid``'s row from its rows, after a prune, copy or delete_for_runs.

    When the newest root checkpoint is not the one the row names, it is read
    back and decoded (whether its next nodes would run takes its values).
    """
    conn.execute(INDEX_DROP_EMPTY, (tid,))
    row = conn.execute(INDEX_LATEST, (tid,)).fetchone()
    if row is None:
        return
    conn.execute(INDEX_RECOUNT, (tid,))
    latest_id, _status, newest = row
    if newest == latest_id:
        conn.execute(INDEX_RESTATE, (tid,))
    else:
        set_latest(conn, tid, newest, read)


def set_latest(conn: sqlite3.Connection, tid: str, cid: str | None, read: ReadLatest) -> None:
    """Point ``tid``'s row at root checkpoint ``cid`` (``None``: it has none) and restate it."""
    if cid is None:
        conn.execute(INDEX_SET_LATEST, (tid, None, None, None, "{}", False, False))
        return
    tup, meta = read(conn, tid, cid)
    ts = tup.checkpoint.get("ts") if tup is not None else None
    conn.execute(
        INDEX_SET_LATEST,
        (
            tid,
            cid,
            dumps_json(meta.get("step")),
            ts if isinstance(ts, str) else None,
            dumps_json(user_metadata(meta)),
            tup is not None and runnable_of(tup),
            tup is not None,
        ),
    )


def lenient(read: Callable[[], CheckpointTuple]) -> CheckpointTuple | None:
    """``read()``, or ``None`` when a value in it is refused by the serializer."""
    try:
        return read()
    except DecodeError:
        return None


# --- asking ------------------------------------------------------------------------------------

_COLUMNS = (
    "thread_id, status, created_at, updated_at, checkpoints, namespaces, bytes, latest_id, "
    "latest_step, latest_ts, metadata"
)


def _where(q: ThreadQuery, after: tuple[Any, ...] | None) -> tuple[str, list[Any]]:
    from tether.backends.sqlite._saver import _filter_clause as filter_clause

    parts: list[str] = []
    args: list[Any] = []
    if q.statuses is not None:
        parts.append(f"c.status IN ({', '.join('?' * len(q.statuses))})")
        args.extend(q.statuses)
    # Each bound on updated_at is also one on bucket, which the indexes hold.
    if q.updated_before is not None:
        parts.append(f"c.updated_at < ? AND c.bucket <= ? >> {BUCKET_BITS}")
        args.extend((q.updated_before, q.updated_before))
    if q.updated_after is not None:
        parts.append(f"c.updated_at > ? AND c.bucket >= ? >> {BUCKET_BITS}")
        args.extend((q.updated_after, q.updated_after))
    for key, want in q.metadata.items():
        clause, more = filter_clause(key, want)
        parts.append(clause)
        args.extend(more)
    if after is not None:
        if len(after) == 1:
            parts.append("c.thread_id > ?")
        elif q.descending:
            parts.append(f"c.bucket <= ? >> {BUCKET_BITS} AND (c.updated_at, c.thread_id) < (?, ?)")
            args.append(after[0])
        else:
            parts.append(f"c.bucket >= ? >> {BUCKET_BITS} AND (c.updated_at, c.thread_id) > (?, ?)")
            args.append(after[0])
        args.extend(after)
    return ("WHERE " + " AND ".join(parts)) if parts else "", args


def query(conn: sqlite3.Connection, q: ThreadQuery) -> ThreadPage:
    """One page of ``threads()``: keyset paging on the index's (updated_at, thread_id).

    The metadata filter narrows rows in SQL and :func:`metadata_matches`
    decides (as ``list(filter=...)``), so a page reads on until it has its
    rows or the index ends.
    """
    if q.order == "thread_id":
        order = "c.thread_id"
    elif q.descending:  # bucket first: the index's order (see _threads.BUCKET_BITS)
        order = "c.bucket DESC, c.updated_at DESC, c.thread_id DESC"
    else:
        order = "c.bucket, c.updated_at, c.thread_id"
    found: list[ThreadSummary] = []
    after: tuple[Any, ...] | None = q.after
    want = q.limit + 1  # one more tells whether a next page exists
    while len(found) < want:
        clause, args = _where(q, after)
        sql = f"SELECT {_COLUMNS} FROM tether_threads AS c {clause} ORDER BY {order} LIMIT ?"  # noqa: S608
        rows = conn.execute(sql, [*args, want]).fetchall()
        for r in rows:
            meta = metadata_from_json(r[10], address=Address(str(r[0]), "", r[7]))
            if q.metadata and not metadata_matches(meta, q.metadata):
                continue
            step = loads_json(r[8]) if r[8] is not None else None
            found.append(summary(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], step, r[9], meta))
        if len(rows) < want or not q.metadata:
            break
        last = rows[-1]
        after = (last[0],) if q.order == "thread_id" else (last[3], last[0])
    page = found[: q.limit]
    return ThreadPage(page, cursor_after(q, page, len(found) > q.limit))

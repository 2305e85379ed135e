"""The SQLite saver's side of a sweep (#15): retention rows and space given back.

Every function takes the connection of a transaction the saver opened
(``BEGIN IMMEDIATE`` to write), so a thread a sweep deletes goes with every
row in one commit, and the check that it is still due (``updated_at`` before
the cutoff, read under the write lock) sees every write committed before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tether.backends._threads import BUCKET_BITS

__all__ = [
    "DUE",
    "RETENTION_GET",
    "RETENTION_ROWS",
    "RETENTION_SET",
    "free_pages",
    "incremental_vacuum",
]

#: A thread's counts if it was last active before ?2: (checkpoints, bytes).
DUE = "SELECT checkpoints, bytes FROM tether_threads WHERE thread_id = ?1 AND updated_at < ?2"
#: A thread's counts now.
COUNTS = "SELECT checkpoints, bytes FROM tether_threads WHERE thread_id = ?1"
#: A read counts as activity (refresh_on_read): ?1 thread, ?2 now.
TOUCH = f"""UPDATE tether_threads SET updated_at = ?2, bucket = ?2 >> {BUCKET_BITS}
WHERE thread_id = ?1 AND updated_at < ?2"""  # noqa: S608 -- a constant formatted in
RETENTION_ROWS = "SELECT thread_id, retention FROM tether_threads WHERE retention IS NOT NULL"
RETENTION_GET = "SELECT retention FROM tether_threads WHERE thread_id = ?1"
RETENTION_SET = "UPDATE tether_threads SET retention = ?2 WHERE thread_id = ?1"

#: Pages an incremental vacuum gives back per transaction: the write lock is
#: held for one step only, so writers wait for a step, not for the whole file.
VACUUM_STEP = 2_048


def due(conn: sqlite3.Connection, items: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """``(thread, checkpoints, bytes)`` of each ``(thread, cutoff)`` last active before it."""
    out: list[tuple[str, int, int]] = []
    for tid, cutoff in items:
        row = conn.execute(DUE, (tid, cutoff)).fetchone()
        if row is not None:
            out.append((tid, int(row[0]), int(row[1])))
    return out


def counts(conn: sqlite3.Connection, tid: str) -> tuple[int, int]:
    """A thread's checkpoints and bytes as its index row holds them (0, 0 when gone)."""
    row = conn.execute(COUNTS, (tid,)).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def free_pages(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """``(auto_vacuum mode, free pages, page size)`` of the database."""
    mode = int(conn.execute("PRAGMA auto_vacuum").fetchone()[0])
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    return mode, free, size


def incremental_vacuum(conn: sqlite3.Connection) -> int:
    """One step of ``PRAGMA incremental_vacuum``; the pages it gave back."""
    before = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    conn.execute(f"PRAGMA incremental_vacuum({VACUUM_STEP})").fetchall()
    after = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    return before - after

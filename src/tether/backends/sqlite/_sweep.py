"""The SQLite saver's side of a sweep (#15): retention rows and space given back.

:class:`SweepMixin` holds the saver's lifecycle methods (a thread's own
policy, the sweep's primitives, ``vacuum``); the functions below it take the
connection of a transaction the saver opened
(``BEGIN IMMEDIATE`` to write), so a thread a sweep deletes goes with every
row in one commit, and the check that it is still due (``updated_at`` before
the cutoff, read under the write lock) sees every write committed before.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.backends._threads import BUCKET_BITS
from tether.backends.sqlite._conn import translate_errors
from tether.backends.sqlite._sql import unneeded_blobs, unneeded_writes
from tether.contract import check_thread_id
from tether.lifecycle import Retention, check_retention, no_thread, stored_policy

if TYPE_CHECKING:
    from tether.backends.sqlite._conn import ConnectionManager

__all__ = [
    "DUE",
    "RETENTION_GET",
    "RETENTION_ROWS",
    "RETENTION_SET",
    "SweepMixin",
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

#: What ``prune(keep_last=?2)`` of thread ?1 would leave, read rather than run: the
#: rows PRUNE keeps, less the blobs and writes COLLECT_BLOBS and COLLECT_WRITES would
#: delete (their very predicates, ``unneeded_blobs`` and ``unneeded_writes``), counted
#: as INDEX_RECOUNT counts them: ``(checkpoints, bytes)``. A dry run's sweep reports the
#: index row's counts less these, as the sweep reports its row's counts before less after.
PRUNE_LEFT = f"""
WITH kept AS MATERIALIZED (
    SELECT checkpoint_ns, checkpoint_id, channel_versions, size FROM (
        SELECT checkpoint_ns, checkpoint_id, channel_versions,
               length(checkpoint) + length(metadata) AS size,
               row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn
        FROM tether_checkpoints WHERE thread_id = ?1)
    WHERE rn <= ?2
)
SELECT (SELECT count(*) FROM kept),
    coalesce((SELECT sum(size) FROM kept), 0)
    + coalesce((SELECT sum(length(value)) FROM tether_blobs WHERE thread_id = ?1), 0)
    - coalesce((SELECT sum(length(value)) FROM tether_blobs WHERE thread_id = ?1
                AND {unneeded_blobs("kept")}), 0)
    + coalesce((SELECT sum(length(value)) FROM tether_writes WHERE thread_id = ?1), 0)
    - coalesce((SELECT sum(length(value)) FROM tether_writes WHERE thread_id = ?1
                AND {unneeded_writes("kept")}), 0)
"""  # noqa: S608 -- fixed fragments

#: Pages an incremental vacuum gives back per transaction: the write lock is
#: held for one step only, so writers wait for a step, not for the whole file.
VACUUM_STEP = 512

#: Seconds a sweep's TTL batch should take (``Pace``), timed around the call:
#: the wait for the write lock, the transaction and the WAL copy after it.
#: Writers of the file wait for the transaction, one at a time.
SWEEP_TARGET = 0.005


def due_rows(
    conn: sqlite3.Connection, items: Sequence[tuple[str, int]]
) -> list[tuple[str, int, int]]:
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
    """One step of incremental vacuum (up to :data:`VACUUM_STEP` pages); the pages
    it gave back.

    ``PRAGMA incremental_vacuum(N)`` frees one page per step of the statement,
    and Python's sqlite3 steps a statement that returns no columns once: run
    as one statement it freed a single page, whatever N. So: N statements.
    """
    before = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    for _ in range(min(before, VACUUM_STEP)):
        conn.execute("PRAGMA incremental_vacuum(1)")
    after = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    return before - after


class SweepMixin:
    """:class:`~tether.backends.sqlite.SqliteSaver`'s lifecycle methods (#15), each one
    transaction of the saver's (``BEGIN IMMEDIATE`` to write)."""

    if TYPE_CHECKING:
        _conns: ConnectionManager
        read_only: bool

        def _write(
            self,
            fn: Any,
            *args: Any,
            threads: Sequence[str] | None = None,
            autocheckpoint: bool = True,
        ) -> Any: ...
        def _read(self, fn: Any, *args: Any) -> Any: ...
        def _check_writable(self, what: str) -> None: ...
        def _forget(self, thread_ids: Sequence[str] | None) -> None: ...
        @staticmethod
        def _delete_threads(conn: sqlite3.Connection, thread_ids: list[str]) -> None: ...
        def _prune(self, conn: sqlite3.Connection, tids: list[str], keep: int) -> None: ...

    _sweep_target: float | None = SWEEP_TARGET

    def set_retention(self, thread_id: str, policy: Retention | None) -> None:
        tid = check_thread_id(thread_id, bounded=False)
        found = check_retention(policy, "policy")
        text = None if found is None else found.to_json()

        def run(conn: sqlite3.Connection) -> int:
            return conn.execute(RETENTION_SET, (tid, text)).rowcount

        if not self._write(run):
            raise no_thread(tid)

    def get_retention(self, thread_id: str) -> Retention | None:
        tid = check_thread_id(thread_id, bounded=False)

        def run(conn: sqlite3.Connection) -> Any:
            return conn.execute(RETENTION_GET, (tid,)).fetchone()

        row = self._read(run)
        return None if row is None or row[0] is None else stored_policy(tid, row[0])

    def _touch(self, thread_id: str, now: int) -> None:
        if not self.read_only:
            self._write(lambda conn: conn.execute(TOUCH, (thread_id, now)))

    def _retention_rows(self) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = self._read(
            lambda conn: conn.execute(RETENTION_ROWS).fetchall()
        )
        return [(str(t), text) for t, text in rows]

    def _sweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> list[tuple[str, int, int]]:
        if dry_run:
            found: list[tuple[str, int, int]] = self._read(due_rows, due)
            return found

        def run(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
            gone = due_rows(conn, due)
            if gone:
                self._delete_threads(conn, [tid for tid, _, _ in gone])
            return gone

        out: list[tuple[str, int, int]] = self._write(run, autocheckpoint=False)
        self._forget([tid for tid, _, _ in out])
        return out

    def _sweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        if dry_run:

            def dry(conn: sqlite3.Connection) -> tuple[int, int] | None:
                found = due_rows(conn, [(thread_id, active_before)])
                if not found:
                    return None
                count, size = conn.execute(PRUNE_LEFT, (thread_id, keep)).fetchone()
                return found[0][1] - int(count), max(0, found[0][2] - int(size))

            left: tuple[int, int] | None = self._read(dry)
            return left

        def run(conn: sqlite3.Connection) -> tuple[int, int] | None:
            found = due_rows(conn, [(thread_id, active_before)])
            if not found:
                return None
            self._prune(conn, [thread_id], keep)
            count, size = counts(conn, thread_id)
            return found[0][1] - count, max(0, found[0][2] - size)

        out: tuple[int, int] | None = self._write(run, threads=[thread_id], autocheckpoint=False)
        self._forget([thread_id])
        return out

    def _sweep_vacuum(self) -> int:
        mode, free, size = self._read(lambda conn: free_pages(conn))
        if mode != 2 or not free:  # 2: INCREMENTAL; older files: see vacuum()
            return 0
        pages = 0
        # The free pages counted now, no more: writers free pages too (a put
        # that rebalances a b-tree), and a loop until none is left would go on
        # as long as they write. A step that finds fewer than it asks for has
        # emptied the list.
        while pages < free:
            step = self._write(incremental_vacuum, autocheckpoint=False)
            pages += step
            if step < VACUUM_STEP:
                break
        self._checkpoint_wal()
        return int(pages * size)

    def _checkpoint_wal(self) -> None:
        """Copy the WAL into the file now, so that the file shrinks now (not at the next
        automatic checkpoint); PASSIVE: it never waits for readers."""
        if self._conns.is_file:
            with self._conns.connection() as conn, translate_errors(self._conns.where):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def vacuum(self) -> int:
        """Give the database's free pages back to the file system; the bytes freed.

        A file created with incremental auto-vacuum (every file this tether
        creates) gives them back in steps of a few thousand pages, one
        transaction each. An older file is converted once: ``VACUUM`` rewrites
        the whole file (writers of every process wait for it, and it needs
        free disk space about the file's size), and later sweeps shrink it as
        they go.
        """
        self._check_writable("vacuum")
        mode, _, size = self._read(lambda conn: free_pages(conn))
        if mode == 2:
            return self._sweep_vacuum()
        where = self._conns.where
        with self._conns.connection() as conn, self._conns.write_lock, translate_errors(where):
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("VACUUM")
            after = int(conn.execute("PRAGMA page_count").fetchone()[0])
        self._checkpoint_wal()
        return int(max(0, pages - after) * size)

    async def avacuum(self) -> int:
        """Async :meth:`vacuum`."""
        return await asyncio.to_thread(self.vacuum)

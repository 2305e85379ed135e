"""SQLite and sweep (#15): space given back to the file system, and SIGKILL mid-sweep."""

from __future__ import annotations

import sqlite3
import struct
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tether import SqliteSaver
from tether.lifecycle import Retention

from ..sweep_crash import check_whole_or_gone, kill_mid_sweep, populate

LATER = datetime.now(UTC) + timedelta(days=1)


def _auto_vacuum(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0])


def test_a_new_file_uses_incremental_auto_vacuum_and_shrinks_after_a_sweep(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    with SqliteSaver(path, retention=Retention(ttl=60)) as saver:
        populate(saver)
        saver._checkpoint_wal()
        full = path.stat().st_size
        report = saver.sweep(now=LATER)
        assert report.threads == 120
        assert report.freed_bytes > full // 2
    assert _auto_vacuum(path) == 2  # INCREMENTAL
    assert path.stat().st_size < full // 4


def test_a_vacuum_step_gives_back_up_to_512_pages_in_one_transaction(tmp_path: Path) -> None:
    """Not one page a transaction (``PRAGMA incremental_vacuum(N)`` run once by Python's
    sqlite3 frees one page), nor every free page at once (writers would wait)."""
    from tether.backends.sqlite._sweep import VACUUM_STEP, free_pages, incremental_vacuum

    path = tmp_path / "chat.db"
    with SqliteSaver(path, retention=Retention(ttl=60)) as saver:
        populate(saver)
        saver.delete_thread("t0000")
        for t in range(1, 120):
            saver.delete_thread(f"t{t:04d}")
        _, free, _ = saver._read(free_pages)
        assert free > VACUUM_STEP + 1
        assert saver._write(incremental_vacuum) == VACUUM_STEP
        assert saver._read(free_pages)[1] == free - VACUUM_STEP
        assert saver._write(incremental_vacuum) == free - VACUUM_STEP
        assert saver._write(incremental_vacuum) == 0


def test_a_sweep_copies_the_wal_outside_its_transactions_and_restores_autocheckpoint(
    tmp_path: Path,
) -> None:
    """A sweep's transactions commit with ``wal_autocheckpoint = 0`` (the copy would hold
    the write lock) and checkpoint after it: the WAL is copied when the sweep is done,
    and the connection's setting is back for the writers that reuse it."""
    path = tmp_path / "chat.db"
    with SqliteSaver(path, retention=Retention(ttl=60)) as saver:
        populate(saver)
        saver._checkpoint_wal()
        report = saver.sweep(now=LATER, vacuum=False)
        assert report.threads == 120
        assert report.batches > 1
        # The WAL index (the -shm file, mapped by every connection): mxFrame, the
        # frames in the WAL, at byte 16 of its header; nBackfill, those copied into
        # the file, at byte 96. Left to the automatic checkpoint, the frames of the
        # commits since the last one would not be copied yet.
        shm = Path(f"{path}-shm").read_bytes()
        (frames,) = struct.unpack_from("=I", shm, 16)
        (copied,) = struct.unpack_from("=I", shm, 96)
        assert frames > 0
        assert copied == frames
        with saver._conns.connection() as conn:
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000


def test_an_older_file_is_converted_once_by_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteSaver(path):
        pass
    with sqlite3.connect(path, isolation_level=None) as conn:  # as tether before #15 made it
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
    assert _auto_vacuum(path) == 0
    with SqliteSaver(path, retention=Retention(ttl=60)) as saver:
        populate(saver)
        saver._checkpoint_wal()
        full = path.stat().st_size
        report = saver.sweep(now=LATER)
        assert (report.threads, report.freed_bytes) == (120, 0)  # pages kept for reuse
        assert path.stat().st_size == full
        assert saver.vacuum() > full // 2
        assert path.stat().st_size < full // 4
        assert _auto_vacuum(path) == 2
        populate(saver)
        assert saver.sweep(now=LATER).freed_bytes > full // 2


def _rows(path: Path) -> dict[str, dict[str, int]]:
    with sqlite3.connect(path) as conn:
        return {
            table: Counter(
                dict(conn.execute(f"SELECT thread_id, count(*) FROM {table} GROUP BY thread_id"))
            )
            for table in ("tether_checkpoints", "tether_blobs", "tether_writes")
        }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ttl", "prune"])
@pytest.mark.parametrize("seed", range(3))
def test_sigkill_in_the_middle_of_a_sweep_leaves_every_thread_whole_or_gone(
    tmp_path: Path, mode: str, seed: int
) -> None:
    path = tmp_path / "crash.db"
    with SqliteSaver(path) as saver:
        before = populate(saver)
    lines = kill_mid_sweep(str(path), mode, seed)
    assert "done" not in lines
    with SqliteSaver(path) as saver:
        whole, pruned = check_whole_or_gone(saver, before, _rows(path))
        assert whole < len(before)  # the child got somewhere
        saver.retention = Retention(ttl=1) if mode == "ttl" else Retention(keep_last=1)
        saver.sweep(now=LATER)  # the next sweep finishes the job
        whole, pruned = check_whole_or_gone(saver, before, _rows(path))
        assert whole == 0
        assert pruned == (len(before) if mode == "prune" else 0)

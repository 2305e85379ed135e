"""Real processes on one file: contention without "database is locked", SIGKILL safety."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether import SqliteSaver

from .child import value_for
from .helpers import thread

CHILD = str(Path(__file__).parent / "child.py")
pytestmark = pytest.mark.slow


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_four_processes_of_four_threads_and_readers(db_path: Path) -> None:
    SqliteSaver(db_path).close()  # schema first, so the children only open it
    steps = 25
    writers = [_spawn("writer", str(db_path), f"p{p}", "4", str(steps)) for p in range(4)]
    readers = [_spawn("reader", str(db_path), "15") for _ in range(2)]
    for proc in writers + readers:
        _out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        assert "locked" not in err
    with SqliteSaver(db_path) as saver:
        for p in range(4):
            for k in range(4):
                tid = f"p{p}-{k}"
                history = list(saver.list(thread(tid)))
                assert len(history) == steps, tid
                latest = history[0]
                assert latest.checkpoint["channel_values"] == value_for(tid, steps - 1)
                assert latest.pending_writes == [("task-24", "count", steps - 1)]
                assert [t.metadata["step"] for t in history] == list(range(steps))[::-1]


def test_sigkill_never_loses_a_returned_put_nor_shows_a_partial_one(db_path: Path) -> None:
    rng = random.Random(7)
    SqliteSaver(db_path).close()
    confirmed: dict[str, int] = {}
    writes_done: set[str] = set()
    for _round in range(20):
        proc = _spawn("crasher", str(db_path))
        assert proc.stdout is not None
        # wait until it is writing, then kill it at a random moment
        first = proc.stdout.readline()
        assert first.startswith("put"), proc.stderr.read() if proc.stderr else ""
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        # the file object, not communicate(): it would skip what readline() buffered
        with proc.stdout:
            rest = proc.stdout.read()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
        for line in [first, *rest.splitlines()]:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "put":
                confirmed[parts[1]] = int(parts[2])
            elif len(parts) == 2 and parts[0] == "writes":
                writes_done.add(parts[1])
        assert proc.returncode == -signal.SIGKILL
        with SqliteSaver(db_path) as saver:
            for cid, i in confirmed.items():
                at = {"configurable": {"thread_id": "crash", "checkpoint_id": cid}}
                tup = saver.get_tuple(at)
                assert tup is not None, f"checkpoint {cid} (step {i}) was lost"
                assert tup.checkpoint["channel_values"] == value_for("crash", i % 50)
                if cid in writes_done:
                    assert [w[1] for w in tup.pending_writes] == ["count", "messages"]
            for tup in saver.list(thread("crash")):
                # no checkpoint is visible without every blob it names
                assert set(tup.checkpoint["channel_values"]) == {"messages", "count"}
                assert len(tup.pending_writes) in (0, 2)
    assert len(confirmed) > 40

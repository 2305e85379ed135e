"""Resume after SIGKILL (S6.1): a real child process on a real SQLite file.

The child runs a superstep of three parallel nodes; two finish, the third
hangs, and the test kills the child with SIGKILL once the two finished tasks'
writes are in the database. A new process resumes the thread: only the third
node runs again (counted through a side-effect file), the other two nodes'
writes are replayed from storage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import tether

WORKER = Path(__file__).with_name("crash_worker.py")
CONFIG = {"configurable": {"thread_id": "crash"}}


def effects(path: Path) -> Counter[str]:
    if not path.exists():
        return Counter()
    return Counter(path.read_text().split())


def stored_task_values(db: Path) -> list[object]:
    with tether.SqliteSaver(db) as saver:
        tup = saver.get_tuple(CONFIG)
    if tup is None:
        return []
    return [v for _, ch, v in tup.pending_writes or [] if ch == "items"]


def run_worker(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("durability", "runner"), [("sync", "sync"), ("async", "sync"), ("sync", "async")]
)
def test_sigkill_mid_superstep_resumes_only_the_unfinished_task(
    tmp_path: Path, durability: str, runner: str
) -> None:
    db, side = tmp_path / "run.db", tmp_path / "effects.txt"
    child = run_worker(str(db), str(side), durability, "start", "block", runner)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = effects(side)
            if done["c-start"] and sorted(map(str, stored_task_values(db))) == [
                "['a']",
                "['b']",
            ]:
                break
            assert child.poll() is None, child.communicate()
            time.sleep(0.05)
        else:
            pytest.fail("the child never reached the middle of the superstep")
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)  # reaps the child and closes its pipes
    assert child.returncode == -signal.SIGKILL
    assert effects(side) == {"a-start": 1, "a-done": 1, "b-start": 1, "b-done": 1, "c-start": 1}

    resumed = run_worker(str(db), str(side), durability, "resume", runner)
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    assert json.loads(out) == {"items": ["a", "b", "c", "d"]}
    assert effects(side) == {
        "a-start": 1,
        "a-done": 1,
        "b-start": 1,
        "b-done": 1,
        "c-start": 2,
        "c-done": 1,
        "d-start": 1,
        "d-done": 1,
    }

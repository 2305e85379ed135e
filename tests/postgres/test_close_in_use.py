"""Closing a PostgresSaver while other threads and tasks use it (issue #18.2).

Each case runs close_child.py in a subprocess with a deadline, so a hang or a
crash fails the test rather than the suite: 8 threads (or 8 tasks, or 4 of
each) put, read, list and write pending writes while the saver is closed at a
random moment, over several rounds. Every call in flight must complete
correctly (values read back are checked) or raise tether's StorageError saying
the saver is closed -- never another exception, a hang or a crash; every call
made after close() returned must raise it; and a URL-built saver must leave no
connection open (close() from another thread used to leave a running loop's
pool closing in a task that died with its loop: "Task was destroyed but it is
pending", its connections open until garbage collection).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import fresh_schema

pytestmark = pytest.mark.postgres

CHILD = Path(__file__).resolve().parent / "close_child.py"
ROUNDS = 5
WORKERS = 8


@pytest.mark.parametrize(
    ("mode", "source"),
    [("sync", "url"), ("sync", "pool"), ("async", "url"), ("async", "pool"), ("mixed", "url")],
)
def test_close_while_in_use(pg_dsn: str, mode: str, source: str) -> None:
    try:
        proc = subprocess.run(
            [sys.executable, str(CHILD), mode, source, pg_dsn, fresh_schema(), str(ROUNDS)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung: {exc.stdout!r} {exc.stderr!r}")
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}{proc.stderr}"
    assert "Task was destroyed" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["bad"] == [], "\n".join(report["bad"])
    counts = report["counts"]
    assert set(counts) <= {"ok", "closed"}, counts
    assert counts.get("ok", 0) > 0, counts
    # every worker's call after close() returned, at least
    assert counts.get("closed", 0) >= WORKERS * ROUNDS, counts

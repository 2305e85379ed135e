"""Closing a saver while other threads use it (#18.2): never a crash, never a stray error.

Before, ``close()`` closed pooled connections another thread was executing
on, and the process died of a segmentation fault (a web server's shutdown,
a test's teardown). Each case runs in a subprocess (``close_child.py``) so a
crash fails the test instead of the test run: many rounds of eight workers
putting, listing and reading while the main thread closes the saver at a
varying moment. Every operation must either complete or raise
``StorageError`` saying the saver is closed, and every operation after
``close()`` must be refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = str(Path(__file__).parent / "close_child.py")
ROUNDS = 24  # the file and async cases crashed the old code in every run of this many

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["file", "async", "memory", "connection"])
def test_close_while_threads_use_the_saver(tmp_path: Path, mode: str) -> None:
    proc = subprocess.run(
        [sys.executable, CHILD, mode, str(tmp_path / "close.db"), str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    outcomes = json.loads(proc.stdout.splitlines()[-1])
    assert outcomes["after close: closed"] == ROUNDS
    # close() really happened while operations ran: some completed, some were refused
    assert outcomes.get("ok", 0) > 0
    assert outcomes.get("closed", 0) > 0
    assert not [k for k in outcomes if "other" in k]


@pytest.mark.parametrize("kind", ["query", "held"])
def test_close_interrupts_or_leaves_what_does_not_end(tmp_path: Path, kind: str) -> None:
    """A statement that runs on is interrupted; a connection held in Python is left open.

    Either way close() returns, and no connection is closed under an operation.
    """
    proc = subprocess.run(
        [sys.executable, CHILD, "stuck", str(tmp_path / "stuck.db"), kind],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert json.loads(proc.stdout.splitlines()[-1]) == {"ok": kind}

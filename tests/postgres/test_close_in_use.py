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


_CLOSE_IN_LOOP = """
import asyncio, sys, uuid
from tether import PostgresSaver, make_config
from tether.checkpoint import empty_checkpoint
from tether.ids import uuid6

dsn, rounds = sys.argv[1], int(sys.argv[2])

async def once():
    schema = "cil_" + uuid.uuid4().hex[:12]
    with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        saver.setup()
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        cp["channel_values"], cp["channel_versions"] = {"a": 1}, {"a": "1"}
        saver.put(make_config("t"), cp, {}, {"a": "1"})
        saver.get_tuple(make_config("t"))
        await saver.aget_tuple(make_config("t"))  # this loop's pool, opening
    # a sync close() inside the coroutine, which then returns at once

for _ in range(rounds):
    asyncio.run(once())
print("done")
"""


@pytest.mark.slow
def test_a_sync_close_inside_a_coroutine_never_hangs_asyncio_run(pg_dsn: str) -> None:
    """asyncio.run hung at shutdown within 60-300 runs under CPU load before the fix.

    The coroutine's sync close() can only schedule the pool's close; asyncio.run
    then cancels every task first, and psycopg_pool's worker, cancelled in the
    middle of a connection attempt, caught it and waited on its queue forever.
    Two CPU burners make that window likely; 200 rounds must finish.
    """
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CLOSE_IN_LOOP, pg_dsn, "200"],
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("asyncio.run hung after a sync close() inside its coroutine")
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "done"

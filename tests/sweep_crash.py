"""The SIGKILL-in-a-sweep test, over any store (#15): the SQLite and Postgres tests call it.

A store of threads, each with a few checkpoints, a large value per step,
pending writes and (some) a subgraph namespace, is swept by a child process
(tests/sweep_child.py) that is killed at a random moment after its first
committed batch. Then every thread is either whole (all its checkpoints,
values and writes read back as written, its index row counting them) or gone
(no row of it in any table), and a second sweep finishes the job.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import make_config
from tether.testing._driver import new_checkpoint

CHILD = str(Path(__file__).parent / "sweep_child.py")

THREADS = 120
STEPS = 3


def populate(saver: BaseCheckpointSaver) -> dict[str, list[Any]]:
    """Every thread's checkpoints as written (``list`` of it, newest first)."""
    for t in range(THREADS):
        tid = f"t{t:04}"
        for ns in ("", "sub:1") if t % 3 == 0 else ("",):
            cfg: Any = make_config(tid, ns)
            for i in range(STEPS):
                version = f"{i + 1:032}.0"
                big = f"{tid}-{i}-" + os.urandom(3000).hex()
                cp = new_checkpoint({"big": big, "n": i}, {"big": version, "n": version})
                cfg = saver.put(cfg, cp, {"step": i}, {"big": version, "n": version})
                saver.put_writes(cfg, [("out", i), ("n", i)], f"task-{i}")
    return {
        f"t{t:04}": list(saver.list({"configurable": {"thread_id": f"t{t:04}"}}))
        for t in range(THREADS)
    }


def kill_mid_sweep(store: str, mode: str, seed: int) -> list[str]:
    """Run the sweeping child and SIGKILL it after its first batch; its output lines."""
    rng = random.Random(seed)
    proc = subprocess.Popen(
        [sys.executable, CHILD, store, "3", mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("batch"), proc.stderr.read() if proc.stderr else ""
    time.sleep(rng.uniform(0.0, 0.02))
    os.kill(proc.pid, signal.SIGKILL)
    with proc.stdout:
        rest = proc.stdout.read()
    proc.wait(timeout=30)
    if proc.stderr is not None:
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return [first, *rest.splitlines()]


def check_whole_or_gone(
    saver: BaseCheckpointSaver, before: dict[str, list[Any]], rows: dict[str, dict[str, int]]
) -> tuple[int, int]:
    """Every thread whole or gone; ``rows``: table -> thread -> rows it holds there.

    Returns how many threads are (whole, pruned to one checkpoint per namespace).
    """
    index = {r.thread_id: r for r in saver.threads(limit=10_000)}
    whole = pruned = 0
    for tid, tuples in before.items():
        now = list(saver.list({"configurable": {"thread_id": tid}}))
        if not now:
            assert tid not in index, tid
            for table, by_thread in rows.items():
                assert by_thread.get(tid, 0) == 0, (table, tid)
            continue
        assert index[tid].checkpoints == len(now), tid
        namespaces = {t.config["configurable"]["checkpoint_ns"] for t in tuples}
        if len(now) == len(tuples):
            whole += 1
            kept = tuples
        else:  # keep_last=1: the newest of each namespace, nothing else
            assert len(now) == len(namespaces), tid
            pruned += 1
            kept = [t for t in tuples if any(t.config == n.config for n in now)]
        for want in kept:
            got = saver.get_tuple(want.config)
            assert got is not None, (tid, want.config)
            assert got.checkpoint == want.checkpoint
            assert got.pending_writes == want.pending_writes
    # No row belongs to a thread that is not in the index.
    for table, by_thread in rows.items():
        assert set(by_thread) <= set(index), table
    return whole, pruned

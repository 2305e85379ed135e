"""Child processes for the SQLite concurrency and crash tests (run as scripts)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

# Run as a script: the repository root, so that the tests package is importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sqlite.helpers import step, thread
from tether import SqliteSaver


def value_for(tid: str, i: int) -> dict[str, object]:
    # ~200 bytes a message: long histories cross the saver's delta threshold (4 KiB)
    return {"messages": [f"{tid}-{j}-" + "x" * 200 for j in range(i + 1)], "count": i}


def writer(path: str, tag: str, threads: int, steps: int) -> None:
    """``threads`` threads, each writing ``steps`` checkpoints (+ writes) of its own thread."""
    saver = SqliteSaver(path)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        tid = f"{tag}-{k}"
        cfg, prev = thread(tid), None
        try:
            for i in range(steps):
                cfg, prev = step(saver, cfg, prev, value_for(tid, i), {"source": "loop", "step": i})
                saver.put_writes(cfg, [("count", i)], f"task-{i}")
        except BaseException as exc:  # reported by the exit code
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    saver.close()
    if errors:
        print(repr(errors[0]), file=sys.stderr)
        sys.exit(1)


def reader(path: str, rounds: int) -> None:
    saver = SqliteSaver(path)
    for _ in range(rounds):
        for tup in saver.list(None, limit=200):
            assert "messages" in tup.checkpoint["channel_values"]
    saver.close()


def crasher(path: str) -> None:
    """Loop on put + put_writes forever, printing each id once its put has returned."""
    saver = SqliteSaver(path)
    tid = "crash"
    last = saver.get_tuple(thread(tid))
    cfg = last.config if last else thread(tid)
    prev = last.checkpoint if last else None
    i = last.metadata["step"] + 1 if last else 0
    while True:
        cfg, prev = step(saver, cfg, prev, value_for(tid, i % 50), {"source": "loop", "step": i})
        print(f"put {cfg['configurable']['checkpoint_id']} {i}", flush=True)
        saver.put_writes(cfg, [("count", i), ("messages", ["w"] * 20)], f"task-{i}")
        print(f"writes {cfg['configurable']['checkpoint_id']}", flush=True)
        i += 1


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    if kind == "writer":
        writer(args[0], args[1], int(args[2]), int(args[3]))
    elif kind == "reader":
        reader(args[0], int(args[1]))
    else:
        crasher(args[0])

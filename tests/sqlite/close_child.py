"""Child process of test_sqlite_close.py: close a saver while threads and tasks use it.

Usage: ``close_child.py MODE PATH ROUNDS`` with MODE ``file``, ``memory``,
``connection`` or ``async``; or ``close_child.py stuck PATH KIND`` (see
:func:`stuck`). Each round opens a saver, starts workers that
put, list and read as fast as they can, closes the saver from the main thread
(or the event loop) at a varying moment, and records how every operation
ended: ``ok``, or a ``StorageError`` saying the saver is closed. Anything
else is printed and the process exits 3; a crash of the process shows in its
exit status. The last line of output is a JSON count of the outcomes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tether import SqliteSaver
from tether.checkpoint import empty_checkpoint
from tether.errors import StorageError
from tether.ids import uuid6

WORKERS = 8
OPS = 150


def _op(saver: SqliteSaver, k: int, i: int) -> None:
    config = {"configurable": {"thread_id": f"t{k % 3}", "checkpoint_ns": ""}}
    if i % 3 == 0:
        ckpt = empty_checkpoint()
        ckpt["id"] = str(uuid6())
        version = saver.get_next_version(None)
        ckpt["channel_values"] = {"a": "x" * 3000, "n": i}
        ckpt["channel_versions"] = {"a": version, "n": version}
        saved = saver.put(config, ckpt, {"step": i}, dict(ckpt["channel_versions"]))
        saver.put_writes(saved, [("n", i)], f"task-{i}")
    elif i % 3 == 1:
        list(saver.list(None, limit=80))
    else:
        saver.get_tuple(config)


async def _aop(saver: SqliteSaver, k: int, i: int) -> None:
    config = {"configurable": {"thread_id": f"t{k % 3}", "checkpoint_ns": ""}}
    if i % 3 == 0:
        ckpt = empty_checkpoint()
        ckpt["id"] = str(uuid6())
        version = saver.get_next_version(None)
        ckpt["channel_values"] = {"a": "x" * 3000, "n": i}
        ckpt["channel_versions"] = {"a": version, "n": version}
        await saver.aput(config, ckpt, {"step": i}, dict(ckpt["channel_versions"]))
    elif i % 3 == 1:
        async for _ in saver.alist(None, limit=80):
            pass
    else:
        await saver.aget_tuple(config)


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    if isinstance(exc, StorageError) and "closed" in str(exc):
        return "closed"
    return f"other: {type(exc).__module__}.{type(exc).__name__}: {exc}"


def _open(mode: str, path: str) -> tuple[SqliteSaver, Callable[[], None]]:
    if mode == "memory":
        return SqliteSaver(":memory:"), lambda: None
    if mode == "connection":
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        return SqliteSaver(conn), conn.close
    return SqliteSaver(path), lambda: None


def sync_round(mode: str, path: str, delay: float, results: Counter[str]) -> None:
    saver, after = _open(mode, path)
    start = threading.Barrier(WORKERS + 1)
    lock = threading.Lock()

    def work(k: int) -> None:
        start.wait()
        for i in range(OPS):
            exc: BaseException | None = None
            try:
                _op(saver, k, i)
            except BaseException as caught:  # every outcome is recorded
                exc = caught
            with lock:
                results[_outcome(exc)] += 1
            if exc is not None:
                return  # closed: the next ones would be refused too (checked below)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(WORKERS)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(delay)
    saver.close()
    for t in threads:
        t.join()
    # After close, every operation is refused.
    exc: BaseException | None = None
    try:
        _op(saver, 0, 0)
    except BaseException as caught:
        exc = caught
    results["after close: " + _outcome(exc)] += 1
    after()


async def async_round(path: str, delay: float, results: Counter[str]) -> None:
    saver = await asyncio.to_thread(SqliteSaver, path)

    async def work(k: int) -> None:
        for i in range(OPS):
            exc: BaseException | None = None
            try:
                await _aop(saver, k, i)
            except BaseException as caught:
                exc = caught
            results[_outcome(exc)] += 1
            if exc is not None:
                return

    # Sync threads on the same saver at the same time, as a mixed app has.
    stop = threading.Event()

    def sync_work() -> None:
        i = 0
        while not stop.is_set():
            exc: BaseException | None = None
            try:
                _op(saver, 9, i)
            except BaseException as caught:
                exc = caught
            results["sync " + _outcome(exc)] += 1
            if exc is not None:
                return
            i += 1

    side = threading.Thread(target=sync_work)
    side.start()
    tasks = [asyncio.create_task(work(k)) for k in range(WORKERS)]
    await asyncio.sleep(delay)
    await saver.aclose()
    await asyncio.gather(*tasks)
    stop.set()
    side.join()
    exc: BaseException | None = None
    try:
        await _aop(saver, 0, 1)
    except BaseException as caught:
        exc = caught
    results["after close: " + _outcome(exc)] += 1


def stuck(path: str, kind: str) -> int:
    """Operations that do not end by themselves: close() interrupts, or leaves, them.

    ``query``: a statement that would run forever; close() interrupts it after
    the grace period and the operation raises StorageError (closed).
    ``held``: an operation holding its connection while it waits in Python;
    close() returns without closing that connection, the operation goes on
    using it, and it is closed when the operation ends.
    Each for a pooled file connection and for the shared ``:memory:`` one.
    """
    from tether.backends.sqlite import _conn

    _conn.CLOSE_GRACE = 0.2  # the waits under test, shortened
    for target in (path, ":memory:"):
        problem = _stuck_once(SqliteSaver(target), kind)
        if problem:
            print(f"{target} {kind}: {problem}", file=sys.stderr)
            return 3
    print(json.dumps({"ok": kind}), flush=True)
    return 0


def _stuck_once(saver: SqliteSaver, kind: str) -> str | None:
    from tether.backends.sqlite._conn import translate_errors

    forever = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )
    started = threading.Event()
    release = threading.Event()
    seen: list[str] = []
    kept: list[sqlite3.Connection] = []

    def run() -> None:
        try:
            with saver._conns.connection() as conn:
                started.set()
                if kind == "query":
                    with translate_errors(saver._conns.where):
                        conn.execute(forever).fetchone()
                else:
                    release.wait()
                    # still open: close() did not free it under this operation
                    seen.append(str(conn.execute("SELECT 41 + 1").fetchone()[0]))
                    kept.append(conn)
        except BaseException as exc:
            seen.append(_outcome(exc))

    worker = threading.Thread(target=run)
    worker.start()
    started.wait()
    saver.close()  # returns: interrupted the query, or gave up waiting for `held`
    release.set()
    worker.join()
    expected = "closed" if kind == "query" else "42"
    if seen != [expected]:
        return f"outcome {seen}"
    if kind == "held":
        try:
            kept[0].execute("SELECT 1")
        except sqlite3.ProgrammingError:
            return None  # closed once the operation ended
        return "the held connection was never closed"
    return None


def main(mode: str, path: str, rounds: int) -> int:
    results: Counter[str] = Counter()
    SqliteSaver(path).close()  # the schema first
    for r in range(rounds):
        delay = 0.004 * (r % 12)
        if mode == "async":
            asyncio.run(async_round(path, delay, results))
        else:
            sync_round(mode, path, delay, results)
    print(json.dumps(dict(results)), flush=True)
    bad = [k for k in results if "other" in k or k.startswith("after close: ok")]
    return 3 if bad else 0


if __name__ == "__main__":
    args: Any = sys.argv[1:]
    if args[0] == "stuck":
        sys.exit(stuck(str(Path(args[1])), args[2]))
    sys.exit(main(args[0], str(Path(args[1])), int(args[2])))

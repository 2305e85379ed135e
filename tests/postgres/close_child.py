"""A child process for test_close_in_use.py: close a saver while 8 workers use it.

    python close_child.py MODE SOURCE DSN SCHEMA ROUNDS

MODE is ``sync`` (8 threads, ``close()`` from the main thread), ``async`` (8
tasks on one loop, ``aclose()`` from another task) or ``mixed`` (4 threads and
4 tasks on a loop in a fifth thread, ``close()`` from the main thread). SOURCE is ``url`` (the
saver owns its pools) or ``pool`` (a caller's psycopg pool, left open). Each
round opens a saver, lets the workers put, read, list and write pending writes
on their own threads (checking every value read back), closes it at a random
moment, and has every worker make one more call after the close returned.
Prints one JSON object: counts of outcomes, and every outcome that was
neither a correct result nor tether's StorageError saying the saver is closed.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

# Run as a script: the repository root, so that the tests package is importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tests.postgres.conftest import PlainSerializer
from tests.postgres.helpers import checkpoint
from tether import PostgresSaver, StorageError, make_config

WORKERS = 8


class Tally:
    """Outcomes of every call, by kind; the unexpected ones in full."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.bad: list[str] = []

    def add(self, kind: str, detail: str = "") -> None:
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if detail and len(self.bad) < 20:
                self.bad.append(detail)


def is_closed(exc: BaseException) -> bool:
    return type(exc) is StorageError and "is closed" in str(exc)


def classify(tally: Tally, exc: BaseException, op: str, after_close: bool) -> None:
    if is_closed(exc):
        tally.add("closed")
        return
    text = "".join(traceback.format_exception(exc))
    tally.add("other", f"{op} ({'after' if after_close else 'during'} close): {text}")


def step_values(n: int) -> tuple[dict[str, Any], dict[str, str]]:
    version = f"{n + 1:032}.0"
    return {"n": n, "blob": f"value {n} " * 50}, {"n": version, "blob": version}


def close_delay() -> float:
    """How long after the workers start a round closes the saver (0: at once)."""
    return random.choice((0.0, 0.01, random.uniform(0.05, 0.4)))


def some_call_done(round_no: int, tally: Tally) -> bool:
    """Round 0 closes only after some call succeeded, so each run has calls that
    complete as well as refused ones even on a loaded machine (where the other
    rounds' random delay can end before any worker's first call)."""
    return round_no != 0 or tally.counts.get("ok", 0) > 0


def wait_for_a_call(round_no: int, tally: Tally) -> None:
    deadline = time.monotonic() + 30
    while not some_call_done(round_no, tally) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(close_delay())


async def await_a_call(round_no: int, tally: Tally) -> None:
    deadline = time.monotonic() + 30
    while not some_call_done(round_no, tally) and time.monotonic() < deadline:  # noqa: ASYNC110 (a thread-shared tally)
        await asyncio.sleep(0.005)
    await asyncio.sleep(close_delay())


def app_name(schema: str, round_no: int) -> str:
    return f"close-{schema}-{round_no}"


def url_saver(dsn: str, schema: str, round_no: int) -> PostgresSaver:
    return PostgresSaver.from_conn_string(
        dsn,
        schema=schema,
        serde=PlainSerializer(),
        inline_primitives=True,
        pool_size=4,
        pool_timeout=10.0,
        connect_kwargs={"application_name": app_name(schema, round_no)},
    )


def check_no_connections_left(dsn: str, schema: str, round_no: int, tally: Tally) -> None:
    """A closed URL-built saver leaves no connection open (the server sees each go)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(100):
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (app_name(schema, round_no),),
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.1)
    tally.add("other", f"round {round_no}: {row} connections still open 10 s after close")


# --- sync --------------------------------------------------------------------------


def sync_worker(
    saver: PostgresSaver, thread_id: str, tally: Tally, closed: threading.Event, stop: float
) -> None:
    config = make_config(thread_id)
    n = 0
    while time.monotonic() < stop:
        after = closed.is_set()  # close() had returned before this call began
        op = ("put", "get", "list", "writes")[n % 4]
        try:
            if op == "put":
                values, versions = step_values(n)
                config = saver.put(config, checkpoint(values, versions), {"n": n}, versions)
            elif op == "get":
                got = saver.get_tuple(make_config(thread_id))
                if got is not None and got.checkpoint["channel_values"]["n"] != n - 1:
                    tally.add("other", f"get read n={got.checkpoint['channel_values']['n']}")
            elif op == "list":
                rows = list(saver.list(make_config(thread_id), limit=2))
                if rows and rows[0].checkpoint["channel_values"]["n"] != n - 2:
                    tally.add("other", "list read a wrong checkpoint")
            else:
                saver.put_writes(config, [("n", n), ("blob", "w")], f"task-{n}")
        except BaseException as exc:
            classify(tally, exc, op, after)
            if after:
                return  # refused after close: the one call that had to be
            if is_closed(exc):
                closed.wait(30)  # close() is under way: the next call must be refused too
            continue
        if after:
            tally.add("other", f"{op} succeeded on a saver closed before the call")
            return
        tally.add("ok")
        n += 1


def sync_round(source: str, dsn: str, schema: str, round_no: int, tally: Tally) -> None:
    pool: ConnectionPool[Any] | None = None
    if source == "url":
        saver = url_saver(dsn, schema, round_no)
    else:
        pool = ConnectionPool(dsn, min_size=2, max_size=4, kwargs={"autocommit": True}, open=True)
        saver = PostgresSaver(pool, schema=schema, serde=PlainSerializer(), inline_primitives=True)
    closed = threading.Event()
    stop = time.monotonic() + 20
    threads = [
        threading.Thread(target=sync_worker, args=(saver, f"r{round_no}-w{i}", tally, closed, stop))
        for i in range(WORKERS)
    ]
    for t in threads:
        t.start()
    wait_for_a_call(round_no, tally)
    saver.close()
    closed.set()
    for t in threads:
        t.join(60)
        if t.is_alive():
            tally.add("other", "a worker thread hung after close()")
    if pool is not None:  # a caller's pool stays usable
        with pool.connection() as conn:
            conn.execute("SELECT 1")
        pool.close()


# --- async -------------------------------------------------------------------------


async def async_worker(
    saver: PostgresSaver, thread_id: str, tally: Tally, closed: asyncio.Event, stop: float
) -> None:
    config = make_config(thread_id)
    n = 0
    while time.monotonic() < stop:
        after = closed.is_set()
        op = ("put", "get", "list", "writes")[n % 4]
        try:
            if op == "put":
                values, versions = step_values(n)
                config = await saver.aput(config, checkpoint(values, versions), {"n": n}, versions)
            elif op == "get":
                got = await saver.aget_tuple(make_config(thread_id))
                if got is not None and got.checkpoint["channel_values"]["n"] != n - 1:
                    tally.add("other", f"aget read n={got.checkpoint['channel_values']['n']}")
            elif op == "list":
                rows = [r async for r in saver.alist(make_config(thread_id), limit=2)]
                if rows and rows[0].checkpoint["channel_values"]["n"] != n - 2:
                    tally.add("other", "alist read a wrong checkpoint")
            else:
                await saver.aput_writes(config, [("n", n), ("blob", "w")], f"task-{n}")
        except BaseException as exc:
            classify(tally, exc, op, after)
            if after:
                return
            if is_closed(exc):
                await asyncio.wait_for(closed.wait(), 30)
            continue
        if after:
            tally.add("other", f"a{op} succeeded on a saver closed before the call")
            return
        tally.add("ok")
        n += 1


async def async_round(source: str, dsn: str, schema: str, round_no: int, tally: Tally) -> None:
    pool: AsyncConnectionPool[Any] | None = None
    if source == "url":
        saver = url_saver(dsn, schema, round_no)
    else:
        pool = AsyncConnectionPool(
            dsn, min_size=2, max_size=4, kwargs={"autocommit": True}, open=False
        )
        await pool.open()
        saver = PostgresSaver(pool, schema=schema, serde=PlainSerializer(), inline_primitives=True)
    closed = asyncio.Event()
    stop = time.monotonic() + 20
    tasks = [
        asyncio.create_task(async_worker(saver, f"r{round_no}-a{i}", tally, closed, stop))
        for i in range(WORKERS)
    ]
    await await_a_call(round_no, tally)
    await saver.aclose()
    closed.set()
    done, pending = await asyncio.wait(tasks, timeout=60)
    for task in pending:
        tally.add("other", "a worker task hung after aclose()")
        task.cancel()
    for task in done:
        if task.exception() is not None:
            tally.add("other", f"a worker task failed: {task.exception()!r}")
    if pool is not None:
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
        await pool.close()


# --- mixed: sync threads and a loop's tasks at once, close() from a third thread -----


def mixed_round(source: str, dsn: str, schema: str, round_no: int, tally: Tally) -> None:
    assert source == "url", "a saver serves sync and async callers only when URL-built"
    saver = url_saver(dsn, schema, round_no)
    closed = threading.Event()
    stop = time.monotonic() + 20
    threads = [
        threading.Thread(target=sync_worker, args=(saver, f"r{round_no}-m{i}", tally, closed, stop))
        for i in range(WORKERS // 2)
    ]
    loop = asyncio.new_event_loop()
    aclosed = asyncio.Event()

    async def tasks() -> None:
        workers = [
            asyncio.create_task(async_worker(saver, f"r{round_no}-n{i}", tally, aclosed, stop))
            for i in range(WORKERS // 2)
        ]
        done, pending = await asyncio.wait(workers, timeout=60)
        for task in pending:
            tally.add("other", "a worker task hung after close()")
            task.cancel()
        for task in done:
            if task.exception() is not None:
                tally.add("other", f"a worker task failed: {task.exception()!r}")

    runner = threading.Thread(target=loop.run_until_complete, args=(tasks(),))
    runner.start()
    for t in threads:
        t.start()
    wait_for_a_call(round_no, tally)
    saver.close()
    closed.set()
    loop.call_soon_threadsafe(aclosed.set)
    for t in [*threads, runner]:
        t.join(90)
        if t.is_alive():
            tally.add("other", "a worker hung after close()")
    if not runner.is_alive():
        loop.close()


def main() -> None:
    mode, source, dsn, schema, rounds = sys.argv[1:6]
    with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        saver.setup()
    tally = Tally()
    for round_no in range(int(rounds)):
        if mode == "sync":
            sync_round(source, dsn, schema, round_no, tally)
        elif mode == "mixed":
            mixed_round(source, dsn, schema, round_no, tally)
        else:
            asyncio.run(async_round(source, dsn, schema, round_no, tally))
        if source == "url":
            check_no_connections_left(dsn, schema, round_no, tally)
    print(json.dumps({"counts": tally.counts, "bad": tally.bad}))


if __name__ == "__main__":
    main()

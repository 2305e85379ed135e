"""A URL-built saver after close(), and from several event loops (issue #18.8, #18.8b).

After ``close()`` or ``aclose()`` every method raises
:class:`~tether.errors.StorageError` saying the saver is closed (it used to
open a new pool silently). The async pool belongs to one event loop, so each
loop gets its own: two loops at once (two threads, each in ``asyncio.run``)
and ``asyncio.run`` twice with the connections lost in between both work,
where one loop's operation used to wait forever, or every operation of the
second run waited ``pool_timeout``. Threads are joined with a deadline and
pools get short timeouts, so a hang fails the test instead of stalling it.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, StorageError, make_config

from .conftest import PlainSerializer, fresh_schema
from .helpers import chain, checkpoint

pytestmark = pytest.mark.postgres

DEADLINE = 60.0  # seconds a thread may take before the test calls it a hang


def _app() -> str:
    return f"tether-test-{uuid.uuid4().hex[:10]}"


def _open(pg_dsn: str, app: str, **kwargs: Any) -> PostgresSaver:
    kwargs.setdefault("pool_timeout", 5.0)
    return PostgresSaver.from_conn_string(
        pg_dsn,
        schema=kwargs.pop("schema", None) or fresh_schema(),
        serde=PlainSerializer(),
        inline_primitives=True,
        connect_kwargs={"application_name": app},
        **kwargs,
    )


def _connections(admin: psycopg.Connection[Any], app: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def _gone(admin: psycopg.Connection[Any], app: str) -> bool:
    """Whether the server has no connection of ``app`` left (backends exit a moment after
    their client closes the socket, so this polls for a few seconds)."""
    for _ in range(100):
        if _connections(admin, app) == 0:
            return True
        time.sleep(0.05)
    return False


def _terminate(admin: psycopg.Connection[Any], app: str) -> int:
    rows = admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (app,),
    ).fetchall()
    return len(rows)


async def _work(saver: PostgresSaver, thread: str, n: int = 5) -> int:
    """Async puts, writes, reads and a listing; the number of checkpoints listed."""
    cfg: Any = make_config(thread)
    for i in range(n):
        v = {"n": f"{i + 1:032}.0"}
        cfg = await saver.aput(cfg, checkpoint({"n": i}, v), {"step": i}, v)
        await saver.aput_writes(cfg, [("x", i)], "task")
        got = await saver.aget_tuple(cfg)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"n": i}
    return len([t async for t in saver.alist(make_config(thread))])


def _in_threads(*targets: Callable[[], Any]) -> list[Any]:
    """Run each target in a thread of its own, at once; their results (or errors raised)."""
    results: list[Any] = [None] * len(targets)
    start = threading.Barrier(len(targets))

    def body(i: int, target: Callable[[], Any]) -> None:
        start.wait()
        try:
            results[i] = target()
        except BaseException as exc:  # reported to the test below
            results[i] = exc

    threads = [
        threading.Thread(target=body, args=(i, t), daemon=True) for i, t in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    hung = [i for i, thread in enumerate(threads) if thread.is_alive()]
    assert not hung, f"threads {hung} did not finish in {DEADLINE} s (a hang)"
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


# --- several event loops -------------------------------------------------------------------


def test_two_event_loops_in_two_threads_use_one_saver_at_once(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    app = _app()
    saver = _open(pg_dsn, app, pool_size=2)
    saver.setup()
    try:

        def run(thread: str) -> int:
            return asyncio.run(_work(saver, thread, 20))

        assert _in_threads(lambda: run("a"), lambda: run("b")) == [20, 20]
        assert len(saver._res.loops) == 2  # one pool per loop
    finally:
        saver.close()
    assert _gone(admin, app)  # the loops had ended: their sockets were closed directly


def test_asyncio_run_again_after_the_connections_were_lost(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    app = _app()
    saver = _open(pg_dsn, app, pool_size=2, pool_timeout=3.0)
    saver.setup()
    try:
        assert asyncio.run(_work(saver, "a")) == 5
        # Between the runs the server loses every connection (restart, idle timeout).
        assert _terminate(admin, app) >= 1
        assert asyncio.run(_work(saver, "b")) == 5
        assert asyncio.run(_work(saver, "c")) == 5  # and again, with nothing lost
    finally:
        saver.close()
    assert _gone(admin, app)


async def test_a_sync_close_inside_a_running_loop_closes_its_pool_there(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    app = _app()
    saver = _open(pg_dsn, app, min_size=2)
    await saver.asetup()
    assert await _work(saver, "a") == 5
    assert _connections(admin, app) >= 1
    saver.close()  # a sync `with` block ending in async code
    with pytest.raises(StorageError, match="closed"):
        await saver.aget_tuple(make_config("a"))
    for _ in range(100):  # the close runs at this loop's next awaits
        if _connections(admin, app) == 0:
            break
        await asyncio.sleep(0.05)
    assert _connections(admin, app) == 0


def test_close_from_another_thread_closes_a_running_loops_pool_on_that_loop(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    app = _app()
    saver = _open(pg_dsn, app)
    saver.setup()
    used, release = threading.Event(), threading.Event()

    async def hold() -> str:
        assert await _work(saver, "a") == 5
        used.set()
        await asyncio.to_thread(release.wait, DEADLINE)  # the loop keeps running meanwhile
        try:
            await saver.aget_tuple(make_config("a"))
        except StorageError as exc:
            return str(exc)
        return "no error"

    def closer() -> None:
        assert used.wait(DEADLINE)
        saver.close()
        release.set()

    message, _ = _in_threads(lambda: asyncio.run(hold()), closer)
    assert "is closed" in message
    assert _gone(admin, app)


# --- after close -----------------------------------------------------------------------


async def _every_call(saver: PostgresSaver) -> dict[str, Callable[[], Any]]:
    cfg = make_config("t")
    cp = checkpoint({"a": 1}, {"a": "1"})

    async def alist() -> Any:
        return [t async for t in saver.alist(None)]

    async def alease() -> None:
        async with saver.alease("t"):
            pass

    def lease() -> None:
        with saver.lease("t"):
            pass

    return {
        "setup": saver.setup,
        "get_tuple": lambda: saver.get_tuple(cfg),
        "list": lambda: list(saver.list(None)),
        "put": lambda: saver.put(cfg, cp, {}, {"a": "1"}),
        "put_writes": lambda: saver.put_writes(cfg, [("x", 1)], "task"),
        "delete_thread": lambda: saver.delete_thread("t"),
        "delete_for_runs": lambda: saver.delete_for_runs(["r"]),
        "copy_thread": lambda: saver.copy_thread("t", "u"),
        "prune": lambda: saver.prune(["t"]),
        "lease": lease,
        "asetup": saver.asetup,
        "aget_tuple": lambda: saver.aget_tuple(cfg),
        "alist": alist,
        "aput": lambda: saver.aput(cfg, cp, {}, {"a": "1"}),
        "aput_writes": lambda: saver.aput_writes(cfg, [("x", 1)], "task"),
        "adelete_thread": lambda: saver.adelete_thread("t"),
        "adelete_for_runs": lambda: saver.adelete_for_runs(["r"]),
        "acopy_thread": lambda: saver.acopy_thread("t", "u"),
        "aprune": lambda: saver.aprune(["t"]),
        "alease": alease,
    }


async def _result(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


async def _all_refused(saver: PostgresSaver) -> None:
    calls = await _every_call(saver)
    for name, call in calls.items():
        with pytest.raises(StorageError, match=r"PostgresSaver.* is closed") as info:
            await _result(call())
        assert "password" not in str(info.value), name


@pytest.mark.parametrize("how", ["close", "aclose"])
async def test_every_method_of_a_closed_url_saver_raises(
    how: str, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    app = _app()
    saver = _open(pg_dsn, app, page_size=1)  # a listing reads a page per checkpoint
    saver.setup()
    await chain("sync", saver, "t", 2)
    await _work(saver, "t2")  # both pools open
    clone = saver.with_allowlist([("x", "Y")])
    listing = saver.list(None)
    assert next(listing) is not None  # a listing under way
    if how == "close":
        saver.close()
    else:
        await saver.aclose()
    await _all_refused(saver)
    await _all_refused(clone)
    with pytest.raises(StorageError, match="closed"):
        list(listing)  # its next page
    saver.close()  # closing twice is fine
    await saver.aclose()
    for _ in range(100):
        if _connections(admin, app) == 0:
            break
        await asyncio.sleep(0.05)
    assert _connections(admin, app) == 0  # no pool was opened again


async def test_a_closed_saver_on_a_callers_connection_refuses_and_leaves_it_open(
    pg_dsn: str,
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        saver = PostgresSaver(
            conn, schema=fresh_schema(), serde=PlainSerializer(), inline_primitives=True
        )
        saver.setup()
        saver.close()
        await _all_refused(saver)
        assert not conn.closed
        assert conn.execute("SELECT 1").fetchone() == (1,)

"""Group commit (#19, goal 8): concurrent writes share a transaction when the pool is busy.

Checked on the real server: the rows of writes that ran together carry one
transaction id (``xmin``), every write is stored as if it ran alone, a
failing statement fails its own caller only, and a saver with
``group_commit=False`` never batches.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver
from tether.backends.postgres._group import Write
from tether.backends.postgres._group_async import AsyncGroupCommit
from tether.backends.postgres._group_sync import GroupCommit
from tether.checkpoint import empty_checkpoint, make_config
from tether.errors import StorageError
from tether.ids import uuid6

from .conftest import aurl_saver, fresh_schema, url_saver

THREADS = 24
STEPS = 4


def _checkpoint(n: int) -> Any:
    ck = empty_checkpoint()
    ck["id"] = str(uuid6())
    ck["channel_values"] = {"n": n}
    ck["channel_versions"] = {"n": f"{n + 1:08d}"}
    return ck


def _transactions(admin: psycopg.Connection[Any], schema: str) -> dict[str, set[str]]:
    """Which threads' checkpoint rows each transaction id committed."""
    rows = admin.execute(
        f'SELECT xmin::text, thread_id FROM "{schema}".tether_checkpoints'
    ).fetchall()
    out: dict[str, set[str]] = {}
    for xid, tid in rows:
        out.setdefault(xid, set()).add(tid)
    return out


async def _chat(saver: PostgresSaver, tid: str) -> None:
    cfg: Any = make_config(tid)
    for n in range(STEPS):
        ck = _checkpoint(n)
        cfg = await saver.aput(cfg, ck, {"source": "loop", "step": n}, dict(ck["channel_versions"]))
        await saver.aput_writes(cfg, [("n", n), ("log", f"step {n}")], f"task-{n}")


def _check_stored(saver: PostgresSaver, tids: list[str]) -> None:
    for tid in tids:
        history = list(saver.list(make_config(tid)))
        assert [t.checkpoint["channel_values"]["n"] for t in history] == list(
            range(STEPS - 1, -1, -1)
        ), tid
        latest = history[0]
        assert [(w[1], w[2]) for w in latest.pending_writes or []] == [
            ("n", STEPS - 1),
            ("log", f"step {STEPS - 1}"),
        ]
    summaries = {s.thread_id: s for s in saver.threads(limit=len(tids) + 1).items}
    assert set(summaries) == set(tids)
    assert all(s.checkpoints == STEPS for s in summaries.values())


async def test_async_writes_on_a_busy_pool_share_transactions_and_all_land(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    async with aurl_saver(pg_dsn, schema, pool_size=2) as saver:
        tids = [f"t{i}" for i in range(THREADS)]
        await asyncio.gather(*(_chat(saver, t) for t in tids))
        _check_stored(saver, tids)
    shared = [t for t in _transactions(admin, schema).values() if len(t) > 1]
    assert shared, "no two threads' checkpoints were committed by one transaction"


def test_sync_writes_from_many_threads_share_transactions_and_all_land(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    with url_saver(pg_dsn, schema, pool_size=2) as saver:
        tids = [f"t{i}" for i in range(THREADS)]
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda t: asyncio.run(_sync_chat(saver, t)), tids))
        _check_stored(saver, tids)
    shared = [t for t in _transactions(admin, schema).values() if len(t) > 1]
    assert shared, "no two threads' checkpoints were committed by one transaction"


async def _sync_chat(saver: PostgresSaver, tid: str) -> None:
    """The sync API from a worker thread (asyncio.run only to share _chat's shape)."""
    cfg: Any = make_config(tid)
    for n in range(STEPS):
        ck = _checkpoint(n)
        cfg = saver.put(cfg, ck, {"source": "loop", "step": n}, dict(ck["channel_versions"]))
        saver.put_writes(cfg, [("n", n), ("log", f"step {n}")], f"task-{n}")


async def test_without_group_commit_every_write_is_its_own_transaction(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    async with aurl_saver(pg_dsn, schema, pool_size=2, group_commit=False) as saver:
        tids = [f"t{i}" for i in range(THREADS)]
        await asyncio.gather(*(_chat(saver, t) for t in tids))
        _check_stored(saver, tids)
    assert all(len(t) == 1 for t in _transactions(admin, schema).values())


async def test_a_failing_write_fails_its_own_caller_only(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """A trigger refuses one task's writes: the batch holding it rolls back, and each
    write runs again alone, so only that caller sees an error."""
    schema = fresh_schema()
    async with aurl_saver(pg_dsn, schema, pool_size=1) as saver:
        admin.execute(
            f'CREATE FUNCTION "{schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
            "$$ BEGIN IF NEW.task_id = 'boom' THEN RAISE EXCEPTION 'refused by the test'; "
            "END IF; RETURN NEW; END $$"
        )
        admin.execute(
            f'CREATE TRIGGER refuse BEFORE INSERT ON "{schema}".tether_writes '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".refuse()'
        )
        configs = []
        for i in range(THREADS):
            ck = _checkpoint(0)
            versions = dict(ck["channel_versions"])
            configs.append(await saver.aput(make_config(f"t{i}"), ck, {"step": 0}, versions))
        tasks = [
            saver.aput_writes(cfg, [("n", i)], "boom" if i == THREADS // 2 else "ok")
            for i, cfg in enumerate(configs)
        ]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        failed = [i for i, r in enumerate(results) if isinstance(r, BaseException)]
        assert failed == [THREADS // 2]
        assert isinstance(results[THREADS // 2], StorageError)
        assert "refused by the test" in str(results[THREADS // 2])
        for i, cfg in enumerate(configs):
            tup = await saver.aget_tuple(cfg)
            assert tup is not None
            expected = [] if i == THREADS // 2 else [("ok", "n", i)]
            assert list(tup.pending_writes or []) == expected


def _write(i: int, tid: str = "t") -> Write:
    return Write(f"write {i}", "", None, tid, fetch=False)


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_queue_longer_than_a_batch_is_served_in_order_and_each_error_goes_home(
    mode: str,
) -> None:
    """The leader/follower algorithm on its own (no server): with one writer and a
    batch of 3, ten writes run as batches of at most 3, one thread's writes in
    their order, and the write whose statement fails raises in its caller only."""
    ran: list[list[str]] = []
    gate = threading.Event()

    def alone(w: Write) -> Any:
        ran.append([w.what])
        if w.what == "write 7":
            raise StorageError("write 7 refused")
        return w.what

    def together(batch: Sequence[Write]) -> None:
        ran.append([w.what for w in batch])
        for w in batch:
            if w.what == "write 7":
                w.settle(error=StorageError("write 7 refused"))
            else:
                w.settle(w.what)

    writes = [_write(i) for i in range(10)]
    if mode == "sync":
        group = GroupCommit(1, max_batch=3)

        def first(w: Write) -> Any:
            gate.wait(5)  # hold the only turn until the nine others queue up
            return alone(w)

        results: list[Any] = [None] * 10

        def call(i: int) -> None:
            try:
                results[i] = group.run(writes[i], first if i == 0 else alone, together)
            except StorageError as exc:
                results[i] = exc

        workers = [threading.Thread(target=call, args=(i,)) for i in range(10)]
        workers[0].start()
        while not ran and not group._leading:
            pass
        for w in workers[1:]:
            w.start()
        while len(group._queue) < 9:
            pass
        gate.set()
        for w in workers:
            w.join()
    else:

        async def main() -> list[Any]:
            group = AsyncGroupCommit(1, max_batch=3)
            agate = asyncio.Event()

            async def afirst(w: Write) -> Any:
                await agate.wait()
                return alone(w)

            async def aalone(w: Write) -> Any:
                return alone(w)

            async def atogether(batch: Sequence[Write]) -> None:
                together(batch)

            tasks = [asyncio.create_task(group.run(writes[0], afirst, atogether))]
            await asyncio.sleep(0)
            tasks += [asyncio.create_task(group.run(w, aalone, atogether)) for w in writes[1:]]
            await asyncio.sleep(0)
            agate.set()
            return list(await asyncio.gather(*tasks, return_exceptions=True))

        results = asyncio.run(main())
    assert ran[0] == ["write 0"]
    assert all(len(batch) <= 3 for batch in ran)
    assert [w for batch in ran for w in batch] == [f"write {i}" for i in range(10)]
    assert [type(r).__name__ for r in results] == ["str"] * 7 + ["StorageError"] + ["str"] * 2


def test_a_follower_whose_write_another_leader_runs_waits_for_it() -> None:
    """A follower woken while its write is in another leader's batch waits for that
    batch; it never leads one of its own (an empty one, over and over: the busy
    loop that hung an event loop when a saver was closed under load)."""
    group = GroupCommit(2)
    gates = {name: threading.Event() for name in ("first", "second", "batch")}
    batches: list[list[str]] = []

    def alone(w: Write) -> Any:
        gates["first" if w.what == "write 0" else "second"].wait(10)
        return w.what

    def together(batch: Sequence[Write]) -> None:
        batches.append([w.what for w in batch])
        if batch:
            gates["batch"].wait(10)
        for w in batch:
            w.settle(w.what)

    writes = [_write(i, f"t{i}") for i in range(6)]
    results: dict[int, Any] = {}
    workers = [
        threading.Thread(
            target=lambda i=i: results.__setitem__(i, group.run(writes[i], alone, together))
        )
        for i in range(6)
    ]

    def until(check: Any) -> None:
        for _ in range(10_000):
            if check():
                return
            threading.Event().wait(0.001)
        raise AssertionError("the group never got there")

    workers[0].start()
    until(lambda: group._leading == 1)
    workers[1].start()
    until(lambda: group._leading == 2)
    for w in workers[2:]:
        w.start()
    until(lambda: len(group._queue) == 4)
    gates["second"].set()  # write 1's leader ends: a follower takes writes 2-5
    until(lambda: batches)
    gates["first"].set()  # write 0's leader ends: the others wake, their writes taken
    threading.Event().wait(0.2)
    gates["batch"].set()
    for w in workers:
        w.join(10)
    assert batches == [[f"write {i}" for i in range(2, 6)]]
    assert results == {i: f"write {i}" for i in range(6)}


def test_a_write_cancelled_while_it_waits_in_the_queue_is_not_run() -> None:
    async def main() -> list[str]:
        group = AsyncGroupCommit(1)
        gate = asyncio.Event()
        ran: list[str] = []

        async def alone(w: Write) -> Any:
            if w.what == "write 0":
                await gate.wait()
            ran.append(w.what)
            return w.what

        async def together(batch: Sequence[Write]) -> None:
            for w in batch:
                ran.append(w.what)
                w.settle(w.what)

        first = asyncio.create_task(group.run(_write(0), alone, together))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(group.run(_write(1), alone, together))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.set()
        await first
        await group.run(_write(2), alone, together)
        return ran

    assert asyncio.run(main()) == ["write 0", "write 2"]

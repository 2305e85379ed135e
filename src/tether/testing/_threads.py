"""The thread index's part of the contract suite (#15): ``threads()`` / ``athreads()``.

:func:`scan` is the reference: what the index must say, computed the slow
way the official savers offer (``list(None)``, then the latest root
checkpoint of each thread decoded and read with :func:`tether.history.status`).
The model test (:mod:`tether.testing._model`) compares the index with it
after every operation of its random programs; the tests below state the
rules one by one.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tether.backends._threads import BUCKET_BITS
from tether.checkpoint import ERROR, INTERRUPT, RESUME, make_config
from tether.errors import ConfigError
from tether.history import status
from tether.testing._driver import Driver, cid, new_checkpoint
from tether.threads import ThreadSummary

__all__ = ["ThreadsContract", "check_index", "scan"]


async def scan(driver: Driver, thread_ids: list[str]) -> dict[str, dict[str, Any]]:
    """What the index must hold for ``thread_ids``, read by scanning the checkpoints."""
    out: dict[str, dict[str, Any]] = {}
    for tid in thread_ids:
        tuples = await driver.list({"configurable": {"thread_id": tid}})
        if not tuples:
            continue
        root = [t for t in tuples if t.config["configurable"]["checkpoint_ns"] == ""]
        latest = root[0] if root else None
        meta = dict(latest.metadata) if latest is not None else {}
        out[tid] = {
            "checkpoints": len(tuples),
            "namespaces": len({t.config["configurable"]["checkpoint_ns"] for t in tuples}),
            "latest_checkpoint_id": cid(latest.config) if latest is not None else None,
            "latest_step": meta.get("step"),
            "latest_ts": latest.checkpoint["ts"] if latest is not None else None,
            "status": status(latest).state if latest is not None else None,
            "metadata": {k: v for k, v in meta.items() if k not in ("source", "step", "parents")},
        }
    return out


def _shape(row: ThreadSummary) -> dict[str, Any]:
    return {
        "checkpoints": row.checkpoints,
        "namespaces": row.namespaces,
        "latest_checkpoint_id": row.latest_checkpoint_id,
        "latest_step": row.latest_step,
        "latest_ts": row.latest_ts,
        "status": row.status,
        "metadata": row.metadata,
    }


async def all_threads(driver: Driver, **kwargs: Any) -> list[ThreadSummary]:
    """Every page of ``threads(**kwargs)``, following the cursors."""
    out: list[ThreadSummary] = []
    cursor = None
    while True:
        page = await driver.threads(cursor=cursor, **kwargs)
        out.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return out


async def check_index(driver: Driver, thread_ids: list[str], where: str = "") -> None:
    """The index agrees with :func:`scan` on ``thread_ids`` (bytes only positive)."""
    want = await scan(driver, thread_ids)
    rows = [r for r in await all_threads(driver, limit=7) if r.thread_id in thread_ids]
    got = {r.thread_id: _shape(r) for r in rows}
    assert got == want, where
    for r in rows:
        assert r.bytes > 0, where
        assert r.created_at <= r.updated_at, where


def _trigger(value: Any = None) -> dict[str, Any]:
    return {"branch:to:n": value}


class ThreadsContract:
    """Mixed into :class:`~tether.testing.SaverContract`; uses its ``driver`` fixture."""

    async def test_threads_of_an_empty_saver(self, driver: Driver) -> None:
        page = await driver.threads()
        assert page.items == []
        assert page.next_cursor is None

    async def test_threads_counts_every_namespace_in_one_thread(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        root = await driver.put(make_config("t"), cp, {"step": 1, "user": "u1"}, {"a": "1"})
        for i in range(2):
            sub = new_checkpoint({"a": i}, {"a": f"{i + 2}"})
            await driver.put(make_config("t", "sub:1"), sub, {"step": i}, {"a": f"{i + 2}"})
        [row] = (await driver.threads()).items
        assert (row.thread_id, row.checkpoints, row.namespaces) == ("t", 3, 2)
        assert row.latest_checkpoint_id == cid(root)
        assert (row.latest_step, row.latest_ts, row.metadata) == (1, cp["ts"], {"user": "u1"})
        assert row.status == "idle"
        assert row.created_at.tzinfo is UTC
        assert row.bytes > 0
        # A put of the same id again is not another checkpoint.
        await driver.put(make_config("t"), cp, {"step": 1, "user": "u2"}, {"a": "1"})
        [row] = (await driver.threads()).items
        assert (row.checkpoints, row.metadata) == (3, {"user": "u2"})
        await check_index(driver, ["t"])

    async def test_threads_status_follows_puts_and_writes(self, driver: Driver) -> None:
        async def state() -> Any:
            [row] = (await driver.threads()).items
            return row.status

        trigger = {"branch:to:n": "1"}
        cfg = await driver.put(make_config("t"), new_checkpoint(_trigger(), trigger), {}, trigger)
        assert await state() == "pending"  # n would run
        await driver.put_writes(cfg, [(INTERRUPT, [{"value": "ok?", "id": "i1"}])], "task-1")
        assert await state() == "interrupted"
        await driver.put_writes(cfg, [(RESUME, "yes")], "task-1")
        assert await state() == "interrupted"  # a control write: still waiting
        await driver.put_writes(cfg, [("out", 1)], "task-1")
        assert await state() == "pending"  # the task finished; n is still to run
        await driver.put_writes(cfg, [(ERROR, "ValueError('x')")], "task-2")
        assert await state() == "error"
        done = new_checkpoint({}, {"branch:to:n": "2"})
        done["versions_seen"] = {"n": {"branch:to:n": "1"}}
        cfg2 = await driver.put(cfg, done, {}, {"branch:to:n": "2"})
        assert await state() == "idle"  # cleared: nothing left to run
        # Writes of an older checkpoint do not touch the status; a subgraph's neither.
        await driver.put_writes(cfg, [(INTERRUPT, ["old"])], "task-3")
        await driver.put(make_config("t", "sub:1"), new_checkpoint(_trigger(), {}), {}, {})
        assert await state() == "idle"
        # Writes may be stored before their checkpoint.
        early = new_checkpoint({}, {})
        pending_cfg = make_config("t", "", early["id"])
        await driver.put_writes(pending_cfg, [(INTERRUPT, ["early"])], "task-4")
        await driver.put(cfg2, early, {}, {})
        assert await state() == "interrupted"
        await check_index(driver, ["t"])

    async def test_threads_after_thread_operations(self, driver: Driver) -> None:
        cfg: Any = make_config("t")
        for i in range(4):
            cp = new_checkpoint({"a": i}, {"a": f"{i + 1}"})
            cfg = await driver.put(cfg, cp, {"step": i, "run_id": f"r{i % 2}"}, {"a": f"{i + 1}"})
            await driver.put_writes(cfg, [("w", i)], "task")
        await driver.put(make_config("t", "sub:1"), new_checkpoint({}, {}), {"run_id": "r9"}, {})
        await check_index(driver, ["t"])
        await driver.copy_thread("t", "u")
        await check_index(driver, ["t", "u"])
        await driver.prune(["t"], strategy="keep_last", keep=2)
        await check_index(driver, ["t", "u"])
        assert [r.checkpoints for r in await all_threads(driver, order="thread_id")] == [3, 5]
        await driver.delete_for_runs(["r1"])  # the latest root checkpoint goes
        await check_index(driver, ["t", "u"])
        await driver.delete_for_runs(["r9"])
        await check_index(driver, ["t", "u"])
        await driver.delete_thread("u")
        await driver.prune(["t"], strategy="delete")
        assert (await driver.threads()).items == []

    async def test_threads_pages_with_a_cursor(self, driver: Driver) -> None:
        names = [f"t{i}" for i in range(7)]
        for name in names:
            await driver.put(make_config(name), new_checkpoint({}, {}), {"k": name[-1]}, {})
        for order in ("updated", "-updated", "thread_id"):
            everything = [r.thread_id for r in (await driver.threads(order=order, limit=50))]
            seen: list[str] = []
            page = await driver.threads(order=order, limit=3)
            seen += [r.thread_id for r in page]
            # Threads written while paging: new ones are never mixed into later pages
            # of a newest-first listing, and no thread is listed twice or skipped.
            fresh = f"new-{order}"
            await driver.put(make_config(fresh), new_checkpoint({}, {}), {}, {})
            while page.next_cursor is not None:
                page = await driver.threads(order=order, limit=3, cursor=page.next_cursor)
                seen += [r.thread_id for r in page]
            assert len(seen) == len(set(seen))
            assert [s for s in seen if s != fresh] == everything
            # Oldest first, the new thread comes last; newest first, it was never due.
            assert (fresh in seen) == (order == "-updated")

    async def test_threads_filters(self, driver: Driver) -> None:
        await driver.put(make_config("a"), new_checkpoint({}, {}), {"user": "x", "n": 1}, {})
        before = datetime.now(UTC)
        await asyncio.sleep(0.002)
        trigger = {"branch:to:n": "1"}
        cfg = await driver.put(
            make_config("b"), new_checkpoint(_trigger(), trigger), {"user": "y"}, trigger
        )
        await driver.put_writes(cfg, [(INTERRUPT, ["?"])], "task")
        ids = [r.thread_id for r in await driver.threads(status="interrupted")]
        assert ids == ["b"]
        both = await driver.threads(status=["idle", "interrupted"], order="thread_id")
        assert [r.thread_id for r in both] == ["a", "b"]
        assert [r.thread_id for r in await driver.threads(metadata={"user": "x"})] == ["a"]
        assert [r.thread_id for r in await driver.threads(metadata={"n": 1.0})] == ["a"]
        assert [r.thread_id for r in await driver.threads(metadata={"n": True})] == []
        assert [r.thread_id for r in await driver.threads(updated_before=before)] == ["a"]
        assert [r.thread_id for r in await driver.threads(updated_after=before)] == ["b"]
        later = before + timedelta(days=1)
        assert [r.thread_id for r in await driver.threads(updated_after=later)] == []
        assert (await driver.threads(limit=0)).items == []

    async def test_threads_order_across_update_buckets(
        self, driver: Driver, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Order, cursors and time filters are exact across the index's buckets.

        The backends find rows through ``updated_at >> BUCKET_BITS``; a clock
        set around bucket edges (and standing still, for ties) checks that
        listings still follow ``(updated_at, thread_id)`` exactly.
        """
        edge = (1_800_000_000_000_000 >> BUCKET_BITS) + 1 << BUCKET_BITS
        clock = [edge - 2]
        monkeypatch.setattr(time, "time_ns", lambda: clock[0] * 1000)
        steps = [("a", 0), ("b", 0), ("c", 1), ("d", 1), ("e", 2), ("b", 3), ("f", 3)]
        steps += [("a", (1 << BUCKET_BITS) - 1), ("g", 5 << BUCKET_BITS), ("c", 1)]
        cfgs: dict[str, Any] = {}
        for name, advance in steps:
            clock[0] += advance
            if name in cfgs and advance % 2:
                await driver.put_writes(cfgs[name], [("w", advance)], "task")
            else:
                cp = new_checkpoint({}, {})
                cfgs[name] = await driver.put(cfgs.get(name, make_config(name)), cp, {}, {})
        names = sorted(cfgs)
        await check_index(driver, names)
        rows = await all_threads(driver, order="-updated", limit=50)
        key = {r.thread_id: (r.updated_at, r.thread_id) for r in rows}
        assert sorted(key) == names
        oldest = sorted(names, key=key.__getitem__)
        for order, want in (("-updated", oldest), ("updated", oldest[::-1])):
            for limit in (1, 2, 3):
                got = [r.thread_id for r in await all_threads(driver, order=order, limit=limit)]
                assert got == want, (order, limit)
        for r in rows:
            for bound in (r.updated_at, r.updated_at + timedelta(microseconds=1)):
                before = [n for n in oldest if key[n][0] < bound]
                after = [n for n in oldest if key[n][0] > bound]
                page = await all_threads(driver, order="-updated", updated_before=bound, limit=2)
                assert [x.thread_id for x in page] == before, bound
                page = await all_threads(driver, order="updated", updated_after=bound, limit=2)
                assert [x.thread_id for x in page] == after[::-1], bound

    @pytest.mark.parametrize(
        ("kwargs", "named"),
        [
            ({"status": "asleep"}, "status"),
            ({"status": []}, "status"),
            ({"metadata": {1: "x"}}, "metadata"),
            ({"metadata": "user"}, "metadata"),
            ({"metadata": {"step": 1}}, "metadata"),
            ({"updated_before": datetime(2026, 1, 1)}, "updated_before"),
            ({"updated_after": "yesterday"}, "updated_after"),
            ({"order": "newest"}, "order"),
            ({"limit": -1}, "limit"),
            ({"limit": 10**9}, "limit"),
            ({"cursor": "not a cursor"}, "cursor"),
            ({"cursor": 5}, "cursor"),
        ],
    )
    async def test_threads_refuses_bad_arguments(
        self, driver: Driver, kwargs: dict[str, Any], named: str
    ) -> None:
        with pytest.raises(ConfigError, match=named):
            await driver.threads(**kwargs)

    async def test_threads_cursor_belongs_to_its_order(self, driver: Driver) -> None:
        for name in "abc":
            await driver.put(make_config(name), new_checkpoint({}, {}), {}, {})
        page = await driver.threads(limit=1)
        assert page.next_cursor is not None
        with pytest.raises(ConfigError, match="order"):
            await driver.threads(limit=1, cursor=page.next_cursor, order="thread_id")

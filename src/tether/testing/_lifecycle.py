"""Retention and sweep's part of the contract suite (#15): ``sweep`` / ``asweep``.

Every test drives the saver through :class:`~tether.testing._driver.Driver`
(sync and async) and reads what stays back through the saver itself: a
sweep must delete what the policy says, keep every checkpoint it keeps
whole (values, pending writes), and leave the thread index right.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tether.checkpoint import INTERRUPT, make_config
from tether.errors import ConfigError
from tether.ids import Uuid6Generator
from tether.lifecycle import Retention
from tether.testing._driver import Driver, Line, cid, new_checkpoint
from tether.testing._threads import check_index

__all__ = ["LifecycleContract", "put_at"]

DAY = timedelta(days=1)


def _later(delta: timedelta) -> datetime:
    return datetime.now(UTC) + delta


async def put_at(driver: Driver, config: Any, when: datetime, step: int) -> dict[str, Any]:
    """A checkpoint whose UUIDv6 id carries the time ``when`` (for ``keep_within``)."""
    ids = Uuid6Generator(clock=lambda: int(when.timestamp() * 1e9))
    cp = new_checkpoint({"n": step}, {"n": f"{step + 1:032}.0"})
    cp["id"] = str(ids())
    return await driver.put(config, cp, {"step": step}, {"n": f"{step + 1:032}.0"})


class LifecycleContract:
    """Mixed into :class:`~tether.testing.SaverContract`; uses its ``driver`` fixture."""

    async def test_sweep_without_a_policy_deletes_nothing(self, driver: Driver) -> None:
        await Line(driver, "t").steps(3)
        report = await driver.sweep(now=_later(365 * DAY))
        assert (report.threads, report.checkpoints, report.pruned_threads) == (0, 0, 0)
        assert report.finished
        assert len(await driver.list(make_config("t"))) == 3

    async def test_ttl_deletes_idle_threads_whole_and_dry_run_says_so_first(
        self, driver: Driver
    ) -> None:
        driver.saver.retention = Retention(ttl=7 * DAY)
        old = Line(driver, "old")
        await old.steps(3)
        await driver.put_writes(old.config, [(INTERRUPT, ["ok?"])], "task-1")
        await Line(driver, "old", "sub:1").steps(2)
        await Line(driver, "other").steps(2)
        # A week and a day later: both are idle past the TTL.
        dry = await driver.sweep(dry_run=True, now=_later(8 * DAY))
        assert (dry.threads, dry.checkpoints, dry.dry_run) == (2, 7, True)
        assert sorted(dry.thread_ids) == ["old", "other"]
        assert dry.bytes > 0
        assert len(await driver.list(None)) == 7  # a dry run deletes nothing
        # Six days later nothing is due.
        early = await driver.sweep(now=_later(6 * DAY))
        assert (early.threads, early.checkpoints) == (0, 0)
        report = await driver.sweep(now=_later(8 * DAY))
        assert (report.threads, report.checkpoints, report.bytes) == (2, 7, dry.bytes)
        assert report.batches == 1
        assert await driver.list(None) == []
        assert (await driver.threads()).items == []
        assert await driver.get_writes(old.config) == []

    async def test_ttl_batches_and_a_time_budget(self, driver: Driver) -> None:
        driver.saver.retention = Retention(ttl=DAY)
        for i in range(5):
            await Line(driver, f"t{i}").steps(1)
        report = await driver.sweep(now=_later(2 * DAY), batch=2)
        assert (report.threads, report.batches, report.finished) == (5, 3, True)
        with pytest.raises(ConfigError, match="batch"):
            await driver.sweep(batch=0)
        with pytest.raises(ConfigError, match="max_seconds"):
            await driver.sweep(max_seconds=-1)
        with pytest.raises(ConfigError, match="timezone-aware"):
            await driver.sweep(now=datetime(2030, 1, 1))

    async def test_a_thread_written_after_the_cutoff_is_not_swept(self, driver: Driver) -> None:
        """The batch checks again, in its transaction, that each thread is still due."""
        await Line(driver, "t").steps(2)
        [row] = (await driver.threads()).items
        stamp = int(row.updated_at.timestamp() * 1_000_000)
        saver = driver.saver
        for dry_run in (True, False):
            if driver.mode == "sync":
                assert saver._sweep_expired([("t", stamp)], dry_run) == []
                assert saver._sweep_prune("t", 1, stamp, dry_run) is None
            else:
                assert await saver._asweep_expired([("t", stamp)], dry_run) == []
                assert await saver._asweep_prune("t", 1, stamp, dry_run) is None
        assert len(await driver.list(make_config("t"))) == 2

    async def test_grace_keeps_a_thread_written_within_it(self, driver: Driver) -> None:
        driver.saver.retention = Retention(ttl=1, keep_last=1, grace=timedelta(hours=1))
        await Line(driver, "t").steps(3)
        report = await driver.sweep(now=_later(timedelta(minutes=30)))
        assert (report.threads, report.checkpoints) == (0, 0)
        assert len(await driver.list(make_config("t"))) == 3
        report = await driver.sweep(now=_later(timedelta(hours=2)))
        assert (report.threads, report.checkpoints) == (1, 3)

    async def test_keep_last_prunes_live_threads_and_keeps_what_they_need(
        self, driver: Driver
    ) -> None:
        driver.saver.retention = Retention(ttl=30 * DAY, keep_last=2)
        line = Line(driver, "t")
        await line.steps(5)
        await driver.put_writes(line.config, [("out", 1)], "task-0")
        await driver.put_writes(line.config, [(INTERRUPT, ["ok?"])], "task-1")
        sub = Line(driver, "t", "sub:1")
        await sub.steps(4)
        await Line(driver, "short").steps(2)
        writes = await driver.get_writes(line.config)
        dry = await driver.sweep(dry_run=True, now=_later(DAY))
        assert (dry.threads, dry.pruned_threads, dry.checkpoints) == (0, 1, 5)
        report = await driver.sweep(now=_later(DAY))
        assert (report.threads, report.pruned_threads, report.checkpoints) == (0, 1, 5)
        assert report.bytes > 0
        assert await driver.ids(make_config("t")) == line.ids[:-3:-1]
        assert await driver.ids(make_config("t", "sub:1")) == sub.ids[:-3:-1]
        for kept in (line, sub):
            kept.expected = {at: kept.expected[at] for at in kept.ids[-2:]}
            await kept.check()
        assert await driver.get_writes(line.config) == writes
        [row] = [r for r in (await driver.threads()).items if r.thread_id == "t"]
        assert (row.checkpoints, row.status) == (4, "interrupted")
        await check_index(driver, ["t", "short"])
        again = await driver.sweep(now=_later(DAY))
        assert (again.checkpoints, again.pruned_threads) == (0, 0)

    async def test_a_dry_run_reports_exactly_what_the_sweep_then_deletes(
        self, driver: Driver
    ) -> None:
        """Threads, checkpoints and bytes: the prune phase asks the backend what a prune
        would leave (grace and, on Postgres, leases checked as the sweep checks them),
        as the TTL phase does, rather than estimating."""
        driver.saver.retention = Retention(ttl=30 * DAY, keep_last=2)
        # A large value every checkpoint still names: pruning frees little of it.
        shared = Line(driver, "shared")
        await shared.step({"doc": "x" * 4000, "n": 0})
        for n in range(1, 5):
            await shared.step({"n": n})
        # Large old checkpoints, small new ones: pruning frees most of the bytes.
        shrinking = Line(driver, "shrinking")
        for n in range(5):
            await shrinking.step({"doc": "y" * (4000 >> n), "n": n})
        await driver.put_writes(shrinking.config, [("out", "z" * 500)], "task-0")
        await Line(driver, "expired").steps(3)
        await driver.set_retention("expired", Retention(ttl=DAY / 2))
        await Line(driver, "busy").steps(4)  # within its own grace: left alone
        await driver.set_retention("busy", Retention(keep_last=1, grace=2 * DAY))
        dry = await driver.sweep(dry_run=True, now=_later(DAY))
        assert len(await driver.list(None)) == 17  # nothing deleted
        real = await driver.sweep(now=_later(DAY))
        fields = ("threads", "checkpoints", "bytes", "pruned_threads", "skipped", "thread_ids")
        assert {f: getattr(dry, f) for f in fields} == {f: getattr(real, f) for f in fields}
        assert (real.threads, real.pruned_threads, real.checkpoints) == (1, 2, 9)
        assert len(await driver.list(None)) == 8

    async def test_keep_within_keeps_young_checkpoints_by_their_id_time(
        self, driver: Driver
    ) -> None:
        driver.saver.retention = Retention(keep_within=timedelta(hours=3))
        # The sweep runs 4 hours from now: the thread (created now, as its index
        # row says) is older than the window, so its checkpoints are read.
        at = datetime.now(UTC) + timedelta(hours=4)
        cfg: Any = make_config("t")
        ids = []
        for step, hours in enumerate((10, 8, 6, 2, 1)):
            cfg = await put_at(driver, cfg, at - timedelta(hours=hours), step)
            ids.append(cid(cfg))
        report = await driver.sweep(now=at)
        assert (report.pruned_threads, report.checkpoints) == (1, 3)
        assert await driver.ids(make_config("t")) == ids[:2:-1]

    async def test_a_threads_own_policy_replaces_the_savers(self, driver: Driver) -> None:
        driver.saver.retention = Retention(ttl=7 * DAY)
        for tid in ("forever", "short", "plain"):
            await Line(driver, tid).steps(3)
        await driver.set_retention("forever", Retention())
        await driver.set_retention("short", Retention(ttl=DAY, keep_last=1))
        assert await driver.get_retention("forever") == Retention()
        assert await driver.get_retention("short") == Retention(ttl=DAY, keep_last=1)
        assert await driver.get_retention("plain") is None
        # A put keeps the thread's policy.
        await Line(driver, "short", config=make_config("short")).steps(1)
        assert await driver.get_retention("short") == Retention(ttl=DAY, keep_last=1)
        two = await driver.sweep(now=_later(2 * DAY))
        assert (two.threads, two.thread_ids) == (1, ["short"])
        eight = await driver.sweep(now=_later(8 * DAY))
        assert (eight.threads, eight.thread_ids) == (1, ["plain"])
        assert await driver.ids(make_config("forever")) != []
        await driver.set_retention("forever", None)
        assert await driver.get_retention("forever") is None
        assert (await driver.sweep(now=_later(8 * DAY))).thread_ids == ["forever"]

    async def test_refresh_on_read_makes_a_read_count_as_activity(self, driver: Driver) -> None:
        driver.saver.retention = Retention(ttl=1, grace=0, refresh_on_read=True)
        await Line(driver, "read").steps(1)
        await Line(driver, "unread").steps(1)
        [row] = [r for r in (await driver.threads()).items if r.thread_id == "read"]
        await asyncio.sleep(1.1)  # both idle for longer than the TTL
        assert await driver.get_tuple(make_config("read")) is not None
        [after] = [r for r in (await driver.threads()).items if r.thread_id == "read"]
        assert after.updated_at > row.updated_at
        report = await driver.sweep()
        assert report.thread_ids == ["unread"]

    async def test_set_retention_checks_its_arguments(self, driver: Driver) -> None:
        with pytest.raises(ConfigError, match="no checkpoint"):
            await driver.set_retention("nobody", Retention(ttl=DAY))
        await Line(driver, "t").steps(1)
        with pytest.raises(ConfigError, match="Retention"):
            await driver.set_retention("t", {"ttl": 1})  # type: ignore[arg-type]
        assert await driver.get_retention("nobody") is None

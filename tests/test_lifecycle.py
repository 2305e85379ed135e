"""Retention policies and sweep (#15) beyond the contract suite: the policy object, and a
Hypothesis test of sweep against a plain reference model on every backend.

The property: after a sweep, every checkpoint the policy keeps (the newest
``keep_last`` of its namespace, those younger than ``keep_within``, the newest
always) reads back exactly as before (values, including append-delta lists
whose snapshots the deleted checkpoints shared; metadata; pending writes; parent
link), threads past their TTL are gone whole, the thread index counts what is
left, and a dry run just before reported exactly what the sweep deleted.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import InMemorySaver, SqliteSaver
from tether.base import BaseCheckpointSaver
from tether.checkpoint import make_config
from tether.errors import ConfigError, StorageError
from tether.ids import Uuid6Generator
from tether.lifecycle import Retention, SweepReport, checkpoint_micros, keep_count
from tether.testing._driver import Driver, Line, cid
from tether.testing._threads import check_index

# --- the policy object ---------------------------------------------------------------------


def test_retention_takes_timedeltas_or_seconds_and_round_trips_as_json() -> None:
    policy = Retention(ttl=3600, keep_last=3, keep_within=timedelta(days=2), refresh_on_read=True)
    assert policy.ttl == timedelta(hours=1)
    assert Retention.from_json(policy.to_json()) == policy
    assert Retention.from_json(Retention().to_json()) == Retention()
    assert json.loads(Retention(grace=0).to_json()) == {"grace": 0.0}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ttl": 0}, "ttl must be more than 0"),
        ({"ttl": "7d"}, "ttl must be a datetime.timedelta or a number of seconds"),
        ({"ttl": float("inf")}, "ttl must be finite"),
        ({"keep_last": 0}, "keep_last must be a positive int"),
        ({"keep_last": True}, "keep_last must be a positive int"),
        ({"keep_within": timedelta(seconds=-1)}, "keep_within must be more than 0"),
        ({"grace": -1}, "grace must be 0 or more"),
        ({"refresh_on_read": 1}, "refresh_on_read must be a bool"),
    ],
)
def test_a_bad_rule_is_a_config_error_naming_it(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Retention(**kwargs)


def test_a_saver_refuses_a_retention_that_is_not_a_policy() -> None:
    with pytest.raises(ConfigError, match=r"retention must be a tether\.lifecycle\.Retention"):
        InMemorySaver(retention={"ttl": 3600})  # type: ignore[arg-type]


def test_checkpoint_times_come_from_uuid6_ids() -> None:
    when = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    made = Uuid6Generator(clock=lambda: int(when.timestamp() * 1e9))()
    assert checkpoint_micros(str(made)) == int(when.timestamp() * 1_000_000)
    assert checkpoint_micros("not-a-uuid6") is None
    # An id whose age is unknown counts as young: keep_within keeps it.
    policy = Retention(keep_within=timedelta(hours=1))
    assert keep_count(policy, {"": ["b", "a"]}, int(when.timestamp() * 1e6)) == 2


def test_sweep_report_as_dict_is_json() -> None:
    report = SweepReport(threads=1, thread_ids=["t"])
    assert json.loads(json.dumps(report.as_dict()))["thread_ids"] == ["t"]


# --- sweep against a reference model --------------------------------------------------------

_HOUR = timedelta(hours=1)
_Ids = dict[str, dict[str, list[str]]]


@st.composite
def _stores(draw: st.DrawFn) -> dict[str, Any]:
    threads = []
    for t in range(draw(st.integers(1, 3))):
        spaces = {}
        for ns in draw(st.sampled_from([[""], ["", "sub:1"]])):
            ages = sorted(draw(st.lists(st.integers(1, 30), min_size=1, max_size=7)), reverse=True)
            forks = draw(st.lists(st.integers(0, 6), max_size=2))
            writes = draw(st.lists(st.integers(0, 6), max_size=3))
            spaces[ns] = {"ages": ages, "forks": forks, "writes": writes}
        threads.append({"id": f"t{t}", "spaces": spaces})
    policy = {
        "keep_last": draw(st.sampled_from([None, 1, 2, 3])),
        "keep_within": draw(st.sampled_from([None, 2, 6, 12])),
        "ttl": draw(st.sampled_from([None, None, 12, 72])),
    }
    own = draw(st.sampled_from([None, {"keep_last": 1}, {}]))
    return {"threads": threads, "policy": policy, "own": own}


def _policy(spec: dict[str, Any]) -> Retention:
    return Retention(
        ttl=None if spec.get("ttl") is None else spec["ttl"] * _HOUR,
        keep_last=spec.get("keep_last"),
        keep_within=None if spec.get("keep_within") is None else spec["keep_within"] * _HOUR,
    )


async def _build(
    driver: Driver, store: dict[str, Any], at: datetime
) -> dict[str, dict[str, list[str]]]:
    """Write the store; each namespace's checkpoint ids (a chain, then forks off it)."""
    out: _Ids = {}
    for thread in store["threads"]:
        tid = thread["id"]
        out[tid] = {}
        for ns, space in thread["spaces"].items():
            ids: list[str] = []
            configs: list[Any] = []
            cfg: Any = make_config(tid, ns)
            history: list[str] = []
            for step, age in enumerate(space["ages"]):
                make = Uuid6Generator(
                    clock=lambda age=age: int((at - age * _HOUR).timestamp() * 1e9)
                )
                history = [*history, f"message {step} " + "x" * 40]
                version = f"{step + 1:032}.0"
                cp: Any = {
                    "v": 4,
                    "id": str(make()),
                    "ts": (at - age * _HOUR).isoformat(),
                    "channel_values": {"messages": history, "n": step},
                    "channel_versions": {"messages": version, "n": version},
                    "versions_seen": {},
                    "updated_channels": ["messages", "n"],
                }
                new = {"messages": version, "n": version}
                cfg = await driver.put(cfg, cp, {"step": step, "source": "loop"}, new)
                configs.append(cfg)
                ids.append(cid(cfg))
            for fork in space["forks"]:
                if fork < len(configs):
                    make = Uuid6Generator(clock=lambda: int(at.timestamp() * 1e9) - 10**9)
                    tup = await driver.get(configs[fork])
                    cp = dict(tup.checkpoint)
                    cp["id"] = str(make())
                    got = await driver.put(configs[fork], cp, {"step": 99, "source": "fork"}, {})
                    ids.append(cid(got))
            for at_step in space["writes"]:
                if at_step < len(configs):
                    await driver.put_writes(configs[at_step], [("out", at_step)], f"task-{at_step}")
            out[tid][ns] = ids
    return out


def _kept(policy: Retention, ids: list[str], at: datetime) -> set[str]:
    """What the policy keeps of one namespace, by the plain reading of its rules."""
    order = sorted(ids, reverse=True)
    kept = set(order[: policy.keep_last or 1])
    if policy.keep_within is not None:
        since = (at - policy.keep_within).timestamp() * 1e6
        kept |= {c for c in ids if (checkpoint_micros(c) or 0) >= since}
    return kept


def _key(config: Any) -> tuple[str, str, str]:
    conf = config["configurable"]
    return cid(config), conf["thread_id"], conf["checkpoint_ns"]


def _backends(tmp: Path) -> Iterator[BaseCheckpointSaver]:
    yield InMemorySaver(delta_threshold=64)
    yield SqliteSaver(tmp, delta_threshold=64)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(store=_stores(), mode=st.sampled_from(["sync", "async"]))
def test_a_sweep_keeps_every_checkpoint_its_policy_keeps_whole(
    tmp_path: Path, store: dict[str, Any], mode: str
) -> None:
    asyncio.run(_check_store(tmp_path, store, mode))


_RUNS = itertools.count()


async def _check_store(tmp_path: Path, store: dict[str, Any], mode: str) -> None:
    for saver in _backends(tmp_path / f"store-{next(_RUNS)}.db"):
        with saver:
            await _check_one(saver, store, mode)


async def _check_one(saver: BaseCheckpointSaver, store: dict[str, Any], mode: str) -> None:
    # The sweep runs a day after the writes, so every thread is past its grace and
    # its index row (created now) is older than any keep_within drawn.
    at = datetime.now(UTC) + timedelta(days=1)
    driver = Driver(saver, mode)
    policy = _policy(store["policy"])
    saver.retention = policy
    ids = await _build(driver, store, at)
    own = store["own"]
    if own is not None:
        await driver.set_retention("t0", _policy(own))
    before = {_key(t.config): t for t in await driver.list(None)}
    dry = await driver.sweep(now=at, batch=2, dry_run=True)
    report = await driver.sweep(now=at, batch=2)
    # A dry run reports what the sweep then deletes (nobody wrote in between).
    fields = ("threads", "checkpoints", "bytes", "pruned_threads", "skipped", "thread_ids")
    assert {f: getattr(dry, f) for f in fields} == {f: getattr(report, f) for f in fields}
    left = {t.config["configurable"]["thread_id"] for t in await driver.list(None)}
    for tid, spaces in ids.items():
        mine = _policy(own) if tid == "t0" and own is not None else policy
        expired = mine.ttl is not None and mine.ttl < timedelta(days=1)
        if expired:
            assert tid not in left
            continue
        for ns, namespace_ids in spaces.items():
            for c in _kept(mine, namespace_ids, at):
                want = before[(c, tid, ns)]
                got = await driver.get(make_config(tid, ns, c))
                assert got.checkpoint == want.checkpoint
                assert got.metadata == want.metadata
                assert got.pending_writes == want.pending_writes
                assert got.parent_config == want.parent_config
    await check_index(driver, sorted(ids))


# --- the background sweeper ------------------------------------------------------------------


def _wait_for(predicate: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_no_background_sweeper_by_default(tmp_path: Path) -> None:
    assert InMemorySaver().sweeper is None
    with SqliteSaver(tmp_path / "x.db") as saver:
        assert saver.sweeper is None
    with pytest.raises(ConfigError, match="sweep_interval must be a positive number"):
        InMemorySaver(sweep_interval=0)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_background_sweeper_applies_the_policy_until_close(
    tmp_path: Path, backend: str
) -> None:
    policy = Retention(ttl=0.2, grace=0)
    saver: BaseCheckpointSaver = (
        InMemorySaver(retention=policy, sweep_interval=0.05)
        if backend == "memory"
        else SqliteSaver(tmp_path / "bg.db", retention=policy, sweep_interval=0.05)
    )
    with saver:
        asyncio.run(Line(Driver(saver, "sync"), "t").steps(2))
        assert _wait_for(lambda: not saver.threads().items)
        sweeper = saver.sweeper
        assert sweeper is not None
        assert sweeper.rounds > 0
        assert sweeper.failures == 0
    assert not sweeper._thread.is_alive()


def test_the_background_sweeper_survives_a_failing_round(tmp_path: Path) -> None:
    """A round that raises (here: a thread's stored policy damaged by hand) is logged,
    and the next round tries again; once the row is repaired, the sweep goes on."""
    path = tmp_path / "bg.db"
    with SqliteSaver(path, retention=Retention(ttl=0.2, grace=0), sweep_interval=0.05) as saver:
        asyncio.run(Line(Driver(saver, "sync"), "t").steps(2))
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE tether_threads SET retention = '[1, 2'")
        sweeper = saver.sweeper
        assert sweeper is not None
        assert _wait_for(lambda: sweeper.failures >= 2)
        assert [r.thread_id for r in saver.threads()] == ["t"]
        with pytest.raises(StorageError, match="retention policy stored for thread 't'"):
            saver.sweep()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE tether_threads SET retention = NULL")
        assert _wait_for(lambda: not saver.threads().items)


# --- TTL batches bounded by rows, paced to a target time -------------------------------------


def test_ttl_batches_hold_at_most_200_checkpoints_a_large_thread_alone() -> None:
    from tether.lifecycle import Pace

    rows = [("a", 1, 80), ("b", 1, 80), ("c", 1, 80), ("big", 1, 900), ("d", 1, 1)]
    pace = Pace(None, 100)
    parts = []
    at = 0
    while at < len(rows):
        part, size, at = pace.take(rows, at)
        parts.append((part, size))
        pace.done(size, 1.0)  # unpaced: the limit stays
    assert parts == [
        ([("a", 1), ("b", 1)], 160),
        ([("c", 1)], 80),
        ([("big", 1)], 900),
        ([("d", 1)], 1),
    ]
    assert pace.take([], 0) == ([], 0, 0)
    assert Pace(None, 2).take([("a", 1, 1)] * 5, 1) == ([("a", 1), ("a", 1)], 2, 3)


def test_pace_moves_the_limit_towards_the_target_time() -> None:
    from tether.lifecycle import MAX_PACED_CHECKPOINTS, Pace

    pace = Pace(0.005, 10_000)
    pace.done(200, 0.020)  # 4x too slow: wants 50, halfway from 200
    assert pace.limit == 125
    for _ in range(20):
        pace.done(pace.limit, pace.limit / 10_000)  # 10,000 checkpoints a second: wants 50
    assert pace.limit == 50
    pace.done(50, 50 / 1e9)  # fast: grows, bounded
    assert pace.limit == MAX_PACED_CHECKPOINTS
    pace.done(1, 10.0)
    pace.done(1, 10.0)
    assert pace.limit >= 1
    for _ in range(40):
        pace.done(1, 10.0)
    assert pace.limit == 1
    pace.done(0, 1.0)  # nothing deleted (all skipped): no rate, no change
    assert pace.limit == 1


def _forty_each(saver: Any, threads: int = 30) -> None:
    from tether.checkpoint import empty_checkpoint
    from tether.ids import uuid6

    for t in range(threads):
        cfg: Any = make_config(f"t{t}")
        for i in range(40):
            ck = empty_checkpoint()
            ck["id"] = str(uuid6())
            ck["channel_values"] = {"step": i}
            ck["channel_versions"] = {"step": f"{i + 1:08d}"}
            cfg = saver.put(cfg, ck, {"step": i}, dict(ck["channel_versions"]))


def test_a_ttl_sweep_of_many_checkpoints_is_several_short_transactions(tmp_path: Path) -> None:
    """30 threads of 40 checkpoints: not one transaction of 1,200 deletions but batches
    of at most 200 (a backend that does not pace its sweep)."""
    saver = InMemorySaver(retention=Retention(ttl=60))
    assert saver._sweep_target is None
    _forty_each(saver)
    later = datetime.now(UTC) + timedelta(hours=1)
    report = saver.sweep(now=later, batch=100)
    assert (report.threads, report.checkpoints) == (30, 1200)
    assert report.batches == 6  # 5 threads of 40 each
    assert saver.threads().items == []


@pytest.mark.parametrize(
    ("target", "batch", "batches"),
    [
        # 5 threads (200), then the limit halves towards nothing: 2 threads, then 1 each
        (1e-9, 100, 1 + 1 + 23),
        # 5 threads, then the limit grows past the rest: 25 threads in one
        (1e9, 100, 2),
        # ... but never more than batch threads a transaction
        (1e9, 10, 4),
    ],
)
def test_sqlite_paces_ttl_batches_to_its_target_time(
    tmp_path: Path, target: float, batch: int, batches: int
) -> None:
    with SqliteSaver(tmp_path / "x.db", retention=Retention(ttl=60)) as saver:
        assert saver._sweep_target is not None  # SQLite paces by default
        saver._sweep_target = target
        _forty_each(saver)
        later = datetime.now(UTC) + timedelta(hours=1)
        dry = saver.sweep(now=later, batch=batch, dry_run=True)
        report = saver.sweep(now=later, batch=batch)
        assert (report.threads, report.checkpoints) == (30, 1200)
        assert (dry.threads, dry.checkpoints, dry.bytes) == (30, 1200, report.bytes)
        assert report.batches == batches
        assert saver.threads().items == []

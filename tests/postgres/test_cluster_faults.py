"""Server restarts on a throw-away cluster: writes and leases across them (#18, #18.7, S5.4).

Each test here stops the server of its own cluster (``cluster.py``: initdb in
a temporary directory, its own port), as a crash would (``pg_ctl stop -m
immediate``), and starts it again:

* during a write loop: every put either returned and reads back whole, or
  raised a ``StorageError`` or, while the server is down, ``StorageUnavailable``;
  no checkpoint is ever stored in part; the saver works again afterwards;
* under a held lease: the restart ends the lease's lock; the holder sees
  ``is_held()`` False, a new holder takes the lease and advances the thread,
  the old holder's next write raises ``LeaseLostError`` and stores nothing,
  and the thread stays one chain; also with four processes taking turns.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, TetherError, make_config
from tether.errors import LeaseLostError, StorageError, StorageUnavailable
from tether.ids import uuid6

from .cluster import Cluster, throwaway_cluster
from .conftest import fresh_schema
from .helpers import MODES, call
from .lease_harness import (
    Fleet,
    advance_elsewhere,
    held,
    history,
    leased,
    step,
    under_lease,
    wait_for,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

RESTARTS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with throwaway_cluster() as c:
        yield c


@pytest.fixture
def dsn(cluster: Cluster) -> str:
    """A fresh database on the cluster (started again if a failed test left it down)."""
    if not cluster.running():
        cluster.start()
    return cluster.create_database(f"t_{uuid.uuid4().hex[:12]}")


def set_up(dsn: str) -> str:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        saver.setup()
    return schema


# --- a write loop across restarts ---------------------------------------------------------


class WriteLoop:
    """Puts (and a task write after each) on thread ``t`` in a thread of its own, recorded."""

    def __init__(self, dsn: str, schema: str, mode: str) -> None:
        self.dsn, self.schema, self.mode = dsn, schema, mode
        self.expected: dict[str, dict[str, Any]] = {}  # checkpoint id -> its channel values
        self.returned: list[str] = []  # puts that returned
        self.written: dict[str, int] = {}  # checkpoint id -> step, for put_writes that returned
        self.failed: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()))
        self.crash: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive()
        assert self.crash is None, repr(self.crash)

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self.returned), len(self.failed)

    async def _run(self) -> None:
        saver = PostgresSaver.from_conn_string(
            self.dsn, schema=self.schema, pool_size=2, pool_timeout=3
        )
        try:
            async with saver:
                await self._loop(saver)
        except BaseException as exc:  # reported by stop()
            self.crash = exc

    async def _loop(self, saver: PostgresSaver) -> None:
        parent: dict[str, Any] = make_config("t")
        history: list[str] = []
        i = 0
        while not self._stop.is_set():
            history = [*history, f"message {i} " * 20]  # append-encoded once it is big
            values = {"i": i, "note": f"note {i} " * 100, "history": history}
            version = f"{i + 1:032}.0"
            cid = str(uuid6())
            cp = {
                "v": 4,
                "id": cid,
                "ts": "2026-12-03T00:00:00+00:00",
                "channel_values": values,
                "channel_versions": dict.fromkeys(values, version),
                "versions_seen": {},
                "updated_channels": sorted(values),
            }
            self.expected[cid] = values
            i += 1
            try:
                cfg = await call(
                    self.mode, saver, "put", parent, cp, {"step": i}, dict.fromkeys(values, version)
                )
            except TetherError as exc:
                with self._lock:
                    self.failed.append(exc)
                continue
            with self._lock:
                self.returned.append(cid)
            parent = cfg
            try:
                await call(self.mode, saver, "put_writes", cfg, [("i", i)], f"task-{i}")
            except TetherError as exc:
                with self._lock:
                    self.failed.append(exc)
                continue
            with self._lock:
                self.written[cid] = i


@pytest.mark.parametrize("mode", MODES)
def test_a_write_loop_across_server_restarts(mode: str, cluster: Cluster, dsn: str) -> None:
    schema = set_up(dsn)
    loop = WriteLoop(dsn, schema, mode)
    loop.start()
    try:
        for _ in range(RESTARTS):
            returned, failed = loop.counts()
            wait_for("puts to go through", lambda n=returned: loop.counts()[0] >= n + 5, 120)
            cluster.stop("immediate")
            # Start again only once a write has met the server down.
            wait_for("a write to fail", lambda n=failed: loop.counts()[1] > n, 120)
            cluster.start()
        returned, _ = loop.counts()
        wait_for("the saver to recover", lambda: loop.counts()[0] >= returned + 10, 120)
    finally:
        if not cluster.running():
            cluster.start()
        loop.stop()

    # Every failure is a storage error that says so (no driver exception, no other kind).
    assert len(loop.failed) >= RESTARTS
    assert all(isinstance(exc, StorageError | StorageUnavailable) for exc in loop.failed), (
        loop.failed
    )
    with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        # Every put that returned is stored and reads back whole.
        for cid in loop.returned:
            config = make_config("t")
            config["configurable"]["checkpoint_id"] = cid
            tup = saver.get_tuple(config)
            assert tup is not None, cid
            assert tup.checkpoint["channel_values"] == loop.expected[cid]
        # So is every checkpoint stored at all: a put that raised after its commit
        # may be there, whole; none is there in part.
        stored = list(saver.list(make_config("t")))
        assert {t.checkpoint["id"] for t in stored} >= set(loop.returned)
        for tup in stored:
            assert tup.checkpoint["channel_values"] == loop.expected[tup.checkpoint["id"]]
            step_ = loop.written.get(tup.checkpoint["id"])
            if step_ is not None:
                assert tup.pending_writes == [(f"task-{step_}", "i", step_)]


# --- leases across restarts ----------------------------------------------------------------


async def _not_held(mode: str, lease: Any) -> bool:
    """Whether the lease reads as lost; ``False`` while the saver cannot reach the server yet."""
    try:
        return not await held(mode, lease)
    except (StorageError, StorageUnavailable):
        return False


@pytest.mark.parametrize("mode", MODES)
async def test_a_restart_under_a_held_lease(mode: str, cluster: Cluster, dsn: str) -> None:
    schema = set_up(dsn)
    saver = PostgresSaver.from_conn_string(dsn, schema=schema, pool_size=3, pool_timeout=5)
    seen: dict[str, Any] = {}

    async def run(lease: Any) -> None:
        root = await step(mode, saver, None, 0, big=True)
        mine = seen["mine"] = await step(mode, saver, root, 1, big=True)
        assert await held(mode, lease)
        await asyncio.to_thread(cluster.restart, "immediate")

        deadline = time.monotonic() + 60
        while not await _not_held(mode, lease):
            assert time.monotonic() < deadline, "the lease still reads as held"
            await asyncio.sleep(0.05)
        seen["theirs"], parent = await asyncio.to_thread(advance_elsewhere, dsn, schema, "t")
        assert parent == mine["configurable"]["checkpoint_id"]
        with pytest.raises(LeaseLostError) as info:
            await step(mode, saver, mine, 2, big=True)
        assert (info.value.epoch, info.value.current_epoch) == (1, 2)
        with pytest.raises(LeaseLostError):
            await call(mode, saver, "put_writes", mine, [("n", 2)], "task-2")
        assert not await held(mode, lease)

    async with saver:
        with pytest.raises(LeaseLostError) as at_exit:
            await under_lease(mode, saver, "t", run)
        assert (at_exit.value.epoch, at_exit.value.current_epoch) == (1, 2)
        # The old holder takes the lease again and resumes from the new latest.
        async with leased(mode, saver, "t") as again:
            assert again.epoch == 3
            latest = await call(mode, saver, "get_tuple", make_config("t"))
            assert latest.config["configurable"]["checkpoint_id"] == seen["theirs"]
            await step(mode, saver, latest.config, 3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        h = history(conn, schema, "t")
    assert h.single_chain, h.forks
    assert len(h.parents) == 4  # root, mine, theirs, the resumed step; not the refused one


def test_many_holders_through_restarts_leave_one_chain(cluster: Cluster, dsn: str) -> None:
    """Four processes take turns on one thread while the server restarts under them."""
    schema = set_up(dsn)
    fleet = Fleet(dsn, schema, "t", 4)
    try:
        wait_for("the children to start", lambda: fleet.count("ready") == 4, 60)
        for _ in range(RESTARTS):
            puts, errors = fleet.count("put"), fleet.count("error")
            wait_for("the holders to advance", lambda n=puts: fleet.count("put") >= n + 10, 120)
            cluster.stop("immediate")
            wait_for(
                "the holders to meet the server down",
                lambda n=errors: fleet.count("error") > n,
                120,
            )
            cluster.start()
        puts = fleet.count("put")
        wait_for("the holders to recover", lambda: fleet.count("put") >= puts + 20, 180)
        fleet.stop()
    finally:
        if not cluster.running():
            cluster.start()
        fleet.kill()
    with psycopg.connect(dsn, autocommit=True) as conn:
        h = history(conn, schema, "t")
    print(
        f"restarts: {RESTARTS}, puts: {fleet.count('put')}, refused: "
        f"{fleet.count('lost-put') + fleet.count('lost-write')}, lost at exit: "
        f"{fleet.count('lost-exit')}, errors: {fleet.count('error')}, forks: {len(h.forks)}"
    )
    assert h.single_chain, h.forks
    # Every put a holder saw return is stored (a put that raised while the server
    # went down may be stored too: its commit can precede the lost reply).
    assert set(h.parents) >= {cid for cid, _ in fleet.puts}

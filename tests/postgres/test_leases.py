"""A lease is never lost silently (issue #18.7, SPEC S5.4): fencing, on a real server.

The lease's advisory lock ends when the server ends its session
(``pg_terminate_backend`` here, a restart in test_cluster_faults.py); the
holder is not told. These tests take the lease in this process, end its
session, let another process take the lease over and advance the thread, and
then check what the first holder sees: its writes refused with
``LeaseLostError`` and storing nothing, ``is_held()`` False, the block's exit
reporting the loss, and the thread still a single chain.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, make_config
from tether.errors import LeaseLostError, StorageError, StorageUnavailable, ThreadBusyError
from tether.serde import MsgpackSerializer

from .conftest import fresh_schema
from .helpers import MODES, call
from .lease_harness import (
    advance_elsewhere,
    check,
    end_lock_session,
    epoch_of,
    held,
    history,
    leased,
    row_counts,
    step,
    under,
    under_lease,
    wait_for,
)
from .test_modes import bouncer  # noqa: F401 -- the PgBouncer fixture

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_dsn: str) -> str:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
    return schema


def url_saver(dsn: str, schema: str, **kwargs: Any) -> PostgresSaver:
    """A saver with the default serializer (the other processes read what it writes)."""
    return PostgresSaver.from_conn_string(dsn, schema=schema, pool_size=3, **kwargs)


# --- the lease lost to a terminated session and taken over ------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_holder_whose_lease_was_taken_over_writes_nothing(
    mode: str, pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    saver = url_saver(pg_dsn, store)
    async with saver:
        root = await step(mode, saver, None, 0)
        seen: dict[str, Any] = {}

        async def run(lease: Any) -> None:
            seen["lease"] = lease
            assert lease.epoch == 1
            assert await held(mode, lease)
            await check(mode, lease)
            mine = seen["mine"] = await step(mode, saver, root, 1, big=True)
            await call(mode, saver, "put_writes", mine, [("n", 1)], "task-1")

            end_lock_session(admin, store, "t")
            assert not await held(mode, lease)
            seen["theirs"], parent = advance_elsewhere(pg_dsn, store, "t")
            assert parent == mine["configurable"]["checkpoint_id"]
            assert epoch_of(admin, store, "t") == 2

            before = row_counts(admin, store)
            with pytest.raises(LeaseLostError) as info:
                await step(mode, saver, mine, 2, big=True)
            assert (info.value.epoch, info.value.current_epoch) == (1, 2)
            assert info.value.thread_id == "t"
            assert "nothing was written" in str(info.value)
            assert isinstance(info.value, ThreadBusyError)
            with pytest.raises(LeaseLostError):
                await call(mode, saver, "put_writes", mine, [("n", 2)], "task-2")
            with pytest.raises(LeaseLostError):  # special writes (the upsert half) too
                await call(mode, saver, "put_writes", mine, [("__interrupt__", 1)], "task-3")
            assert row_counts(admin, store) == before  # no checkpoint, blob or write row
            assert not await held(mode, lease)
            with pytest.raises(LeaseLostError, match="taken it over since"):
                await check(mode, lease)

        with pytest.raises(LeaseLostError) as at_exit:
            await under_lease(mode, saver, "t", run)
        lease, theirs = seen["lease"], seen["theirs"]
        assert (at_exit.value.epoch, at_exit.value.current_epoch) == (1, 2)
        assert "another run has taken it over since (epoch 2)" in str(at_exit.value)
        assert not await held(mode, lease)  # ended with its block

        # The thread is one chain: root -> mine -> theirs; the refused step is nowhere.
        h = history(admin, store, "t")
        assert h.single_chain, h.forks
        ids = [cfg["configurable"]["checkpoint_id"] for cfg in (root, seen["mine"])]
        assert h.parents == {ids[0]: None, ids[1]: ids[0], theirs: ids[1]}
        latest = await call(mode, saver, "get_tuple", make_config("t"))
        assert latest.config["configurable"]["checkpoint_id"] == theirs
        assert latest.pending_writes[0][1:] == (
            "writer",
            latest.checkpoint["channel_values"]["writer"],
        )

        # Taking the lease again continues from there.
        async with leased(mode, saver, "t") as again:
            assert again.epoch == 3
            await step(mode, saver, latest.config, 3)
        assert history(admin, store, "t").single_chain


@pytest.mark.parametrize("mode", MODES)
async def test_a_lost_lock_without_a_takeover_keeps_its_writes_and_reports_the_loss(
    mode: str, pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    """Until another run takes the lease, the holder is still the only writer: it may write."""
    saver = url_saver(pg_dsn, store)
    async with saver:
        ids: list[str] = []

        async def run(lease: Any) -> None:
            first = await step(mode, saver, None, 0)
            end_lock_session(admin, store, "t")
            assert not await held(mode, lease)
            with pytest.raises(LeaseLostError, match="no other run has taken it yet"):
                await check(mode, lease)
            second = await step(mode, saver, first, 1)  # epoch still 1: accepted
            ids.extend(cfg["configurable"]["checkpoint_id"] for cfg in (first, second))

        with pytest.raises(LeaseLostError) as at_exit:
            await under_lease(mode, saver, "t", run)
        assert (at_exit.value.epoch, at_exit.value.current_epoch) == (1, 1)
        assert "every write this saver made under it stands" in str(at_exit.value)
        assert history(admin, store, "t").parents == {ids[0]: None, ids[1]: ids[0]}


@pytest.mark.parametrize("mode", MODES)
async def test_an_error_leaving_the_block_is_not_replaced(
    mode: str, pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    saver = url_saver(pg_dsn, store)
    async with saver:

        async def run(lease: Any) -> None:
            end_lock_session(admin, store, "t")
            raise KeyError("the caller's own")

        with pytest.raises(KeyError, match="the caller's own"):
            await under_lease(mode, saver, "t", run)
        async with leased(mode, saver, "t") as lease:  # released: the lease is free again
            assert lease.epoch == 2


@pytest.mark.parametrize("mode", MODES)
async def test_epochs_count_the_leases_of_a_thread(
    mode: str, pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    saver = url_saver(pg_dsn, store)
    async with saver:
        for expected in (1, 2, 3):
            async with leased(mode, saver, "t") as lease:
                assert lease.epoch == expected
                assert await held(mode, lease)
                assert "epoch=" in repr(lease)
                await step(mode, saver, None, expected)
            assert not await held(mode, lease)
            with pytest.raises(LeaseLostError, match="released when its block ended"):
                await check(mode, lease)
        # Deleting the thread keeps its epoch: a new lease must never reuse an old one.
        await call(mode, saver, "delete_thread", "t")
        async with leased(mode, saver, "t") as lease:
            assert lease.epoch == 4
        async with leased(mode, saver, "u") as other:
            assert other.epoch == 1
    assert epoch_of(admin, store, "t") == 4


def test_the_takeover_waits_for_a_stale_put_in_flight(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    """A put that read the old epoch commits before the new holder's epoch bump, never after.

    The stale put is held mid-statement by a row lock this test takes on a blob
    row it upserts; by then it holds the lease row FOR SHARE. The lease's
    session is ended and another saver takes the lease: its epoch bump must
    wait for the put, and its read of the latest checkpoint must then see it.
    Without the share lock the bump goes through at once, the new holder reads
    the older checkpoint, and the put lands next to its child: a fork.
    """
    with (
        url_saver(pg_dsn, store) as a,
        url_saver(pg_dsn, store) as b,
        pytest.raises(LeaseLostError),
    ):
        under(a.lease("t"), lambda lease: _race(pg_dsn, store, admin, a, b))
    h = history(admin, store, "t")
    assert h.parents == {"r": None, "s": "r", "z": "s"}


def test_a_taker_whose_lock_ends_before_its_epoch_bump_takes_nothing(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    """The epoch only moves under the lock: a late bump cannot outrank the next holder's.

    Taker A's bump is held on the lease row (this test locks it), A's lock
    session is ended meanwhile and B takes the lock, its bump queued behind
    A's. When the row is released A's bump must find A's lock gone and change
    nothing (A gets LeaseLostError), and B's lease must be the current one.
    Without that check A's bump lands too and B holds a lease whose epoch is
    stale: every write of B refused.
    """
    with url_saver(pg_dsn, store) as a, url_saver(pg_dsn, store) as b:
        under(a.lease("t"), lambda lease: None)  # epoch 1: the row exists
        results: dict[str, Any] = {}
        blocker = psycopg.connect(pg_dsn)
        try:
            blocker.execute(
                f'SELECT 1 FROM "{store}".tether_leases WHERE thread_id = %s FOR UPDATE', ("t",)
            )
            blocker_pid = blocker.info.backend_pid

            def take_a() -> None:
                try:
                    results["a"] = under(a.lease("t"), lambda lease: lease.epoch)
                except LeaseLostError as exc:
                    results["a"] = exc

            def take_b() -> None:
                try:
                    with b.lease("t", wait=True, timeout=60) as lease:
                        results["b"] = lease.epoch
                        taker_a.join(timeout=60)
                        results["b held"] = lease.is_held()
                except LeaseLostError as exc:
                    results["b exit"] = exc

            taker_a = threading.Thread(target=take_a)
            taker_a.start()
            wait_for("A's epoch bump to wait", lambda: bool(_blocked_by(admin, blocker_pid)))
            bump_a = _blocked_by(admin, blocker_pid)[0]
            end_lock_session(admin, store, "t")
            taker_b = threading.Thread(target=take_b)
            taker_b.start()
            # B queues behind A's bump (the first waiter holds the row's tuple lock).
            wait_for(
                "B's epoch bump to wait",
                lambda: bool(
                    set(_blocked_by(admin, bump_a) + _blocked_by(admin, blocker_pid)) - {bump_a}
                ),
            )
        finally:
            blocker.commit()
            blocker.close()
        taker_a.join(timeout=60)
        taker_b.join(timeout=60)
    assert isinstance(results["a"], LeaseLostError), results
    assert "lost while it was being taken" in str(results["a"])
    assert results["b"] == 2
    assert results["b held"] is True
    assert "b exit" not in results
    assert epoch_of(admin, store, "t") == 2


def _race(
    dsn: str, store: str, admin: psycopg.Connection[Any], a: PostgresSaver, b: PostgresSaver
) -> None:
    """The body of the stale holder ``a``'s lease block (see the test above)."""
    root = a.put(
        make_config("t"),
        _cp("r", {"note": "n" * 1000, "k": 0}, "1"),
        {"step": 0},
        {"note": "1", "k": "1"},
    )
    blocker = psycopg.connect(dsn)
    outcome: dict[str, Any] = {}
    try:
        blocker.execute(
            f'SELECT 1 FROM "{store}".tether_blobs WHERE channel = %s FOR UPDATE', ("note",)
        )
        blocker_pid = blocker.info.backend_pid

        def stale_put() -> None:
            # The same note version: the blob upsert meets the locked row.
            cp = _cp("s", {"note": "n" * 1000, "k": 1}, "1", k="2")
            outcome["stale"] = a.put(root, cp, {"step": 1}, {"note": "1", "k": "2"})

        writer = threading.Thread(target=stale_put)
        writer.start()
        wait_for("the stale put to block", lambda: bool(_blocked_by(admin, blocker_pid)))
        put_pid = _blocked_by(admin, blocker_pid)[0]

        end_lock_session(admin, store, "t")

        def take_over() -> None:
            with b.lease("t", wait=True, timeout=60) as theirs:
                latest = b.get_tuple(make_config("t"))
                assert latest is not None
                outcome["read"] = latest.config["configurable"]["checkpoint_id"]
                cp = _cp("z", {"note": "n" * 1000, "k": 2}, "1", k="3")
                b.put(latest.config, cp, {"step": 2}, {"k": "3"})
                outcome["epoch"] = theirs.epoch

        taker = threading.Thread(target=take_over)
        taker.start()
        wait_for(
            "the epoch bump to wait for the stale put", lambda: bool(_blocked_by(admin, put_pid))
        )
        assert "read" not in outcome
    finally:
        blocker.commit()
        blocker.close()
    writer.join(timeout=60)
    taker.join(timeout=60)
    assert outcome["stale"]["configurable"]["checkpoint_id"] == "s"  # it committed...
    assert outcome["read"] == "s"  # ...before the takeover, which built on it
    assert outcome["epoch"] == 2
    with pytest.raises(LeaseLostError):  # and nothing of the stale holder's after it
        a.put(outcome["stale"], _cp("x", {"k": 9}, "1", k="9"), {"step": 3}, {"k": "9"})


def _cp(cid: str, values: dict[str, Any], version: str, **versions: str) -> Any:
    channel_versions = dict.fromkeys(values, version) | versions
    return {
        "v": 4,
        "id": cid,
        "ts": "2026-12-03T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": channel_versions,
        "versions_seen": {},
        "updated_channels": sorted(values),
    }


async def _nothing(lease: Any) -> None:
    pass


def _blocked_by(admin: psycopg.Connection[Any], pid: int) -> list[int]:
    """The server processes waiting for a lock ``pid`` holds."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
    ).fetchall()
    return [int(r[0]) for r in rows]


# --- one registry per saver: both cores, clones ------------------------------------------


async def test_a_sync_lease_fences_async_writes_and_clones(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    saver = url_saver(pg_dsn, store, serde=MsgpackSerializer())  # it has with_allowlist
    async with saver:
        clone = saver.with_allowlist([("decimal", "Decimal")])
        assert clone is not saver
        root = await step("async", saver, None, 0)
        lease = saver.lease("t")
        lease.__enter__()
        try:
            with pytest.raises(ThreadBusyError, match="already leased by this saver"):
                await under_lease("async", clone, "t", _nothing)
            mine = await step("async", clone, root, 1)  # through the async core
            end_lock_session(admin, store, "t")
            advance_elsewhere(pg_dsn, store, "t")
            before = row_counts(admin, store)
            with pytest.raises(LeaseLostError):
                await step("async", saver, mine, 2)
            with pytest.raises(LeaseLostError):
                await step("sync", clone, mine, 2)
            with pytest.raises(LeaseLostError):
                await clone.aput_writes(mine, [("n", 2)], "task")
            assert row_counts(admin, store) == before
        finally:
            with pytest.raises(LeaseLostError):
                lease.__exit__(None, None, None)
        assert history(admin, store, "t").single_chain


async def test_an_async_lease_on_a_sync_pool_is_fenced(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    """A saver built from a sync pool serves alease from its sync core, in worker threads."""
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=3) as pool:
        saver = PostgresSaver(pool, schema=store)

        async def run(lease: Any) -> None:
            assert lease.epoch == 1
            assert await lease.is_held()
            await lease.check()
            root = await step("async", saver, None, 0)
            end_lock_session(admin, store, "t")
            assert not await lease.is_held()
            advance_elsewhere(pg_dsn, store, "t")
            with pytest.raises(LeaseLostError):
                await step("async", saver, root, 1)
            with pytest.raises(LeaseLostError):
                await lease.check()

        with pytest.raises(LeaseLostError) as at_exit:
            await under_lease("async", saver, "t", run)
        assert at_exit.value.current_epoch == 2

        async def fails(lease: Any) -> None:
            raise KeyError("the caller's own")

        with pytest.raises(KeyError):  # an error leaving the block goes through as it is
            await under_lease("async", saver, "t", fails)
    assert history(admin, store, "t").single_chain


async def test_unleased_threads_and_other_savers_are_not_fenced(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    """Fencing covers the leased thread of the saver holding the lease, nothing else."""
    with url_saver(pg_dsn, store) as a, url_saver(pg_dsn, store) as other:

        def run(lease: Any) -> None:
            end_lock_session(admin, store, "t")
            advance_elsewhere(pg_dsn, store, "t")
            a.put(make_config("u"), _cp("u1", {"k": 1}, "1"), {"step": 0}, {"k": "1"})
            other.put(make_config("t"), _cp("o1", {"k": 1}, "1"), {"step": 0}, {"k": "1"})

        with pytest.raises(LeaseLostError):
            under(a.lease("t"), run)
        assert a.get_tuple(make_config("u")) is not None


# --- a caller's single connection: the session lock ---------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_lease_on_a_single_connection(
    mode: str, pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    if mode == "sync":
        conn: Any = psycopg.connect(pg_dsn, autocommit=True)
    else:
        conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        saver = PostgresSaver(conn, schema=store)
        async with leased(mode, saver, "t") as lease:
            assert lease.epoch == 1
            assert await held(mode, lease)
            await step(mode, saver, None, 0)
            with url_saver(pg_dsn, store) as other, pytest.raises(ThreadBusyError):
                under(other.lease("t"), lambda _: None)
        async with leased(mode, saver, "t") as lease:
            assert lease.epoch == 2

        # The session holding the lock dies (the saver's own connection with it).
        async def run(lease: Any) -> None:
            end_lock_session(admin, store, "t")
            with pytest.raises((StorageError, StorageUnavailable)):
                await step(mode, saver, None, 1)
            assert not await held(mode, lease)

        with pytest.raises(LeaseLostError):
            await under_lease(mode, saver, "t", run)
    finally:
        if mode == "sync":
            conn.close()
        else:
            await conn.close()


# --- behind PgBouncer in transaction mode ---------------------------------------------


def test_a_lease_behind_pgbouncer_is_fenced(
    bouncer: str,  # noqa: F811 -- the fixture imported above
    store: str,
    admin: psycopg.Connection[Any],
) -> None:
    """The lock's transaction pins one server session; ending it ends the lease, visibly."""
    saver = PostgresSaver.from_conn_string(bouncer, schema=store, prepare_threshold=None)

    def run(lease: Any) -> None:
        assert lease.is_held()
        root = saver.put(make_config("t"), _cp("a", {"k": 1}, "1"), {"step": 0}, {"k": "1"})
        saver.put_writes(root, [("k", 1)], "task")
        end_lock_session(admin, store, "t")
        assert not lease.is_held()
        advance_elsewhere(bouncer, store, "t", TETHER_CHILD_PREPARE="none")
        with pytest.raises(LeaseLostError):
            saver.put(root, _cp("b", {"k": 2}, "2"), {"step": 1}, {"k": "2"})
        with pytest.raises(LeaseLostError):
            saver.put_writes(root, [("k", 2)], "task-2")

    with saver, pytest.raises(LeaseLostError) as at_exit:
        under(saver.lease("t"), run)
    assert (at_exit.value.epoch, at_exit.value.current_epoch) == (1, 2)
    assert history(admin, store, "t").single_chain
    again = PostgresSaver.from_conn_string(bouncer, schema=store, prepare_threshold=None)
    with again, again.lease("t") as lease:  # and the lease can be taken again
        assert lease.epoch == 3


# --- idle_in_transaction_session_timeout ends a lease -------------------------------------


def test_an_idle_in_transaction_timeout_ends_the_lease_visibly(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    timeout = {"options": "-c idle_in_transaction_session_timeout=300"}
    with url_saver(pg_dsn, store, connect_kwargs=timeout) as saver:

        def run(lease: Any) -> None:
            root = saver.put(make_config("t"), _cp("a", {"k": 1}, "1"), {"step": 0}, {"k": "1"})
            wait_for("the server to end the idle lease", lambda: not lease.is_held())
            advance_elsewhere(pg_dsn, store, "t")
            with pytest.raises(LeaseLostError):
                saver.put(root, _cp("b", {"k": 2}, "2"), {"step": 1}, {"k": "2"})

        with pytest.raises(LeaseLostError) as at_exit:
            under(saver.lease("t"), run)
        assert at_exit.value.current_epoch == 2
    assert history(admin, store, "t").single_chain


# --- the LangGraph drop-in ---------------------------------------------------------------


def test_the_langgraph_drop_in_lease_is_fenced(
    pg_dsn: str, store: str, admin: psycopg.Connection[Any]
) -> None:
    pytest.importorskip("langgraph")
    from tether.langgraph import PostgresSaver as DropIn

    def run(lease: Any) -> None:
        assert lease.epoch == 1
        assert lease.is_held()
        root = saver.put(make_config("t"), _cp("a", {"k": 1}, "1"), {"step": 0}, {"k": "1"})
        end_lock_session(admin, store, "t")
        advance_elsewhere(pg_dsn, store, "t")
        with pytest.raises(LeaseLostError):
            saver.put(root, _cp("b", {"k": 2}, "2"), {"step": 1}, {"k": "2"})

    with DropIn.from_conn_string(pg_dsn, schema=store) as saver, pytest.raises(LeaseLostError):
        under(saver.lease("t"), run)
    assert history(admin, store, "t").single_chain

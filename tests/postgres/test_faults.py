"""Faults from the real server: a connection killed mid-put, statement_timeout.

A put is held half way by a row lock: an open transaction of the test has
inserted (not committed) a checkpoint row with the key the put writes, so the
put's statement has inserted its blobs and waits on that row. The test then
terminates the saver's backend with ``pg_terminate_backend``, as a failover or
an administrator would.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, StorageTimeout, StorageUnavailable, make_config
from tether.errors import TetherError

from .conftest import PlainSerializer, fresh_schema
from .helpers import call, checkpoint

pytestmark = pytest.mark.postgres

VALUES = {"doc": "d" * 3000, "n": 1}
VERSIONS = {"doc": "1", "n": "1"}


@pytest.fixture
def schema_ready(pg_dsn: str) -> str:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
    return schema


class Blocker:
    """An open transaction holding the key of checkpoint ``cid`` (uncommitted)."""

    def __init__(self, dsn: str, schema: str, thread: str, cid: str) -> None:
        self.conn = psycopg.connect(dsn)
        self.conn.execute(
            f'INSERT INTO "{schema}".tether_checkpoints (thread_id, checkpoint_ns, checkpoint_id, '
            "checkpoint) VALUES (%s, '', %s, '{}')",
            (thread, cid),
        )

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()


@pytest.fixture
def blockers() -> Iterator[list[Blocker]]:
    made: list[Blocker] = []
    yield made
    for b in made:
        b.release()


def waiting_put(admin: psycopg.Connection[Any], *, not_in: set[int]) -> int:
    """The pid of a backend whose put waits on a lock (and is not one of ``not_in``)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query LIKE %s AND pid <> pg_backend_pid()",
            ("%WITH blobs AS%",),
        ).fetchall()
        pids = {r[0] for r in rows} - not_in
        if pids:
            return pids.pop()
        time.sleep(0.02)
    raise AssertionError("the put never reached its lock wait")


def terminate(admin: psycopg.Connection[Any], pid: int) -> None:
    row = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
    assert row == (True,)


def visible(admin: psycopg.Connection[Any], schema: str, thread: str) -> tuple[int, int]:
    q = f'"{schema}"'
    row = admin.execute(
        f"SELECT (SELECT count(*) FROM {q}.tether_checkpoints WHERE thread_id = %(t)s), "
        f"(SELECT count(*) FROM {q}.tether_blobs WHERE thread_id = %(t)s)",
        {"t": thread},
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class Background:
    """Run one saver call in the background (a thread, or a task on the loop) and join it."""

    def __init__(self, mode: str, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.mode = mode
        if mode == "sync":
            self.thread = threading.Thread(target=self._run, args=(fn,))
            self.thread.start()
        else:
            self.task = asyncio.ensure_future(fn())

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc

    async def join(self) -> Any:
        if self.mode == "sync":
            await asyncio.to_thread(self.thread.join, 60)
            if self.error is not None:
                raise self.error
            return self.result
        return await asyncio.wait_for(self.task, 60)


async def off_loop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Blocking admin work without stalling an async put on the loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def _put(mode: str, saver: PostgresSaver, cp: Any) -> Callable[[], Any]:
    if mode == "sync":
        return lambda: saver.put(make_config("t"), cp, {"source": "input"}, VERSIONS)
    return lambda: saver.aput(make_config("t"), cp, {"source": "input"}, VERSIONS)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_killed_mid_put_raises_unavailable_and_the_pool_recovers(
    mode: str,
    pg_dsn: str,
    schema_ready: str,
    admin: psycopg.Connection[Any],
    blockers: list[Blocker],
) -> None:
    schema = schema_ready
    saver = PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, pool_size=2, serde=PlainSerializer(), inline_primitives=True
    )
    async with saver:
        cp = checkpoint(VALUES, VERSIONS)
        blockers.append(Blocker(pg_dsn, schema, "t", cp["id"]))
        job = Background(mode, _put(mode, saver, cp))
        # The put is idempotent, so the pool runs it once more on a fresh connection:
        # kill that one too.
        first = await off_loop(waiting_put, admin, not_in=set())
        await off_loop(terminate, admin, first)
        second = await off_loop(waiting_put, admin, not_in={first})
        await off_loop(terminate, admin, second)
        with pytest.raises(StorageUnavailable, match=f"put of checkpoint {cp['id']}") as info:
            await job.join()
        assert "retry" in str(info.value)
        assert isinstance(info.value.__cause__, psycopg.OperationalError)
        blockers[0].release()
        # Nothing of the killed put is visible: not its checkpoint, not its blobs.
        assert visible(admin, schema, "t") == (0, 0)
        assert await _call(mode, saver, "get_tuple", make_config("t")) is None
        # The pool replaced the broken connections: the next calls just work.
        cfg = await _call(mode, saver, "put", make_config("t"), cp, {"source": "input"}, VERSIONS)
        tup = await _call(mode, saver, "get_tuple", cfg)
        assert tup.checkpoint["channel_values"] == VALUES
        assert visible(admin, schema, "t") == (1, 1)


async def _call(mode: str, saver: PostgresSaver, name: str, *args: Any) -> Any:
    if mode == "sync":
        return await asyncio.to_thread(getattr(saver, name), *args)
    return await getattr(saver, "a" + name)(*args)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_one_lost_connection_is_retried_transparently(
    mode: str,
    pg_dsn: str,
    schema_ready: str,
    admin: psycopg.Connection[Any],
    blockers: list[Blocker],
) -> None:
    schema = schema_ready
    saver = PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, pool_size=2, serde=PlainSerializer(), inline_primitives=True
    )
    async with saver:
        cp = checkpoint(VALUES, VERSIONS)
        blockers.append(Blocker(pg_dsn, schema, "t", cp["id"]))
        job = Background(mode, _put(mode, saver, cp))
        first = await off_loop(waiting_put, admin, not_in=set())
        await off_loop(terminate, admin, first)
        # The retry waits on the same row; let it through.
        await off_loop(waiting_put, admin, not_in={first})
        blockers[0].release()
        cfg = await job.join()
        assert cfg["configurable"]["checkpoint_id"] == cp["id"]
        tup = await _call(mode, saver, "get_tuple", make_config("t"))
        assert tup.checkpoint["channel_values"] == VALUES
        assert visible(admin, schema, "t") == (1, 1)


async def test_killed_on_a_plain_connection_raises_unavailable(
    pg_dsn: str, schema_ready: str, admin: psycopg.Connection[Any], blockers: list[Blocker]
) -> None:
    """A caller's single connection is not replaced (it is theirs): the error says so."""
    schema = schema_ready
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        saver = PostgresSaver(conn, schema=schema, serde=PlainSerializer(), inline_primitives=True)
        cp = checkpoint(VALUES, VERSIONS)
        blockers.append(Blocker(pg_dsn, schema, "t", cp["id"]))
        job = Background("sync", _put("sync", saver, cp))
        pid = await off_loop(waiting_put, admin, not_in=set())
        await off_loop(terminate, admin, pid)
        with pytest.raises(StorageUnavailable):
            await job.join()
        blockers[0].release()
        assert visible(admin, schema, "t") == (0, 0)
        with pytest.raises(StorageUnavailable, match="connection"):
            saver.get_tuple(make_config("t"))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_statement_timeout_surfaces_as_storage_timeout(
    mode: str,
    pg_dsn: str,
    schema_ready: str,
    admin: psycopg.Connection[Any],
    blockers: list[Blocker],
) -> None:
    schema = schema_ready
    saver = PostgresSaver.from_conn_string(
        pg_dsn,
        schema=schema,
        pool_size=2,
        statement_timeout=0.3,
        serde=PlainSerializer(),
        inline_primitives=True,
    )
    async with saver:
        cp = checkpoint(VALUES, VERSIONS)
        blockers.append(Blocker(pg_dsn, schema, "t", cp["id"]))
        with pytest.raises(StorageTimeout, match="statement_timeout") as info:
            await _call(mode, saver, "put", make_config("t"), cp, {}, VERSIONS)
        assert isinstance(info.value.__cause__, psycopg.errors.QueryCanceled)
        blockers[0].release()
        assert visible(admin, schema, "t") == (0, 0)
        # the same saver goes on
        cfg = await _call(mode, saver, "put", make_config("t"), cp, {}, VERSIONS)
        tup = await _call(mode, saver, "get_tuple", cfg)
        assert tup.checkpoint["channel_values"] == VALUES


def test_bad_statement_timeout_is_a_config_error(pg_dsn: str) -> None:
    for bad in (0, -1, "1", True):
        with pytest.raises(TetherError, match="statement_timeout"):
            PostgresSaver.from_conn_string(pg_dsn, statement_timeout=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_pool_whose_connections_all_died_recovers_on_the_next_call(
    mode: str, pg_dsn: str, schema_ready: str, admin: psycopg.Connection[Any]
) -> None:
    """A server restart kills every pooled connection; the next call still just works."""
    saver = PostgresSaver.from_conn_string(
        pg_dsn,
        schema=schema_ready,
        pool_size=4,
        min_size=4,
        serde=PlainSerializer(),
        inline_primitives=True,
    )
    async with saver:
        cp = checkpoint(VALUES, VERSIONS)
        cfg = await _call(mode, saver, "put", make_config("t"), cp, {"source": "input"}, VERSIONS)
        if mode == "sync":
            pool: Any = saver._res.owned_sync
        else:
            pool = saver._res.loops.pool(asyncio.get_running_loop())
        assert pool is not None
        if mode == "sync":
            pool.wait()
        else:
            await pool.wait()
        pids = {
            r[0]
            for r in admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
        }
        assert len(pids) >= 4
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        tup = await _call(mode, saver, "get_tuple", cfg)
        assert tup.checkpoint["channel_values"] == VALUES


# --- a DSN that cannot work -----------------------------------------------------------


def _dsn_with_db(dsn: str, dbname: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, dbname=dbname)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_wrong_database_name_fails_at_once_with_the_servers_reason(
    mode: str, pg_dsn: str
) -> None:
    """Not "no connection free in time" after pool_timeout: the pool logs, the caller waited."""
    bad = _dsn_with_db(pg_dsn, f"missing_{fresh_schema()}")
    saver = PostgresSaver.from_conn_string(bad, pool_timeout=30)
    t0 = time.monotonic()
    with pytest.raises(StorageUnavailable, match="does not exist") as info:
        await call(mode, saver, "get_tuple", make_config("t"))
    assert time.monotonic() - t0 < 10
    assert "check the database name, user and password" in str(info.value)
    assert "pool_size" not in str(info.value)
    saver.close()
    await saver.aclose()


def test_a_database_dropped_under_a_pool_names_the_cause(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """The pool's connections die and it cannot make new ones: the server's reason.

    Not "no connection free in time; raise pool_size", which is what the
    pool's timeout said before the saver asked the server why.
    """
    name = f"gone_{fresh_schema()}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with PostgresSaver.from_conn_string(
            _dsn_with_db(pg_dsn, name),
            pool_timeout=2,
            serde=PlainSerializer(),
            inline_primitives=True,
        ) as saver:
            saver.setup()
            assert saver.get_tuple(make_config("t")) is None
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            with pytest.raises(StorageUnavailable, match="does not exist") as info:
                saver.get_tuple(make_config("t"))
            assert "pool_size" not in str(info.value)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

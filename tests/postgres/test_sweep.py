"""Sweep on Postgres (#15): leases, writers in progress, one sweeper at a time, the migration,
and the reference-model property of tests/test_lifecycle.py on the real server."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from tether import PostgresSaver
from tether.backends.postgres import _schema
from tether.lifecycle import Retention
from tether.testing._driver import Driver, Line

from ..sweep_crash import check_whole_or_gone, kill_mid_sweep, populate
from ..test_lifecycle import _check_one, _stores
from .conftest import fresh_schema, url_saver

LATER = datetime.now(UTC) + timedelta(days=30)


def _steps(saver: PostgresSaver, thread_id: str, n: int = 2) -> None:
    asyncio.run(Line(Driver(saver, "sync"), thread_id).steps(n))


def test_a_leased_thread_is_never_swept(pg_dsn: str) -> None:
    with url_saver(pg_dsn, retention=Retention(ttl=60, keep_last=1)) as saver:
        for tid in ("leased", "free"):
            _steps(saver, tid, 3)
        with saver.lease("leased"):
            report = saver.sweep(now=LATER)
            # skipped twice: by the TTL, then by keep_last
            assert (report.threads, report.thread_ids, report.skipped) == (1, ["free"], 2)
            assert len(list(saver.list({"configurable": {"thread_id": "leased"}}))) == 3
        report = saver.sweep(now=LATER)
        assert report.thread_ids == ["leased"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dry_run_does_not_count_a_leased_thread(pg_dsn: str, mode: str) -> None:
    """Its prune phase too: a leased thread with checkpoints keep_last would drop is
    skipped by the dry run as by the sweep, and the two reports agree."""
    fields = ("threads", "checkpoints", "bytes", "pruned_threads", "skipped", "thread_ids")

    def sweep(saver: PostgresSaver, **kwargs: Any) -> dict[str, Any]:
        if mode == "sync":
            report = saver.sweep(now=LATER, **kwargs)
        else:
            report = asyncio.run(saver.asweep(now=LATER, **kwargs))
        return {f: getattr(report, f) for f in fields}

    with url_saver(pg_dsn, fresh_schema(), retention=Retention(keep_last=1)) as saver:
        for tid in ("leased", "free"):
            _steps(saver, tid, 3)
        with saver.lease("leased"):
            dry = sweep(saver, dry_run=True)
            assert (dry["pruned_threads"], dry["checkpoints"], dry["skipped"]) == (1, 2, 1)
            assert sweep(saver) == dry
        assert len(list(saver.list({"configurable": {"thread_id": "leased"}}))) == 3
        assert sweep(saver, dry_run=True)["pruned_threads"] == 1


def test_a_sweep_skips_a_thread_whose_put_is_in_progress_instead_of_waiting(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """A put or put_writes locks the thread's index row first: the sweep leaves that
    thread to the next sweep (SKIP LOCKED), so neither waits for the other."""
    schema = fresh_schema()
    with url_saver(pg_dsn, schema, retention=Retention(ttl=60)) as saver:
        _steps(saver, "busy")
        _steps(saver, "idle")
        with psycopg.connect(pg_dsn) as writer:  # a transaction, as a put's
            writer.execute(
                f'SELECT 1 FROM "{schema}".tether_threads WHERE thread_id = %s FOR UPDATE',
                ("busy",),
            )
            started = time.monotonic()
            report = saver.sweep(now=LATER)
            assert time.monotonic() - started < 5
            assert (report.thread_ids, report.skipped) == (["idle"], 1)
            writer.rollback()
        assert saver.sweep(now=LATER).thread_ids == ["busy"]


def test_one_sweeper_per_schema_at_a_time(pg_dsn: str) -> None:
    schema = fresh_schema()
    with url_saver(pg_dsn, schema) as one, url_saver(pg_dsn, schema) as two:
        with one.sweep_lock() as mine:
            assert mine
            with two.sweep_lock() as theirs:
                assert not theirs
        with two.sweep_lock() as theirs:
            assert theirs
        # Another schema is another sweeper.
        with url_saver(pg_dsn) as other, one.sweep_lock() as mine, other.sweep_lock() as also:
            assert mine
            assert also


def test_the_sweep_lock_is_released_when_its_holder_dies(pg_dsn: str) -> None:
    schema = fresh_schema()
    with url_saver(pg_dsn, schema) as one, url_saver(pg_dsn, schema) as two:
        held = threading.Event()
        done = threading.Event()

        def hold() -> None:
            with one.sweep_lock() as mine:
                assert mine
                held.set()
                done.wait(10)

        worker = threading.Thread(target=hold)
        worker.start()
        held.wait(10)
        with two.sweep_lock() as theirs:
            assert not theirs
        # The server ends the holder's session (what a crash of its process does).
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                "WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()"
                " AND objid = (hashtextextended(%s, 0) & 4294967295)::oid",
                (f"tether.sweep:{schema}",),
            )
        with two.sweep_lock() as theirs:
            assert theirs
        done.set()
        worker.join(10)


def test_a_store_before_the_retention_column_gets_it_on_setup(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    version = 1 + [m.name for m in _schema.MIGRATIONS].index("thread retention")
    with url_saver(pg_dsn, schema) as saver:
        _steps(saver, "t")
    admin.execute(f'ALTER TABLE "{schema}".tether_threads DROP COLUMN retention')
    admin.execute(f'DELETE FROM "{schema}".tether_migrations WHERE v >= %s', (version,))
    with url_saver(pg_dsn, schema) as saver:
        saver.set_retention("t", Retention(keep_last=3))
        assert saver.get_retention("t") == Retention(keep_last=3)
        assert [r.thread_id for r in saver.threads()] == ["t"]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(store=_stores(), mode=st.sampled_from(["sync", "async"]))
def test_a_sweep_keeps_every_checkpoint_its_policy_keeps_whole(
    pg_dsn: str, store: dict[str, Any], mode: str
) -> None:
    async def run() -> None:
        saver = PostgresSaver.from_conn_string(pg_dsn, schema=fresh_schema(), delta_threshold=64)
        async with saver:
            await saver.asetup()
            await _check_one(saver, store, mode)

    asyncio.run(run())


def _rows(admin: psycopg.Connection[Any], schema: str) -> dict[str, dict[str, int]]:
    tables = ("tether_checkpoints", "tether_blobs", "tether_writes", "tether_write_counts")
    return {
        table: dict(
            admin.execute(
                f'SELECT thread_id, count(*) FROM "{schema}".{table} GROUP BY thread_id'
            ).fetchall()
        )
        for table in tables
    }


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ttl", "prune"])
@pytest.mark.parametrize("seed", range(2))
def test_sigkill_in_the_middle_of_a_sweep_leaves_every_thread_whole_or_gone(
    pg_dsn: str, admin: psycopg.Connection[Any], mode: str, seed: int
) -> None:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        before = populate(saver)
    params = conninfo_to_dict(pg_dsn)
    url = (
        f"postgresql://{params.get('user', 'postgres')}@{params.get('host', '127.0.0.1')}:"
        f"{params.get('port', '5432')}/{params['dbname']}?schema={schema}"
    )
    lines = kill_mid_sweep(url, mode, seed)
    assert "done" not in lines
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        whole, pruned = check_whole_or_gone(saver, before, _rows(admin, schema))
        assert whole < len(before)
        saver.retention = Retention(ttl=1) if mode == "ttl" else Retention(keep_last=1)
        saver.sweep(now=LATER)
        whole, pruned = check_whole_or_gone(saver, before, _rows(admin, schema))
        assert whole == 0
        assert pruned == (len(before) if mode == "prune" else 0)


def test_a_background_sweeper_skips_its_round_while_another_process_sweeps(pg_dsn: str) -> None:
    schema = fresh_schema()
    policy = Retention(ttl=0.2, grace=0)

    def wait(predicate: Any) -> bool:
        deadline = time.monotonic() + 10
        while not predicate() and time.monotonic() < deadline:
            time.sleep(0.02)
        return bool(predicate())

    with url_saver(pg_dsn, schema) as other, contextlib.ExitStack() as held:
        _steps(other, "t")
        assert held.enter_context(other.sweep_lock())  # before the sweeper's first round
        with url_saver(pg_dsn, schema, retention=policy, sweep_interval=0.05) as saver:
            sweeper = saver.sweeper
            assert sweeper is not None
            assert wait(lambda: sweeper.busy >= 3)
            assert [r.thread_id for r in saver.threads()] == ["t"]
            held.close()
            # The other process is done: a round of this one sweeps.
            assert wait(lambda: not saver.threads().items)
            assert sweeper.failures == 0

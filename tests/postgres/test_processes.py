"""Several real processes on one store: the thread lease, and prune under an appending writer."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, ThreadBusyError, make_config

from .conftest import PlainSerializer, fresh_schema, url_saver

pytestmark = pytest.mark.postgres

CHILD = str(Path(__file__).with_name("child.py"))


def spawn(*args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, CHILD, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != "ready":
        child.kill()
        _, err = child.communicate()
        raise AssertionError(f"child did not start: {line!r} {err}")
    return child


def finish(child: subprocess.Popen[str]) -> tuple[str, str]:
    """Close the child's stdin (its signal to end), collect its output, check its exit."""
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    if not child.stdin.closed:
        child.stdin.close()
    out, err = child.stdout.read(), child.stderr.read()
    child.wait(timeout=60)
    child.stdout.close()
    child.stderr.close()
    assert child.returncode == 0, err
    return out, err


def kill(child: subprocess.Popen[str] | None) -> None:
    if child is not None and child.poll() is None:
        child.kill()
        finish_quietly(child)


def finish_quietly(child: subprocess.Popen[str]) -> None:
    for stream in (child.stdin, child.stdout, child.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    child.wait(timeout=60)


@pytest.fixture
def store(pg_dsn: str) -> Iterator[tuple[str, str]]:
    schema = fresh_schema()
    with url_saver(pg_dsn, schema):
        yield pg_dsn, schema


def _line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    return child.stdout.readline().strip()


# --- the thread lease -------------------------------------------------------------------


def test_a_second_process_gets_thread_busy(store: tuple[str, str]) -> None:
    dsn, schema = store
    holder = spawn("lease", dsn, schema, "t")
    try:
        assert _line(holder) == "leased"
        other = spawn("lease", dsn, schema, "t")
        out, _ = finish(other)
        assert out.startswith("busy "), out
        assert "thread 't' is leased by another run" in out
        # another thread is free meanwhile, and so is the same thread in this process's view
        free = spawn("lease", dsn, schema, "u")
        assert _line(free) == "leased"
        assert finish(free)[0].strip() == "released"
        with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
            with pytest.raises(ThreadBusyError) as info, saver.lease("t"):
                pass
            assert info.value.thread_id == "t"  # type: ignore[attr-defined]
    finally:
        out, _ = finish(holder)
    assert out.strip() == "released"


def test_a_second_process_waits_when_asked(store: tuple[str, str]) -> None:
    dsn, schema = store
    holder = spawn("lease", dsn, schema, "t")
    waiter = None
    try:
        assert _line(holder) == "leased"
        waiter = spawn("lease", dsn, schema, "t", "wait")
        # The waiter cannot have the lease while the holder has it: release, then it gets it.
        assert finish(holder)[0].strip() == "released"
        assert _line(waiter) == "leased"
        assert finish(waiter)[0].strip() == "released"
    finally:
        kill(holder)
        kill(waiter)


def test_the_lease_dies_with_its_holder(store: tuple[str, str]) -> None:
    dsn, schema = store
    holder = spawn("lease", dsn, schema, "t")
    assert _line(holder) == "leased"
    holder.kill()
    finish_quietly(holder)
    # the server notices the dead session; waiting a little covers the gap
    with (
        PostgresSaver.from_conn_string(dsn, schema=schema) as saver,
        saver.lease("t", wait=True, timeout=30),
    ):
        pass


async def _take(mode: str, saver: PostgresSaver, thread: str, **kwargs: Any) -> None:
    """Take and release the lease of ``thread`` once."""
    if mode == "sync":
        with saver.lease(thread, **kwargs):
            pass
    else:
        async with saver.alease(thread, **kwargs):
            pass


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_lease_in_process_with_wait_timeout(mode: str, store: tuple[str, str]) -> None:
    dsn, schema = store
    saver = PostgresSaver.from_conn_string(dsn, schema=schema)
    async with saver:
        holder = spawn("lease", dsn, schema, "t")
        try:
            assert _line(holder) == "leased"
            with pytest.raises(ThreadBusyError, match="within the timeout"):
                await _take(mode, saver, "t", wait=True, timeout=0.3)
        finally:
            finish(holder)
        if mode == "sync":
            with saver.lease("t"), pytest.raises(ThreadBusyError, match="already leased"):
                await _take(mode, saver, "t")
        else:
            async with saver.alease("t"):
                with pytest.raises(ThreadBusyError, match="already leased"):
                    async with saver.alease("t"):
                        pass
            async with saver.alease("t"):  # released, so it can be taken again
                pass


def test_lease_on_a_plain_connection_and_a_pool(pg_dsn: str, store: tuple[str, str]) -> None:
    from psycopg_pool import ConnectionPool

    dsn, schema = store
    with psycopg.connect(dsn, autocommit=True) as conn:
        saver = PostgresSaver(conn, schema=schema)
        with saver.lease("t"):
            other = spawn("lease", dsn, schema, "t")
            assert finish(other)[0].startswith("busy ")
    with ConnectionPool(dsn, kwargs={"autocommit": True}, min_size=1, max_size=2) as pool:
        saver = PostgresSaver(pool, schema=schema)
        with saver.lease("t"):
            other = spawn("lease", dsn, schema, "t")
            assert finish(other)[0].startswith("busy ")
        free = spawn("lease", dsn, schema, "t")
        assert _line(free) == "leased"
        finish(free)


# --- prune while another process appends to the thread -----------------------------------


def _check_thread(saver: PostgresSaver, thread: str) -> int:
    """Every checkpoint of the thread reads back whole; returns how many there are."""
    from .child import STABLE, history

    n = 0
    for tup in saver.list(make_config(thread)):
        values = tup.checkpoint["channel_values"]
        assert set(values) == set(tup.checkpoint["channel_versions"]), tup.config
        assert values["stable"] == STABLE
        step = tup.metadata["step"]
        assert values["messages"] == history(step)
        assert values["step"] == step
        n += 1
    return n


@pytest.mark.slow
@pytest.mark.parametrize(("strategy", "keep"), [("keep_latest", 1), ("keep_last", 3)])
def test_prune_while_another_process_appends(
    strategy: str, keep: int, store: tuple[str, str], admin: psycopg.Connection[Any]
) -> None:
    dsn, schema = store
    writer = spawn("append", dsn, schema, "t")
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(writer.stdout or []))
    try:
        with PostgresSaver.from_conn_string(
            dsn, schema=schema, serde=PlainSerializer(), inline_primitives=True
        ) as saver:
            reader.start()
            rounds = 0
            while rounds < 40 or len(seen) < 200:
                saver.prune(["t"], strategy=strategy, keep=keep)  # type: ignore[arg-type]
                _check_thread(saver, "t")
                rounds += 1
            writer.stdin.close()  # type: ignore[union-attr]
            reader.join()
            finish(writer)
            # The writer's latest checkpoint survived every prune, whole, with its writes.
            latest = saver.get_tuple(make_config("t"))
            assert latest is not None
            assert latest.config["configurable"]["checkpoint_id"] == seen[-1].strip()
            step = latest.metadata["step"]
            assert latest.pending_writes == [(f"task-{step}", "messages", f"w{step}")]
            assert _check_thread(saver, "t") >= 1
            saver.prune(["t"], strategy=strategy, keep=keep)  # type: ignore[arg-type]
            assert _check_thread(saver, "t") == keep
    finally:
        kill(writer)
    # Nothing is left that no checkpoint refers to, directly or as the snapshot
    # a referenced tail extends; and the writer did store tails.
    q = f'"{schema}"'
    orphans = admin.execute(
        f"""WITH live AS (
            SELECT b.* FROM {q}.tether_blobs b WHERE EXISTS (
                SELECT 1 FROM {q}.tether_checkpoints c
                WHERE c.thread_id = b.thread_id AND c.checkpoint ->
                      'channel_versions' ->> b.channel = b.version))
        SELECT count(*) FROM {q}.tether_blobs b
        WHERE NOT EXISTS (
            SELECT 1 FROM live WHERE live.thread_id = b.thread_id
              AND live.channel = b.channel AND live.version = b.version)
          AND NOT EXISTS (
            SELECT 1 FROM live WHERE live.thread_id = b.thread_id
              AND live.channel = b.channel AND live.base = b.version)"""
    ).fetchone()
    assert orphans == (0,)
    tails = admin.execute(f"SELECT count(*) FROM {q}.tether_blobs WHERE base IS NOT NULL")
    assert tails.fetchone()[0] >= keep  # type: ignore[index]
    writes = admin.execute(
        f"""SELECT count(*) FROM {q}.tether_writes w WHERE NOT EXISTS (
            SELECT 1 FROM {q}.tether_checkpoints c WHERE c.thread_id = w.thread_id
              AND c.checkpoint_id = w.checkpoint_id)"""
    ).fetchone()
    assert writes == (0,)

"""Append deltas on Postgres: stored tails, the foreign key, sweeps racing a writer."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, make_config
from tether.testing._history import message

from .conftest import fresh_schema
from .helpers import MODES, call, checkpoint

pytestmark = pytest.mark.postgres


async def grow(
    mode: str, saver: PostgresSaver, thread: str, n: int, state: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Append ``n`` messages to ``history`` of ``thread``; returns the line's state."""
    state = state or {"config": make_config(thread), "history": [], "version": None}
    for _ in range(n):
        state["history"] = [*state["history"], message(len(state["history"]))]
        version = saver.get_next_version(state["version"])
        cp = checkpoint({"history": state["history"]}, {"history": version})
        state["config"] = await call(
            mode, saver, "put", state["config"], cp, {}, {"history": version}
        )
        state["version"] = version
    return state


def rows(admin: psycopg.Connection[Any], schema: str) -> list[tuple[Any, ...]]:
    return admin.execute(
        f'SELECT version, base, length(blob) FROM "{schema}".tether_blobs '
        "WHERE channel = 'history'"
    ).fetchall()


@pytest.mark.parametrize("mode", MODES)
async def test_a_growing_history_is_stored_as_snapshots_and_tails(
    mode: str, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    async with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        await call(mode, saver, "setup")
        state = await grow(mode, saver, "t", 150)
        tup = await call(mode, saver, "get_tuple", state["config"])
        assert tup.checkpoint["channel_values"]["history"] == state["history"]
    stored = rows(admin, schema)
    assert sum(1 for r in stored if r[1] is not None) > 130
    assert 3 < sum(1 for r in stored if r[0].startswith("~")) < 30
    assert sum(r[2] for r in stored) < 150 * len(message(1)["content"]) * 20


@pytest.mark.parametrize("mode", MODES)
async def test_a_tail_whose_snapshot_another_process_deleted_is_stored_whole(
    mode: str, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    async with (
        PostgresSaver.from_conn_string(pg_dsn, schema=schema) as writer,
        PostgresSaver.from_conn_string(pg_dsn, schema=schema) as other,
    ):
        await call(mode, writer, "setup")
        state = await grow(mode, writer, "t", 30)
        await call(mode, other, "delete_thread", "t")
        # the writer still remembers its snapshot; the database refuses a tail on it
        state = await grow(mode, writer, "t", 2, state)
        tup = await call(mode, other, "get_tuple", make_config("t"))
        assert tup.checkpoint["channel_values"]["history"] == state["history"]
        whole = [r for r in rows(admin, schema) if r[1] is None and not r[0].startswith("~")]
        assert len(whole) == 1  # the refused tail, stored whole; then a new snapshot
        state = await grow(mode, writer, "t", 3, state)
        tup = await call(mode, other, "get_tuple", make_config("t"))
        assert tup.checkpoint["channel_values"]["history"] == state["history"]
    assert sum(1 for r in rows(admin, schema) if r[1] is not None) >= 3


async def test_a_sweep_skips_a_snapshot_a_concurrent_put_is_extending(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    q = f'"{schema}"'
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        state = await grow("sync", saver, "t", 30)
        (first,) = [r[1] for r in rows(admin, schema) if r[0] == state["version"]]
        # an edit starts a new snapshot; after a prune nothing refers to the first
        state["history"] = [message(999), *state["history"]]
        state = await grow("sync", saver, "t", 2, state)
        with psycopg.connect(pg_dsn) as other:  # a put in flight: its tail locks `first`
            other.execute(
                f"INSERT INTO {q}.tether_blobs (thread_id, checkpoint_ns, channel, version, "
                "type, encoding, blob, base) VALUES ('t', '', 'history', 'in-flight', "
                "'msgpack', 0, '\\x90', %s)",
                (first,),
            )
            saver.prune(["t"], strategy="keep_latest")  # neither fails nor waits
            assert first in [r[0] for r in rows(admin, schema)]
            other.commit()
        saver.prune(["t"], strategy="keep_latest")  # now an orphan pair: both go
        assert first not in [r[0] for r in rows(admin, schema)]
        assert "in-flight" not in [r[0] for r in rows(admin, schema)]
        tup = saver.get_tuple(make_config("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["history"] == state["history"]


def test_the_database_refuses_a_tail_without_its_snapshot(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        admin.execute(
            f'INSERT INTO "{schema}".tether_blobs (thread_id, checkpoint_ns, channel, '
            "version, type, blob, base) VALUES ('t', '', 'c', '1', 'msgpack', '\\x90', "
            "'~00000000000000000000000000000000')"
        )

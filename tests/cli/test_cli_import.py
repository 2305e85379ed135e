"""``tether.importer.import_store``: official LangGraph stores made by real graphs, imported.

The graph of ``graphs.py`` runs on LangGraph's official SqliteSaver or
PostgresSaver; its store is imported into a tether store; the same graph
compiled with tether's drop-in saver over the imported store must then answer
exactly as the official store did -- state histories (values, next, metadata,
parent links, tasks and interrupts), ``get_state(subgraphs=True)`` and the raw
checkpoint tuples, ids included, since an import keeps them.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

import tether.langgraph as tlg
from tether.backends.postgres import PostgresSaver
from tether.backends.sqlite import SqliteSaver
from tether.errors import ConfigError, DecodeError, EncodeError
from tether.importer import ImportSummary, import_store, parse_store_url
from tether.langgraph import langgraph_serializer

from .graphs import Order, as_url, histories, order_graph


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sqlite_rows(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("tether_checkpoints", "tether_blobs", "tether_writes")
        }


def _counts(summary: ImportSummary) -> tuple[int, int, int, int]:
    return (summary.threads, summary.namespaces, summary.checkpoints, summary.writes)


# --- SQLite -> SQLite ------------------------------------------------------------------


def test_sqlite_import_answers_as_the_official_store(
    official_sqlite: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, before = official_sqlite
    digest = _digest(source)
    target = tmp_path / "tether.db"
    with SqliteSaver(target, serde=langgraph_serializer()) as saver:
        first = import_store(str(source), saver)
    assert _counts(first) == (2, 5, len(before["tuples"]), first.writes)
    assert first.writes > 0
    with tlg.SqliteSaver.from_conn_string(str(target)) as drop_in:
        after = histories(drop_in)
    assert after == before
    # The source was only read.
    assert _digest(source) == digest
    # Each write kept its task, task path, index and channel.
    cols = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel"
    with sqlite3.connect(source) as off, sqlite3.connect(target) as ours:
        theirs = sorted(off.execute(f"SELECT {cols} FROM writes"))
        mine = sorted(ours.execute(f"SELECT {cols} FROM tether_writes"))
    assert mine == theirs
    assert any(row[4] for row in mine)  # the scenario has tasks with a path


def test_sqlite_import_again_duplicates_nothing(
    official_sqlite: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, before = official_sqlite
    target = tmp_path / "tether.db"
    with SqliteSaver(target, serde=langgraph_serializer()) as saver:
        first = import_store(f"sqlite:///{source}", saver)
        rows = _sqlite_rows(target)
        second = import_store(str(source), saver)
    assert _counts(second) == _counts(first)
    assert _sqlite_rows(target) == rows
    with tlg.SqliteSaver.from_conn_string(str(target)) as drop_in:
        assert histories(drop_in) == before


def test_sqlite_import_into_a_drop_in_saver_and_resume(
    official_sqlite: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The imported interrupted thread resumes under tether as it would have under LangGraph."""
    from langgraph.types import Command

    from .graphs import build, config

    source, _ = official_sqlite
    with tlg.SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as drop_in:
        import_store(str(source), drop_in)  # a drop-in is accepted: its tether saver is used
        graph = build(drop_in)
        assert graph.get_state(config("chat-2")).next == ("review",)
        out = graph.invoke(Command(resume="ok"), config("chat-2"))
    with OfficialSqliteSaver.from_conn_string(str(source)) as official:
        expected = build(official).invoke(Command(resume="ok"), config("chat-2"))
    assert out == expected
    assert [m.content for m in out["messages"]][-1] == "approved=ok"


def test_import_some_threads_and_progress(
    official_sqlite: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, before = official_sqlite
    calls: list[tuple[int, int]] = []
    with SqliteSaver(tmp_path / "t.db", serde=langgraph_serializer()) as saver:
        summary = import_store(
            str(source), saver, threads=["chat-2"], progress=lambda d, t: calls.append((d, t))
        )
        assert {t.config["configurable"]["thread_id"] for t in saver.list(None)} == {"chat-2"}
    n = sum(1 for t in before["tuples"] if t[0]["configurable"]["thread_id"] == "chat-2")
    assert summary.thread_ids == ["chat-2"]
    assert summary.checkpoints == n
    assert calls == [(i, n) for i in range(n + 1)]


def test_unknown_thread_is_refused(
    official_sqlite: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, _ = official_sqlite
    with SqliteSaver(tmp_path / "t.db") as saver:
        with pytest.raises(ConfigError, match="no thread 'nope'"):
            import_store(str(source), saver, threads=["chat-1", "nope"])
        assert list(saver.list(None)) == []


async def test_a_store_of_the_official_async_sqlite_saver(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from .graphs import arun_scenario

    source = tmp_path / "lg.db"
    async with AsyncSqliteSaver.from_conn_string(str(source)) as official:
        await arun_scenario(official)
    with OfficialSqliteSaver.from_conn_string(str(source)) as official_sync:
        before = histories(official_sync)
    with tlg.SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as drop_in:
        import_store(str(source), drop_in)
        assert histories(drop_in) == before


# --- what is not an official store ------------------------------------------------------


def test_sources_that_are_not_official_stores(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "target.db") as saver:
        with pytest.raises(ConfigError, match="no SQLite file"):
            import_store(str(tmp_path / "missing.db"), saver)
        other = tmp_path / "other.db"
        with sqlite3.connect(other) as conn:
            conn.execute("CREATE TABLE things (x)")
        with pytest.raises(ConfigError, match="not a LangGraph SqliteSaver store"):
            import_store(str(other), saver)
        with SqliteSaver(tmp_path / "tether.db"):
            pass
        with pytest.raises(ConfigError, match="is a tether store"):
            import_store(str(tmp_path / "tether.db"), saver)
        with pytest.raises(ConfigError, match="unknown store scheme 'mysql'"):
            import_store("mysql://localhost/db", saver)
        with pytest.raises(ConfigError, match="needs a tether saver"):
            import_store(str(other), object())


def test_store_urls() -> None:
    assert parse_store_url("a.db").location == "a.db"
    assert parse_store_url("sqlite:///a.db").location == "a.db"
    assert parse_store_url("sqlite:////abs/a.db").location == "/abs/a.db"
    pg = parse_store_url("postgresql://u:secret@h:5/db?schema=s1&sslmode=disable")
    assert (pg.kind, pg.schema, pg.location) == (
        "postgres",
        "s1",
        "postgresql://u:secret@h:5/db?sslmode=disable",
    )
    assert "secret" not in str(pg)  # names in messages and summaries hide the password
    assert parse_store_url("postgres://h/db").schema == "public"
    for bad in ("", "sqlite:", "sqlite://host/x.db", "postgresql://h/db?schema="):
        with pytest.raises(ConfigError):
            parse_store_url(bad)


# --- types outside the allowlist ---------------------------------------------------------


def test_a_type_outside_the_allowlist_names_itself_and_can_be_allowed(tmp_path: Path) -> None:
    source = tmp_path / "lg.db"
    with OfficialSqliteSaver.from_conn_string(str(source)) as official:
        graph = order_graph(official)
        graph.invoke({"order": Order("tea", 1)}, {"configurable": {"thread_id": "o"}})
        expected = [t.checkpoint for t in official.list(None)]
    with SqliteSaver(tmp_path / "t.db", serde=langgraph_serializer()) as saver:
        with pytest.raises(DecodeError, match="Order") as info:
            import_store(str(source), saver)
        assert info.value.context["thread_id"] == "o"
        allow = [(Order.__module__, "Order")]
        # the target must allow it too: it refuses to store what it could not read back
        with pytest.raises(EncodeError, match="Order"):
            import_store(str(source), saver, allowlist=allow)
        summary = import_store(str(source), saver.with_allowlist(allow), allowlist=allow)
        assert summary.checkpoints == len(expected)
    with SqliteSaver(tmp_path / "t.db", serde=langgraph_serializer(allow)) as saver:
        assert [t.checkpoint for t in saver.list(None)] == expected


# --- format v3 checkpoints ------------------------------------------------------------------


def test_v3_pending_sends_become_the_tasks_channel(tmp_path: Path) -> None:
    from langgraph.types import Send

    source = tmp_path / "old.db"
    old = {
        "v": 3,
        "id": "1ef00000-0000-6000-8000-000000000001",
        "ts": "2024-05-01T00:00:00+00:00",
        "channel_values": {"x": 1},
        "channel_versions": {"x": "00000000000000000000000000000002.0.5"},
        "versions_seen": {},
        "pending_sends": [Send("node", {"a": 1})],
    }
    with OfficialSqliteSaver.from_conn_string(str(source)) as official:
        official.put(
            {"configurable": {"thread_id": "old", "checkpoint_ns": ""}},
            old,  # type: ignore[arg-type]
            {"source": "loop", "step": 3},
            {},
        )
    with SqliteSaver(tmp_path / "t.db", serde=langgraph_serializer()) as saver:
        import_store(str(source), saver)
        tup = saver.get_tuple({"configurable": {"thread_id": "old"}})
    assert tup is not None
    assert "pending_sends" not in tup.checkpoint
    assert tup.checkpoint["channel_values"]["__pregel_tasks"] == [Send("node", {"a": 1})]
    assert tup.checkpoint["channel_versions"]["__pregel_tasks"] == old["channel_versions"]["x"]
    assert tup.metadata == {"source": "loop", "step": 3}


# --- Postgres ----------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_import_answers_as_the_official_store(
    official_postgres: tuple[str, dict[str, Any]],
) -> None:
    url, before = official_postgres
    with PostgresSaver.from_conn_string(
        url, schema="imported", serde=langgraph_serializer(), pool_size=2
    ) as saver:
        saver.setup()
        first = import_store(url, saver)
        rows = _pg_rows(url, "imported")
        second = import_store(url + "?schema=public", saver)
        assert _pg_rows(url, "imported") == rows
        assert _pg_writes(url, "imported.tether_writes") == _pg_writes(
            url, "public.checkpoint_writes"
        )
    assert _counts(first) == _counts(second)
    assert first.checkpoints == len(before["tuples"])
    with tlg.PostgresSaver.from_conn_string(url, schema="imported", pool_size=2) as drop_in:
        after = histories(drop_in)
    assert after == before


@pytest.mark.postgres
async def test_a_store_of_the_official_async_postgres_saver(
    pg_database: str, tmp_path: Path
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from .graphs import arun_scenario

    url = as_url(pg_database)
    async with AsyncPostgresSaver.from_conn_string(url) as official:
        await official.setup()
        await arun_scenario(official)
    with OfficialPostgresSaver.from_conn_string(url) as official_sync:
        before = histories(official_sync)
    with tlg.SqliteSaver.from_conn_string(str(tmp_path / "t.db")) as drop_in:
        import_store(url, drop_in)
        assert histories(drop_in) == before


@pytest.mark.postgres
def test_postgres_official_into_sqlite(
    official_postgres: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    url, before = official_postgres
    target = tmp_path / "t.db"
    with SqliteSaver(target, serde=langgraph_serializer()) as saver:
        import_store(url, saver)
    with tlg.SqliteSaver.from_conn_string(str(target)) as drop_in:
        assert histories(drop_in) == before


@pytest.mark.postgres
def test_official_sqlite_into_postgres(
    official_sqlite: tuple[Path, dict[str, Any]], pg_database: str
) -> None:
    source, before = official_sqlite
    url = as_url(pg_database)
    with tlg.PostgresSaver.from_conn_string(url, pool_size=2) as drop_in:
        drop_in.setup()
        import_store(str(source), drop_in)
        assert histories(drop_in) == before


@pytest.mark.postgres
def test_postgres_sources_that_are_not_official_stores(pg_database: str, tmp_path: Path) -> None:
    url = as_url(pg_database)
    with SqliteSaver(tmp_path / "t.db") as saver:
        with pytest.raises(ConfigError, match="no LangGraph PostgresSaver store"):
            import_store(url, saver)
        with PostgresSaver.from_conn_string(url, schema="mine", pool_size=1) as pg:
            pg.setup()
        with pytest.raises(ConfigError, match="holds a tether store"):
            import_store(url + "?schema=mine", saver)


def _pg_rows(url: str, schema: str) -> dict[str, int]:
    """Rows of the tether store in ``schema``."""
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {schema}.{t}").fetchone()[0]  # type: ignore[index]
            for t in ("tether_checkpoints", "tether_blobs", "tether_writes")
        }


def _pg_writes(url: str, table: str) -> list[tuple[Any, ...]]:
    import psycopg

    cols = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel"
    with psycopg.connect(url) as conn:
        return sorted(conn.execute(f"SELECT {cols} FROM {table}").fetchall())


def test_write_batches_keep_indexes() -> None:
    from tether.importer import _batches, _Write

    def w(idx: int, channel: str) -> _Write:
        return _Write("t", "", idx, channel, channel.upper())

    # LangGraph sent [__resume__, a, b]: a and b at 1 and 2.
    batches = _batches([w(-4, "__resume__"), w(1, "a"), w(2, "b")])
    assert batches == [
        [("__resume__", "__RESUME__"), ("a", "A"), ("b", "B")],
        [("__resume__", "__RESUME__")],
    ]
    # Dense from 0: one batch of ordinary writes, then the special ones.
    assert _batches([w(0, "a"), w(1, "b"), w(-3, "__interrupt__")]) == [
        [("a", "A"), ("b", "B")],
        [("__interrupt__", "__INTERRUPT__")],
    ]
    # A gap nothing can fill: the order is kept.
    assert _batches([w(0, "a"), w(5, "b")]) == [[("a", "A"), ("b", "B")]]
    assert _batches([w(-3, "__interrupt__")]) == [[("__interrupt__", "__INTERRUPT__")]]

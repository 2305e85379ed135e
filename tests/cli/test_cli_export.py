"""``tether export``: tether stores back to LangGraph's official savers (the way out).

The story end to end, with real graphs and the real official savers: a graph
runs on LangGraph's official ``SqliteSaver`` (a subgraph that interrupts and
is resumed, a ``Send`` fan-out, a fork); ``tether import`` brings the store
over; the conversations go on through tether's drop-in saver; ``tether
export`` writes them to a new official SQLite file or Postgres schema; and
LangGraph's own saver must then answer exactly what tether's does (see
``export_helpers`` for what is compared and the one normalization).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pty
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from click.testing import CliRunner, Result
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send

import tether.langgraph as tlg
from tether.backends.sqlite import SqliteSaver
from tether.cli._app import cli
from tether.errors import CheckpointNotFound, ConfigError
from tether.exporter import export_store
from tether.langgraph import langgraph_serializer

from .export_helpers import (
    answers,
    continue_on_tether,
    official_dump,
    official_reader,
    official_rows,
    tether_rows,
)
from .graphs import THREADS, Order, as_url, build, config, order_graph, run_scenario

SCRIPT = Path(sys.executable).with_name("tether")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def ok_json(*args: str) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def error(result: Result) -> str:
    """The one-line error of a failed command (exit code 1, no traceback)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), result.stderr
    return lines[0]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def drop_in(store: str) -> Iterator[Any]:
    """tether's LangGraph drop-in saver on a store named as the CLI names it."""
    if store.startswith("postgresql://"):
        url, _, schema = store.partition("?schema=")
        with tlg.PostgresSaver.from_conn_string(url, schema=schema, pool_size=2) as saver:
            yield saver
    else:
        with tlg.SqliteSaver.from_conn_string(store) as saver:
            yield saver


# --- where the tether store lives and where it is exported to --------------------------

Route = tuple[str, str]  # (tether store, export target), as the CLI names them


def _sqlite_route(tmp: Path, pg: Callable[[], str]) -> Route:
    return str(tmp / "tether.db"), str(tmp / "exported.db")


def _to_postgres(tmp: Path, pg: Callable[[], str]) -> Route:
    return str(tmp / "tether.db"), f"{pg()}?schema=lg_export"


def _postgres_both(tmp: Path, pg: Callable[[], str]) -> Route:
    # One database: the tether store in one schema, the export in another.
    url = pg()
    return f"{url}?schema=tether_store", f"{url}?schema=lg_export"


@pytest.fixture(
    params=[
        pytest.param(_sqlite_route, id="sqlite-to-sqlite"),
        pytest.param(_to_postgres, id="sqlite-to-postgres", marks=pytest.mark.postgres),
        pytest.param(_postgres_both, id="postgres-to-postgres", marks=pytest.mark.postgres),
    ]
)
def route(request: pytest.FixtureRequest, tmp_path: Path) -> Route:
    make: Callable[[Path, Callable[[], str]], Route] = request.param
    return make(tmp_path, lambda: as_url(request.getfixturevalue("pg_database")))


# --- the story ------------------------------------------------------------------------------


def test_import_continue_on_tether_export_reads_the_same(
    official_sqlite: tuple[Path, Any], route: Route
) -> None:
    original, _ = official_sqlite
    store, target = route
    assert run("import", str(original), store, "--no-progress").exit_code == 0
    with drop_in(store) as saver:
        continue_on_tether(saver)
        expected = answers(saver, tether_side=True)
        rows = tether_rows(saver.saver)

    summary = ok_json("export", store, "--to-langgraph", target)
    assert (summary["threads"], summary["checkpoints"], summary["writes"]) == (
        3,
        len(expected["tuples"]),
        len(rows["writes"]),
    )
    assert summary["namespaces"] == sum(1 for k in expected if "/" in k and k[-6:] != "/state")
    assert summary["overwritten"] == []

    with official_reader(target) as official:
        got = answers(official)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == expected[key], key
    # Subgraph namespaces were compared too, interrupted ones among them.
    assert any("review:" in k for k in expected)
    # Keys as stored: parents, task ids, task paths and original indexes.
    exported = official_rows(target)
    assert exported == rows
    before = official_rows(str(original))
    assert set(before["checkpoints"]) <= set(exported["checkpoints"])
    assert set(before["writes"]) <= set(exported["writes"])
    assert any(r[4] for r in exported["writes"])  # tasks with a path
    by_task: dict[tuple[Any, ...], list[int]] = {}
    for r in exported["writes"]:
        by_task.setdefault(r[:4], []).append(r[5])
    # A resumed task's ordinary writes start at index 1, as LangGraph stored them.
    assert any(min(i for i in idxs if i >= 0) == 1 for idxs in by_task.values() if max(idxs) >= 0)

    # The way out works: the interrupted thread resumes on the official saver
    # exactly as it does on tether.
    with official_reader(target) as official:
        theirs = build(official).invoke(Command(resume="fine"), config("chat-3"))
    with drop_in(store) as saver:
        ours = build(saver).invoke(Command(resume="fine"), config("chat-3"))
    assert theirs == ours
    assert ours["messages"][-1].content == "approved=fine"


def test_the_source_is_only_read(official_sqlite: tuple[Path, Any], tmp_path: Path) -> None:
    store = tmp_path / "tether.db"
    with tlg.SqliteSaver.from_conn_string(str(store)) as saver:
        run_scenario(saver)
    digest = _digest(store)
    assert run("export", str(store), "--to-langgraph", str(tmp_path / "lg.db")).exit_code == 0
    # Any write would be in the file now: closing the last connection folds the
    # write-ahead log back into it.
    assert _digest(store) == digest


# --- a long chat stored as append deltas ------------------------------------------------------


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _chat(checkpointer: Any) -> Any:
    def reply(state: ChatState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply {n} " + "x" * 200, id=f"ai-{n}")]}

    builder = StateGraph(ChatState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=checkpointer)


def _talk(checkpointer: Any, turns: int) -> None:
    graph = _chat(checkpointer)
    for i in range(turns):
        text = f"turn {i} " + "y" * 200
        graph.invoke({"messages": [HumanMessage(content=text, id=f"h-{i}")]}, config("long"))


@pytest.mark.parametrize(
    "target",
    [
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ],
)
def test_a_long_chat_stored_as_deltas_exports_whole_lists(
    tmp_path: Path, target: str, request: pytest.FixtureRequest
) -> None:
    turns = 120
    store, plain = tmp_path / "chat.db", tmp_path / "plain.db"
    # Uncompressed, so that the two stores differ only in the append deltas.
    with tlg.SqliteSaver.from_conn_string(str(store), compress_threshold=None) as saver:
        _talk(saver, turns)
        with_deltas = saver.saver.stats()["bytes"]
    with tlg.SqliteSaver.from_conn_string(
        str(plain), compress_threshold=None, delta_threshold=None
    ) as saver:
        _talk(saver, turns)
        whole = saver.saver.stats()["bytes"]
    # The store really holds append deltas: the same chat stored whole takes
    # several times the room.
    assert whole > 4 * with_deltas

    out = (
        str(tmp_path / "lg.db")
        if target == "sqlite"
        else f"{as_url(request.getfixturevalue('pg_database'))}?schema=chat"
    )
    summary = export_store(str(store), out)
    assert summary.checkpoints == 3 * turns  # per turn: the input, __start__'s, reply's
    with official_reader(out) as official:
        tuples = list(official.list(config("long")))
        assert len(tuples) == summary.checkpoints
        for tup in tuples:
            step = tup.metadata["step"]
            messages = tup.checkpoint["channel_values"].get("messages", [])
            # Step s of the chat has every message sent before it, whole.
            assert [m.id for m in messages] == _ids_at(step)
        state = _chat(official).get_state(config("long")).values
    assert len(state["messages"]) == 2 * turns
    assert state["messages"][-1].content.startswith(f"reply {2 * turns - 1} ")


def _ids_at(step: int) -> list[str]:
    """The message ids the checkpoint at ``step`` holds.

    Turn t has steps 3t-1 (its input), 3t (``__start__`` added the human
    message) and 3t+1 (``reply`` added the answer, id ``ai-{2t+1}``).
    """
    ids: list[str] = []
    for s in range(step + 1):
        turn, phase = divmod(s + 1, 3)
        if phase == 1:
            ids.append(f"h-{turn}")
        elif phase == 2:
            ids.append(f"ai-{2 * turn + 1}")
    return ids


# --- refusing, overwriting, idempotence ---------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A tether SQLite store after the scenario (run by tether's drop-in saver)."""
    path = tmp_path / "tether.db"
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        run_scenario(saver)
    return str(path)


def test_refuses_threads_the_target_holds_unless_overwrite_and_is_idempotent(
    store: str, tmp_path: Path
) -> None:
    target = str(tmp_path / "lg.db")
    first = ok_json("export", store, "--to-langgraph", target, "--thread", "chat-1")
    assert first["threads"] == 1
    held = official_dump(target)

    message = error(run("export", store, "--to-langgraph", target))
    assert "already holds thread(s) 'chat-1'" in message
    assert "'chat-2'" not in message  # only the threads it holds are named
    assert "--overwrite" in message
    assert official_dump(target) == held  # nothing was written

    second = ok_json("export", store, "--to-langgraph", target, "--overwrite")
    assert second["overwritten"] == ["chat-1"]
    assert second["threads"] == 2
    once = official_dump(target)
    third = ok_json("export", store, "--to-langgraph", target, "--overwrite")
    assert third["overwritten"] == ["chat-1", "chat-2"]
    assert {k: third[k] for k in ("checkpoints", "writes")} == {
        k: second[k] for k in ("checkpoints", "writes")
    }
    assert official_dump(target) == once  # run twice: the same target, row for row


def test_overwrite_replaces_a_thread_that_changed(store: str, tmp_path: Path) -> None:
    target = str(tmp_path / "lg.db")
    assert run("export", store, "--to-langgraph", target).exit_code == 0
    # The source loses checkpoints (prune) and gains a turn; --overwrite must
    # leave the target as the source is now, not a mix of both.
    assert run("prune", store, "chat-2", "--keep", "1").exit_code == 0
    with tlg.SqliteSaver.from_conn_string(store) as saver:
        build(saver).invoke(Command(resume="late"), config("chat-2"))
        rows = tether_rows(saver.saver)
    assert run("export", store, "--to-langgraph", target, "--overwrite").exit_code == 0
    assert official_rows(target) == rows


@pytest.mark.postgres
def test_postgres_refusal_and_overwrite(store: str, pg_database: str) -> None:
    target = f"{as_url(pg_database)}?schema=lg"
    assert run("export", store, "--to-langgraph", target, "-t", "chat-2").exit_code == 0
    held = official_dump(target)
    assert "already holds thread(s) 'chat-2'" in error(
        run("export", store, "--to-langgraph", target)
    )
    assert official_dump(target) == held
    assert ok_json("export", store, "--to-langgraph", target, "--overwrite")["overwritten"] == [
        "chat-2"
    ]
    once = official_dump(target)
    assert run("export", store, "--to-langgraph", target, "--overwrite").exit_code == 0
    assert official_dump(target) == once
    # The official tables are in the schema named, and only there.
    with psycopg.connect(as_url(pg_database)) as conn:
        row = conn.execute(
            "SELECT to_regclass('lg.checkpoints') IS NOT NULL, "
            "to_regclass('public.checkpoints') IS NOT NULL"
        ).fetchone()
    assert row == (True, False)


# --- choosing threads; empty and unknown ----------------------------------------------------


def test_only_the_threads_named(store: str, tmp_path: Path) -> None:
    target = str(tmp_path / "lg.db")
    summary = ok_json("export", store, "--to-langgraph", target, "-t", "chat-2", "-t", "chat-2")
    assert summary["threads"] == 1
    with SqliteSaver(store, serde=langgraph_serializer()) as saver:
        rows = tether_rows(saver)
    exported = official_rows(target)
    assert {r[0] for r in exported["checkpoints"]} == {"chat-2"}
    assert exported["checkpoints"] == [r for r in rows["checkpoints"] if r[0] == "chat-2"]
    assert exported["writes"] == [r for r in rows["writes"] if r[0] == "chat-2"]
    assert summary["checkpoints"] == len(exported["checkpoints"])


def test_an_empty_store(tmp_path: Path) -> None:
    store, target = tmp_path / "empty.db", tmp_path / "lg.db"
    with SqliteSaver(store):
        pass
    summary = ok_json("export", str(store), "--to-langgraph", str(target))
    assert (summary["threads"], summary["checkpoints"], summary["writes"]) == (0, 0, 0)
    with official_reader(str(target)) as official:  # created, with the official tables
        assert list(official.list(None)) == []
    assert official_rows(str(target)) == {"checkpoints": [], "writes": []}


def test_an_unknown_thread(store: str, tmp_path: Path) -> None:
    target = tmp_path / "lg.db"
    message = error(
        run("export", store, "--to-langgraph", str(target), "-t", "chat-1", "-t", "ghost")
    )
    assert "has no thread 'ghost'" in message
    assert "tether threads" in message
    assert not target.exists()  # refused before the target was opened
    with pytest.raises(CheckpointNotFound, match="no thread 'ghost'"):
        export_store(store, str(target), threads=["ghost"])


# --- what cannot be a target or a source ------------------------------------------------------


def test_targets_that_are_not_official_stores(store: str, tmp_path: Path) -> None:
    other = tmp_path / "old-tether.db"  # tether's tables before they were named tether_*
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE checkpoints (thread_id TEXT, channel_versions TEXT)")
        conn.execute("CREATE TABLE checkpoint_blobs (thread_id TEXT)")
    assert "holds a tether store" in error(run("export", store, "--to-langgraph", str(other)))
    foreign = tmp_path / "foreign.db"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE checkpoints (id INTEGER)")
    assert "not LangGraph's" in error(run("export", store, "--to-langgraph", str(foreign)))
    assert "is a directory" in error(run("export", store, "--to-langgraph", str(tmp_path)))
    assert "no tether store" in error(
        run("export", str(tmp_path / "missing.db"), "--to-langgraph", "x.db")
    )
    official = tmp_path / "official.db"
    with official_reader(str(official)) as saver:
        run_scenario(saver)
    assert "LangGraph SqliteSaver store" in error(
        run("export", str(official), "--to-langgraph", str(tmp_path / "y.db"))
    )
    with pytest.raises(ConfigError, match="a tether saver"):
        export_store(object(), str(tmp_path / "z.db"))


@pytest.mark.postgres
def test_an_export_goes_beside_a_tether_store_in_one_postgres_schema(
    store: str, pg_database: str
) -> None:
    """tether's tables are tether_*: the official ones go beside them, and each program
    reads its own rows (#13.2)."""
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver

    from tether import empty_checkpoint
    from tether.backends.postgres import PostgresSaver

    url = as_url(pg_database)
    target = f"{url}?schema=mine"
    with PostgresSaver.from_conn_string(target, pool_size=1) as ours:
        ours.setup()
        cp = empty_checkpoint()
        ours.put({"configurable": {"thread_id": "tether-only"}}, cp, {}, {})
    done = ok_json("export", store, "--to-langgraph", target)
    assert done["threads"] > 0
    with PostgresSaver.from_conn_string(target, pool_size=1) as ours:
        mine = {t.config["configurable"]["thread_id"] for t in ours.list(None)}
    with OfficialPostgresSaver.from_conn_string(
        f"{pg_database} options='-c search_path=mine'"
    ) as theirs:
        official = {t.config["configurable"]["thread_id"] for t in theirs.list(None)}
    assert mine == {"tether-only"}
    assert official == {t["thread_id"] for t in ok_json("threads", store)}


def test_an_export_goes_into_the_tether_stores_own_sqlite_file(store: str) -> None:
    """The way out needs no second file: LangGraph's tables go beside tether's (#13.2)."""
    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

    threads = {t["thread_id"] for t in ok_json("threads", store)}
    done = ok_json("export", store, "--to-langgraph", store)
    assert done["threads"] == len(threads)
    with sqlite3.connect(store, check_same_thread=False) as conn:
        listed = OfficialSqliteSaver(conn).list(None)
        official = {t.config["configurable"]["thread_id"] for t in listed}
    assert official == threads
    assert {t["thread_id"] for t in ok_json("threads", store)} == threads  # tether's, untouched


def test_a_postgres_schema_holding_an_old_tether_store_is_refused(
    store: str, pg_database: str
) -> None:
    """A tether store from before version 10 has a table named checkpoints of its own."""
    import psycopg

    url = as_url(pg_database)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA old")
        conn.execute(
            "CREATE TABLE old.checkpoints (thread_id TEXT, checkpoint_ns TEXT, "
            "checkpoint_id TEXT, parent_checkpoint_id TEXT, checkpoint JSONB, metadata JSONB)"
        )
    message = error(run("export", store, "--to-langgraph", f"{url}?schema=old"))
    assert "schema 'old'" in message
    assert "not LangGraph's" in message


def test_a_missing_official_package_is_named(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules is how Python marks a module that cannot be imported:
    # the import raises ModuleNotFoundError, as when the package is not installed.
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.sqlite", None)
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres", None)
    message = error(run("export", store, "--to-langgraph", str(tmp_path / "lg.db")))
    assert "pip install langgraph-checkpoint-sqlite" in message
    message = error(run("export", store, "--to-langgraph", "postgresql://u@127.0.0.1:1/db"))
    assert "pip install langgraph-checkpoint-postgres" in message
    assert not (tmp_path / "lg.db").exists()


# --- values of the user's own types ------------------------------------------------------------


def test_a_type_outside_the_allowlist(tmp_path: Path) -> None:
    store, target = tmp_path / "orders.db", tmp_path / "lg.db"
    allow = [(Order.__module__, "Order")]
    with tlg.SqliteSaver.from_conn_string(str(store), allowlist=allow) as saver:
        order_graph(saver).invoke({"order": Order("tea", 1)}, config("o"))
    message = error(run("export", str(store), "--to-langgraph", str(target)))
    assert "Order" in message
    assert f"--allow {Order.__module__}:Order" in message
    # The refused run wrote nothing of the thread: no --overwrite needed now.
    done = ok_json(
        "export", str(store), "--to-langgraph", str(target), "--allow", f"{Order.__module__}:Order"
    )
    assert done["threads"] == 1
    with official_reader(str(target)) as official:
        assert order_graph(official).get_state(config("o")).values == {"order": Order("tea", 2)}


# --- LangGraph DeltaChannel state: the order of writes rebuilds the value ---------------------


def _concat(state: list[str], writes: Any) -> list[str]:
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


class FanState(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=50)]


def _fan_graph(checkpointer: Any) -> Any:
    def part(arg: dict[str, Any]) -> dict[str, Any]:
        return {"items": [arg["item"]]}

    builder = StateGraph(FanState)
    builder.add_node("part", part)
    builder.add_conditional_edges(
        START, lambda s: [Send("part", {"item": f"p{i}"}) for i in range(6)], ["part"]
    )
    return builder.compile(checkpointer=checkpointer)


def test_delta_channel_values_rebuild_in_the_same_order(tmp_path: Path) -> None:
    """A DeltaChannel's value is rebuilt from stored writes in (task_path, task_id, idx)
    order; six parallel tasks append to it, so a task path lost in the export would
    rebuild another order (task ids are hashes) in all but 1 of 720 runs."""
    store, target = tmp_path / "fan.db", tmp_path / "lg.db"
    with tlg.SqliteSaver.from_conn_string(str(store)) as saver:
        graph = _fan_graph(saver)
        for _ in range(3):
            graph.invoke({"items": []}, config("fan"))
        expected = [s.values for s in graph.get_state_history(config("fan"))]
    assert expected[0]["items"] == [f"p{i}" for i in range(6)] * 3
    assert run("export", str(store), "--to-langgraph", str(target)).exit_code == 0
    with official_reader(str(target)) as official:
        got = [s.values for s in _fan_graph(official).get_state_history(config("fan"))]
    assert got == expected


# --- progress -------------------------------------------------------------------------------


def test_progress_callback_counts_checkpoints(store: str, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    summary = export_store(
        Path(store), tmp_path / "lg.db", progress=lambda done, total: calls.append((done, total))
    )
    n = summary.checkpoints
    assert n > 0
    assert calls == [(i, n) for i in range(n + 1)]


def test_a_saver_as_source(store: str, tmp_path: Path) -> None:
    with tlg.SqliteSaver.from_conn_string(store) as drop_in_saver:
        summary = export_store(drop_in_saver, str(tmp_path / "lg.db"), threads=["chat-1"])
        rows = tether_rows(drop_in_saver.saver)
    assert summary.thread_ids == ["chat-1"]
    assert official_rows(str(tmp_path / "lg.db"))["writes"] == [
        r for r in rows["writes"] if r[0] == "chat-1"
    ]


def test_no_progress_bar_when_piped_and_one_on_a_terminal(store: str, tmp_path: Path) -> None:
    assert SCRIPT.exists(), f"{SCRIPT} is missing: pip install -e '.[cli]'"
    piped = subprocess.run(
        [str(SCRIPT), "export", store, "--to-langgraph", str(tmp_path / "a.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert "exported" in piped.stdout

    # stderr on a pseudo-terminal: rich draws the bar there. The terminal is
    # read while the command runs, so it never fills up and blocks the writer.
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(SCRIPT), "export", store, "--to-langgraph", str(tmp_path / "b.db")],
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "100"},
    )
    os.close(follower)
    seen = b""
    try:
        with contextlib.suppress(OSError):  # EIO: the command has exited, nothing is left
            while chunk := os.read(leader, 65536):
                seen += chunk
    finally:
        os.close(leader)
        assert proc.wait(timeout=120) == 0
    text = seen.decode(errors="replace")
    assert "exporting" in text
    with SqliteSaver(store, serde=langgraph_serializer()) as saver:
        total = sum(1 for _ in saver.list(None))
    assert f"{total}/{total}" in text


async def test_the_official_async_saver_reads_the_export(store: str, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    target = str(tmp_path / "lg.db")
    assert run("export", store, "--to-langgraph", target).exit_code == 0
    with official_reader(target) as official:
        graph = build(official)
        expected = {t: list(graph.get_state_history(config(t))) for t in THREADS}
    async with AsyncSqliteSaver.from_conn_string(target) as aofficial:
        graph = build(aofficial)
        got = {t: [s async for s in graph.aget_state_history(config(t))] for t in THREADS}
    assert got == expected
    assert all(got.values())

"""The ``tether`` commands through click's test runner, on stores real graphs left behind.

Output is checked through ``--json`` where the content matters (tables are
for people) and as text where the message is the point: an error is one
line ``Error: ...`` on stderr with exit code 1, never a traceback.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from click.testing import CliRunner, Result
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph

import tether.langgraph as tlg
from tether.backends.sqlite import SqliteSaver
from tether.cli._app import cli
from tether.history import short_ids
from tether.langgraph import langgraph_serializer

from .graphs import THREADS, Order, as_url, order_graph, run_scenario


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def ok_json(*args: str) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def error(result: Result, code: int = 1) -> str:
    """The one-line error of a failed command."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, result.output
    return "\n".join(lines)


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A tether SQLite store after the scenario (run by tether's drop-in saver)."""
    path = tmp_path / "tether.db"
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        run_scenario(saver)
    return str(path)


def _tuples(path: str, thread: str | None = None) -> list[Any]:
    with SqliteSaver(path, serde=langgraph_serializer()) as saver:
        config = {"configurable": {"thread_id": thread}} if thread else None
        return list(saver.list(config))


# --- threads, history, show, stats ----------------------------------------------------------


def test_threads(store: str) -> None:
    infos = ok_json("threads", store)
    tuples = _tuples(store)
    assert [i["thread_id"] for i in infos] == sorted(THREADS)
    for info in infos:
        mine = [t for t in tuples if t.config["configurable"]["thread_id"] == info["thread_id"]]
        assert info["checkpoints"] == len(mine)
        root = [t for t in mine if t.config["configurable"]["checkpoint_ns"] == ""]
        assert info["latest_checkpoint_id"] == root[0].checkpoint["id"]
        assert info["latest_step"] == root[0].metadata["step"]
        assert info["latest_ts"] == root[0].checkpoint["ts"]
        assert info["namespaces"] == len({t.config["configurable"]["checkpoint_ns"] for t in mine})
    text = run("threads", store)
    assert text.exit_code == 0
    assert "chat-1" in text.stdout
    assert "checkpoints" in text.stdout


def test_history(store: str) -> None:
    rows = ok_json("history", store, "chat-1")
    tuples = _tuples(store, "chat-1")
    assert [r["checkpoint_id"] for r in rows] == [t.checkpoint["id"] for t in tuples]
    for row, tup in zip(rows, tuples, strict=True):
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        assert row["parent_checkpoint_id"] == parent
        assert row["step"] == tup.metadata["step"]
        assert row["source"] == tup.metadata["source"]
        assert row["pending_writes"] == len(tup.pending_writes or ())
    first_input = [r for r in rows if r["source"] == "input" and r["checkpoint_ns"] == ""][-1]
    assert first_input["changed"] == ["__start__"]
    root = ok_json("history", store, "chat-1", "--ns", "")
    assert root
    assert all(r["checkpoint_ns"] == "" for r in root)
    assert len(ok_json("history", store, "chat-1", "--limit", "2")) == 2
    text = run("history", store, "chat-1", "-n", "3")
    assert text.exit_code == 0
    # ids as their shortest unique prefix (what show and diff take back)
    short = short_ids(r["checkpoint_id"] for r in rows)[rows[0]["checkpoint_id"]]
    assert f"#1  {short} " in text.stdout
    assert rows[0]["checkpoint_id"] not in text.stdout


def test_show_latest_and_by_id(store: str) -> None:
    latest = ok_json("show", store, "chat-2")
    tup = _tuples(store, "chat-2")
    root = next(t for t in tup if t.config["configurable"]["checkpoint_ns"] == "")
    assert latest["checkpoint_id"] == root.checkpoint["id"]
    assert [m["content"] for m in latest["channel_values"]["messages"]] == ["hello", "reply 1"]
    assert latest["metadata"] == root.metadata
    # A subgraph checkpoint, found by its id without --ns.
    sub = next(t for t in tup if t.config["configurable"]["checkpoint_ns"])
    shown = ok_json("show", store, "chat-2", sub.checkpoint["id"])
    assert shown["checkpoint_ns"] == sub.config["configurable"]["checkpoint_ns"]
    assert [w["channel"] for w in shown["pending_writes"]] == [
        c for _, c, _ in sub.pending_writes or ()
    ]
    interrupted = [s for s in (ok_json("show", store, "chat-2", t.checkpoint["id"]) for t in tup)]
    assert any(w["channel"] == "__interrupt__" for s in interrupted for w in s["pending_writes"])
    text = run("show", store, "chat-2")
    assert text.exit_code == 0
    assert "[0] human: hello" in text.stdout  # messages one line each
    assert "pending writes" in text.stdout


def test_show_unknown(store: str) -> None:
    assert "no checkpoint of thread 'chat-2' has an id starting with '1f00-nope'" in error(
        run("show", store, "chat-2", "1f00-nope")
    )
    assert "thread 'ghost' not found" in error(run("show", store, "ghost"))
    assert "thread 'ghost' not found" in error(run("history", store, "ghost"))


def test_stats(store: str) -> None:
    stats = ok_json("stats", store)
    with sqlite3.connect(store) as conn:
        for table in ("tether_checkpoints", "tether_blobs", "tether_writes"):
            (n,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert stats["tables"][table]["rows"] == n
    assert stats["threads"] == 2
    assert stats["bytes"] >= Path(store).stat().st_size
    assert run("stats", store).exit_code == 0


# --- prune, delete, copy ------------------------------------------------------------------


def _count(store: str, thread: str) -> int:
    return {i["thread_id"]: i["checkpoints"] for i in ok_json("threads", store)}.get(thread, 0)


def test_prune_keep(store: str) -> None:
    result = run("prune", store, "chat-1", "--keep", "1")
    assert result.exit_code == 0, result.output
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in _tuples(store, "chat-1")}
    assert _count(store, "chat-1") == len(namespaces)
    assert "chat-1:" in result.stdout
    assert "->" in result.stdout
    assert _count(store, "chat-2") > 0


def test_prune_delete_asks_unless_yes(store: str) -> None:
    before = _count(store, "chat-1")
    aborted = run("prune", store, "chat-1", "--delete", input="n\n")
    assert aborted.exit_code == 1
    assert _count(store, "chat-1") == before
    assert run("prune", store, "chat-1", "chat-2", "--delete", "--yes").exit_code == 0
    assert ok_json("threads", store) == []


def test_prune_usage(store: str) -> None:
    assert "exactly one of" in error(run("prune", store, "chat-1"), code=2)
    assert "exactly one of" in error(run("prune", store, "chat-1", "--keep", "2", "--delete"), 2)
    assert "0 is not in the range" in error(run("prune", store, "chat-1", "--keep", "0"), code=2)
    assert "thread 'ghost' not found" in error(run("prune", store, "ghost", "--keep", "1"))


def test_delete(store: str) -> None:
    assert run("delete", store, "chat-1", input="n\n").exit_code == 1
    assert _count(store, "chat-1") > 0
    result = run("delete", store, "chat-1", input="y\n")
    assert result.exit_code == 0, result.output
    assert "deleted thread chat-1" in result.stdout
    assert [i["thread_id"] for i in ok_json("threads", store)] == ["chat-2"]
    assert "thread 'chat-1' not found" in error(run("delete", store, "chat-1", "--yes"))


def test_copy(store: str) -> None:
    result = run("copy", store, "chat-2", "chat-3")
    assert result.exit_code == 0, result.output
    assert _count(store, "chat-3") == _count(store, "chat-2")
    src = [t.checkpoint["id"] for t in _tuples(store, "chat-2")]
    assert [t.checkpoint["id"] for t in _tuples(store, "chat-3")] == src
    assert "already has" in error(run("copy", store, "chat-2", "chat-3"))
    assert run("copy", store, "chat-2", "chat-3", "--overwrite").exit_code == 0
    assert "same thread" in error(run("copy", store, "chat-2", "chat-2"))
    assert "thread 'ghost' not found" in error(run("copy", store, "ghost", "x"))


# --- store errors ---------------------------------------------------------------------------


def test_store_errors(tmp_path: Path, official_sqlite: tuple[Path, Any]) -> None:
    missing = str(tmp_path / "nope.db")
    assert "no tether store at" in error(run("threads", missing))
    assert not Path(missing).exists()  # an inspecting command creates nothing
    official, _ = official_sqlite
    message = error(run("threads", str(official)))
    assert "LangGraph SqliteSaver store" in message
    assert "tether import" in message
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert "not a usable SQLite database" in error(run("stats", str(junk)))
    assert "unknown store scheme" in error(run("threads", "mysql://h/db"))
    assert "is a directory" in error(run("threads", str(tmp_path)))
    assert "module:Name" in error(run("show", missing, "t", "--allow", "nocolon"), code=2)


def test_a_type_outside_the_allowlist(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with tlg.SqliteSaver.from_conn_string(str(path), allowlist=[(Order.__module__, "Order")]) as s:
        order_graph(s).invoke({"order": Order("tea", 1)}, {"configurable": {"thread_id": "o"}})
    message = error(run("show", str(path), "o"))
    assert "Order" in message
    assert "--allow" in message
    shown = ok_json("show", str(path), "o", "--allow", f"{Order.__module__}:Order")
    assert shown["channel_values"]["order"] == {"type": "Order", "item": "tea", "qty": 2}
    # history lists the checkpoints without --allow (#13.4), their values left out
    result = run("history", str(path), "o", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert rows
    assert any("order" in r["changed"] for r in rows)
    assert {r["status"] for r in rows} == {None}
    assert "values not shown" in result.stderr
    assert f"--allow {Order.__module__}:Order" in result.stderr
    rows = ok_json("history", str(path), "o", "--allow", f"{Order.__module__}:Order")
    assert rows[0]["status"] == "idle"
    assert rows[0]["pending_writes"] == len(
        SqliteSaver(str(path), serde=langgraph_serializer([(Order.__module__, "Order")]))
        .get_tuple({"configurable": {"thread_id": "o"}})
        .pending_writes
        or ()
    )


# --- import -------------------------------------------------------------------------------


def test_import(official_sqlite: tuple[Path, Any], tmp_path: Path) -> None:
    source, before = official_sqlite
    target = str(tmp_path / "new.db")
    result = run("import", str(source), target)
    assert result.exit_code == 0, result.output
    assert "imported" in result.stdout
    assert "checkpoints" in result.stdout
    assert str(len(before["tuples"])) in result.stdout
    again = ok_json("import", str(source), target, "--no-progress")
    assert again["checkpoints"] == len(before["tuples"])
    assert again["threads"] == 2
    stats = ok_json("stats", target)
    assert stats["tables"]["tether_checkpoints"]["rows"] == len(before["tuples"])
    only = ok_json("import", str(source), str(tmp_path / "one.db"), "-t", "chat-2", "--no-progress")
    assert only["threads"] == 1
    # a tether store is not an official one, even as its own target
    assert "is a tether store" in error(run("import", target, f"sqlite:///{target}"))
    assert "no thread 'ghost'" in error(run("import", str(source), target, "-t", "ghost"))
    assert "no SQLite file" in error(run("import", str(tmp_path / "missing.db"), target))


# --- Postgres ---------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_store(
    official_postgres: tuple[str, Any], official_sqlite: tuple[Path, Any]
) -> None:
    url, before = official_postgres
    tether_url = url + "?schema=tether_cli"
    message = error(run("threads", url))
    assert "LangGraph's PostgresSaver tables" in message
    assert "tether import" in message
    assert "no tether store in schema 'tether_cli'" in error(run("threads", tether_url))
    summary = ok_json("import", url, tether_url)
    assert summary["checkpoints"] == len(before["tuples"])
    assert (
        ok_json("import", url, tether_url, "--no-progress")["checkpoints"] == summary["checkpoints"]
    )
    infos = ok_json("threads", tether_url)
    assert [i["thread_id"] for i in infos] == sorted(THREADS)
    assert sum(i["checkpoints"] for i in infos) == len(before["tuples"])
    stats = ok_json("stats", tether_url)
    assert stats["tables"]["tether_checkpoints"]["rows"] == len(before["tuples"])
    assert stats["bytes"] > 0
    rows = ok_json("history", tether_url, "chat-1")
    assert [r["checkpoint_id"] for r in rows] == [
        t[0]["configurable"]["checkpoint_id"]
        for t in before["tuples"]
        if t[0]["configurable"]["thread_id"] == "chat-1"
    ]
    assert run("copy", tether_url, "chat-1", "chat-9").exit_code == 0
    assert run("prune", tether_url, "chat-9", "--keep", "1").exit_code == 0
    assert run("delete", tether_url, "chat-9", "--yes").exit_code == 0
    assert [i["thread_id"] for i in ok_json("threads", tether_url)] == sorted(THREADS)
    # tether's tables have names of their own: an import into LangGraph's schema
    # puts them beside the official ones (the SQLite store's threads, here).
    beside = ok_json("import", str(official_sqlite[0]), url, "--no-progress")
    assert beside["checkpoints"] == len(official_sqlite[1]["tuples"])
    assert [i["thread_id"] for i in ok_json("threads", url)] == sorted(THREADS)


@pytest.mark.postgres
def test_postgres_unreachable() -> None:
    message = error(run("threads", "postgresql://nobody:secret@127.0.0.1:1/none"))
    assert "\n" not in message  # one line: what failed, not "retry"
    assert "host 127.0.0.1 port 1, database none" in message
    assert "postgresql://nobody:***@127.0.0.1:1/none" in message
    assert "secret" not in message
    assert "retry" not in message


@pytest.mark.postgres
def test_official_sqlite_into_postgres_via_cli(
    official_sqlite: tuple[Path, Any], pg_database: str
) -> None:
    source, before = official_sqlite
    target = as_url(pg_database)
    summary = ok_json("import", str(source), target, "--no-progress")
    assert summary["checkpoints"] == len(before["tuples"])


# --- prune on a graph with LangGraph DeltaChannel state -------------------------------------


def _concat(state: list[str], writes: Any) -> list[str]:
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


class DeltaState(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=4)]
    turns: int


def _delta_graph(saver: Any) -> Any:
    def step(state: DeltaState) -> DeltaState:
        turn = state.get("turns", 0)
        return {"items": [f"bot{turn}"], "turns": turn + 1}

    builder = StateGraph(DeltaState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=saver)


def test_prune_keeps_what_delta_channels_are_rebuilt_from(tmp_path: Path) -> None:
    path = str(tmp_path / "delta.db")
    config = {"configurable": {"thread_id": "d"}}
    with tlg.SqliteSaver.from_conn_string(path) as saver:
        graph = _delta_graph(saver)
        # until the latest checkpoint holds no value for `items` (it is rebuilt
        # from the ancestors' writes), so keeping only it would lose the list
        for i in range(12):
            graph.invoke({"items": [f"in{i}"]}, config)
            values = saver.get_tuple(config).checkpoint["channel_values"]
            if i >= 5 and "items" not in values:
                break
        else:  # pragma: no cover
            pytest.fail("every invoke ended on a DeltaChannel snapshot")
        expected = graph.get_state(config).values
        total = len(list(saver.list(config)))

    result = run("prune", path, "d", "--keep", "1")
    assert result.exit_code == 0, result.output
    kept = _count(path, "d")
    assert 1 < kept < total, (kept, total)
    assert f"d: {total} -> {kept} checkpoint(s) (kept the newest {kept} per namespace" in (
        " ".join(result.stdout.split())
    )
    with tlg.SqliteSaver.from_conn_string(path) as saver:
        assert _delta_graph(saver).get_state(config).values == expected


def test_prune_without_delta_channels_keeps_exactly_n(store: str) -> None:
    result = run("prune", store, "chat-2", "--keep", "2")
    assert result.exit_code == 0, result.output
    assert "DeltaChannel" not in result.stdout
    namespaces = {t.config["configurable"]["checkpoint_ns"] for t in _tuples(store, "chat-2")}
    assert _count(store, "chat-2") == 2 * len(namespaces)

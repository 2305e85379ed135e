"""Switching in on the official saver's own file (#13.2): import, refuse, or keep apart.

tether's SQLite tables have names of their own (``tether_checkpoints``, ...),
so one file can hold LangGraph's official ``checkpoints``/``writes`` and a
tether store. The official store here is made by
``langgraph.checkpoint.sqlite.SqliteSaver`` running a real graph
(``graphs.run_scenario``); then the tether drop-in is pointed at that file
in each ``import_official`` mode, and ``tether import PATH PATH`` runs through
the CLI. The official tables must never change.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from langgraph.types import Command

import tether.langgraph as tlg
from tether.backends.sqlite import SqliteSaver
from tether.cli._app import cli
from tether.errors import ConfigError, DecodeError

from .graphs import Order, build, config, histories, order_graph


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _official_rows(path: Path) -> tuple[list[Any], list[Any]]:
    with sqlite3.connect(path) as conn:
        return (
            sorted(conn.execute("SELECT * FROM checkpoints")),
            sorted(conn.execute("SELECT * FROM writes")),
        )


def _official_schema(path: Path) -> list[Any]:
    """Every object that is not tether's, with its SQL and its tables' columns."""
    with sqlite3.connect(path) as conn:
        objects = sorted(
            conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master "
                "WHERE name NOT LIKE 'tether%' AND tbl_name NOT LIKE 'tether%'"
            )
        )
        columns = [
            (name, list(conn.execute("SELECT * FROM pragma_table_info(?)", (name,))))
            for kind, name, _, _ in objects
            if kind == "table"
        ]
    assert any(o[1] == "checkpoints" for o in objects)
    return [objects, columns]


def _tether_count(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM tether_checkpoints").fetchone()[0])


def _official_history(path: Path) -> dict[str, Any]:
    with OfficialSqliteSaver.from_conn_string(str(path)) as official:
        return histories(official)


# --- import_official=None: refuse, naming the tables and the command -------------------------


async def test_the_default_refuses_and_gives_the_command(
    official_sqlite: tuple[Path, dict[str, Any]],
) -> None:
    path, before = official_sqlite
    digest = _digest(path)
    n = len(before["tuples"])
    opens = [
        lambda: SqliteSaver(path),
        lambda: tlg.SqliteSaver(str(path)),
        lambda: tlg.SqliteSaver.from_conn_string(str(path)).__enter__(),
    ]
    for open_ in opens:
        with pytest.raises(ConfigError) as info:
            open_()
        message = str(info.value)
        assert f"tether import {path} {path}" in message
        assert "checkpoints and writes" in message
        assert f"({n} checkpoint(s) of 2 thread(s))" in message
        assert "import_official=True" in message
    with pytest.raises(ConfigError, match=f"tether import {path} {path}"):
        async with tlg.AsyncSqliteSaver.from_conn_string(str(path)):
            pass
    assert _digest(path) == digest  # nothing was written, not even tether's tables


# --- import_official=True: imported, then opened ---------------------------------------------


def test_import_official_brings_the_threads_over(
    official_sqlite: tuple[Path, dict[str, Any]],
) -> None:
    path, before = official_sqlite
    official, schema = _official_rows(path), _official_schema(path)
    with tlg.SqliteSaver.from_conn_string(str(path), import_official=True) as saver:
        assert histories(saver) == before
        # an interrupted thread resumes under tether as it would have under LangGraph
        out = build(saver).invoke(Command(resume="ok"), config("chat-2"))
    assert [m.content for m in out["messages"]][-1] == "approved=ok"
    assert _official_rows(path) == official
    assert _official_schema(path) == schema  # no table, column or index of theirs altered
    assert _official_history(path) == before  # the official saver still reads its own
    imported = _tether_count(path)
    # tether now has checkpoints: every mode opens, and none imports again
    for mode in (None, True, False):
        with tlg.SqliteSaver.from_conn_string(str(path), import_official=mode) as saver:
            state = build(saver).get_state(config("chat-2"))
            assert state.values["approved"] == "ok"
    assert _tether_count(path) == imported


async def test_the_async_drop_in_imports_too(
    official_sqlite: tuple[Path, dict[str, Any]],
) -> None:
    path, before = official_sqlite
    async with tlg.AsyncSqliteSaver.from_conn_string(str(path), import_official=True) as saver:
        graph = build(saver)
        states = [s async for s in graph.aget_state_history(config("chat-1"))]
    assert [(s.config, s.values, s.next) for s in states] == [
        (h[0], h[1], h[2]) for h in before["chat-1"]
    ]


def test_an_interrupted_import_is_not_taken_for_a_finished_one(tmp_path: Path) -> None:
    path = tmp_path / "orders.db"
    with OfficialSqliteSaver.from_conn_string(str(path)) as official:
        graph = order_graph(official)
        for i in range(3):
            graph.invoke({"order": Order("tea", i)}, config(f"o{i}"))
        expected = [t.checkpoint for t in official.list(None)]
    # Order is the user's type: not in the allowlist, the import stops half-way
    with pytest.raises(DecodeError, match="Order"):
        tlg.SqliteSaver(str(path), import_official=True)
    with pytest.raises(ConfigError, match="did not finish"):
        tlg.SqliteSaver(str(path))
    allow = [(Order.__module__, "Order")]
    with tlg.SqliteSaver.from_conn_string(str(path), import_official=True, allowlist=allow) as s:
        assert [t.checkpoint for t in s.list(None)] == expected
    with tlg.SqliteSaver.from_conn_string(str(path), allowlist=allow) as s:  # finished now
        assert order_graph(s).get_state(config("o2")).values["order"] == Order("tea", 3)


# --- import_official=False: two histories side by side -------------------------------------


def test_import_official_false_keeps_both_histories_apart(
    official_sqlite: tuple[Path, dict[str, Any]],
) -> None:
    path, before = official_sqlite
    schema = _official_schema(path)
    with tlg.SqliteSaver.from_conn_string(str(path), import_official=False) as saver:
        assert list(saver.list(None)) == []
        graph = build(saver)
        graph.invoke({"messages": [("user", "mine")], "parts": []}, config("mine"))
        assert graph.get_state(config("chat-1")).values == {}
        mine = {t.config["configurable"]["thread_id"] for t in saver.list(None)}
    assert mine == {"mine"}
    assert _official_schema(path) == schema
    assert _official_history(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id = 'mine'").fetchone()
    # tether has its own checkpoints now: the default opens without asking
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        assert build(saver).get_state(config("mine")).values["messages"][0].content == "mine"


# --- the CLI: `tether import PATH PATH` ------------------------------------------------------


def test_cli_imports_into_the_same_file(official_sqlite: tuple[Path, dict[str, Any]]) -> None:
    path, before = official_sqlite
    official = _official_rows(path)
    result = run("import", str(path), str(path), "--no-progress", "--json")
    assert result.exit_code == 0, result.output
    assert '"checkpoints": ' + str(len(before["tuples"])) in result.stdout
    again = run("import", str(path), f"sqlite:///{path}", "--no-progress")
    assert again.exit_code == 0, again.output
    assert _tether_count(path) == len(before["tuples"])
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        assert histories(saver) == before
    assert _official_rows(path) == official
    threads = run("threads", str(path))
    assert threads.exit_code == 0, threads.output
    assert "chat-1" in threads.stdout


def test_cli_inspection_of_an_official_file_gives_the_same_file_import(
    official_sqlite: tuple[Path, dict[str, Any]],
) -> None:
    path, _ = official_sqlite
    digest = _digest(path)
    for command in ("threads", "stats", "delete"):
        args = [command, str(path)] + (["chat-1", "--yes"] if command == "delete" else [])
        result = run(*args)
        assert result.exit_code == 1
        assert f"tether import {path} {path}" in result.stderr
        assert "LangGraph SqliteSaver store" in result.stderr
    assert _digest(path) == digest


def test_a_file_with_only_tethers_tables_is_not_an_import_source(tmp_path: Path) -> None:
    path = tmp_path / "tether.db"
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        build(saver).invoke({"messages": [("user", "hi")], "parts": []}, config("t"))
    result = run("import", str(path), str(path))
    assert result.exit_code == 1
    assert "is a tether store" in result.stderr

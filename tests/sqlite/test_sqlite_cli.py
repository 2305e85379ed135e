"""The CLI's inspection commands open SQLite stores read-only, and create nothing (#18.5, #20.1b).

``threads``, ``history``, ``show`` and ``stats`` only read: an old store is
not migrated by them, a store whose header disagrees with its tables is
refused untouched, and an empty file is not turned into a store (it used to
be: ``tether threads empty.db`` exited 0 and wrote the schema). Commands
that manage a store (``prune``, ``delete``, ``copy``) never create one either.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tether import SqliteSaver
from tether.cli._app import cli

from .helpers import as_version, populate

INSPECT = [
    ["threads"],
    ["history", "thread-1"],
    ["show", "thread-1"],
    ["stats"],
]
MANAGE = [
    ["prune", "thread-1", "--keep", "1"],
    ["delete", "thread-1", "--yes"],
    ["copy", "thread-1", "thread-9"],
]


def run(command: list[str], store: Path) -> Result:
    return CliRunner().invoke(cli, [command[0], str(store), *command[1:]])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", INSPECT + MANAGE, ids=lambda c: c[0])
def test_an_empty_file_is_not_a_store(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    result = run(command, empty)
    assert result.exit_code == 1, result.output
    assert "no tether store at" in result.stderr
    assert "the file is empty" in result.stderr
    assert empty.read_bytes() == b""


@pytest.mark.parametrize("command", INSPECT + MANAGE, ids=lambda c: c[0])
def test_a_database_without_tether_tables_is_not_a_store(
    tmp_path: Path, command: list[str]
) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

    path = tmp_path / "official-empty.db"
    with OfficialSqliteSaver.from_conn_string(str(path)) as official:
        official.setup()  # the official tables, no checkpoint in them
    before = _digest(path)
    result = run(command, path)
    assert result.exit_code == 1, result.output
    assert "no tether tables" in result.stderr
    assert _digest(path) == before


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    current = tmp_path / "current.db"
    with SqliteSaver(current) as saver:
        populate(saver)
    old = tmp_path / "v3.db"
    as_version(current, old, 3)
    return old


@pytest.mark.parametrize("command", INSPECT, ids=lambda c: c[0])
def test_inspecting_an_old_store_does_not_migrate_it(old_store: Path, command: list[str]) -> None:
    before = _digest(old_store)
    result = run(command, old_store)
    assert result.exit_code == 1, result.output
    assert "has tether schema version 3" in result.stderr
    assert "never migrates" in result.stderr
    assert _digest(old_store) == before
    # a command that writes migrates it, and the inspection works then
    assert run(["copy", "thread-1", "thread-9"], old_store).exit_code == 0
    result = run(command, old_store)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", INSPECT + MANAGE, ids=lambda c: c[0])
def test_a_header_that_disagrees_is_refused_untouched(old_store: Path, command: list[str]) -> None:
    with sqlite3.connect(old_store) as conn:
        conn.execute("PRAGMA user_version = 2")
    before = _digest(old_store)
    result = run(command, old_store)
    assert result.exit_code == 1, result.output
    assert "records tether schema version 2" in result.stderr
    assert _digest(old_store) == before


@pytest.mark.parametrize("command", INSPECT, ids=lambda c: c[0])
def test_inspecting_writes_nothing(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "store.db"
    with SqliteSaver(path) as saver:
        populate(saver, deltas=False)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _digest(path)
    result = run(command, path)
    assert result.exit_code == 0, result.output
    assert _digest(path) == before

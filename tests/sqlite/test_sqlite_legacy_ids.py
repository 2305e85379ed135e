"""A thread stored before the name limit existed can be read and deleted (issue #20.3).

The limit (``MAX_NAME_BYTES``) guards writes: ``put``, ``put_writes`` and the
target of ``copy_thread`` refuse a longer id. A store written before it may
hold one -- here a real file whose thread was renamed to 600 bytes by raw SQL
(row checksums do not cover the thread id, so the rows stay valid) -- and
that thread is still listed, read, copied to a shorter id and deleted, by the
saver and by the CLI, instead of being shown but impossible to remove.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tether import MAX_NAME_BYTES, ConfigError, SqliteSaver
from tether.checkpoint import empty_checkpoint, make_config
from tether.cli._app import cli

LEGACY = "L" * 600  # past the 512-byte limit


def _store(path: Path) -> str:
    """A file holding thread LEGACY (two checkpoints, a value, a pending write) and 'short'."""
    with SqliteSaver(str(path)) as saver:
        for tid in ("legacy", "short"):
            first = empty_checkpoint()
            first["channel_values"] = {"n": 1}
            first["channel_versions"] = {"n": "1"}
            stored = saver.put(make_config(tid), first, {"source": "input", "step": -1}, {"n": "1"})
            saver.put_writes(stored, [("n", 2)], "task-1")
            second = empty_checkpoint()
            second["channel_versions"] = {"n": "1"}
            saver.put(stored, second, {"source": "loop", "step": 0}, {})
    with sqlite3.connect(path) as conn:
        # tether_threads too: a store migrated from a version without the thread
        # index gets its rows from these tables (#15).
        for table in ("tether_checkpoints", "tether_blobs", "tether_writes", "tether_threads"):
            conn.execute(f"UPDATE {table} SET thread_id = ? WHERE thread_id = 'legacy'", (LEGACY,))
    conn.close()
    return str(path)


def _threads(path: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT DISTINCT thread_id FROM tether_checkpoints ORDER BY 1")
        found = [r[0] for r in rows]
    conn.close()
    return found


def test_the_saver_reads_copies_and_deletes_a_legacy_thread(tmp_path: Path) -> None:
    path = _store(tmp_path / "legacy.db")
    assert len(LEGACY.encode()) > MAX_NAME_BYTES
    with SqliteSaver(path) as saver:
        latest = saver.get_tuple(make_config(LEGACY))
        assert latest is not None
        assert latest.checkpoint["channel_values"] == {"n": 1}
        history = list(saver.list(make_config(LEGACY)))
        assert len(history) == 2
        first = history[-1]
        assert first.pending_writes == [("task-1", "n", 2)]
        assert [w.value for w in saver.get_writes(first.config)] == [2]
        # writes stay bounded: no new checkpoint, write or copy under the long id
        with pytest.raises(ConfigError, match="bytes long"):
            saver.put(latest.config, empty_checkpoint(), {}, {})
        with pytest.raises(ConfigError, match="bytes long"):
            saver.put_writes(latest.config, [("n", 3)], "task-2")
        with pytest.raises(ConfigError, match="bytes long"):
            saver.copy_thread("short", LEGACY + "x")
        saver.copy_thread(LEGACY, "renamed")  # the way out: a copy under a short id
        assert len(list(saver.list(make_config("renamed")))) == 2
        saver.prune([LEGACY], strategy="keep_latest")
        assert len(list(saver.list(make_config(LEGACY)))) == 1
        saver.delete_thread(LEGACY)
        assert saver.get_tuple(make_config(LEGACY)) is None
    assert _threads(path) == ["renamed", "short"]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_cli_shows_and_deletes_a_legacy_thread(tmp_path: Path) -> None:
    path = _store(tmp_path / "legacy.db")
    result = run("threads", path, "--json")
    assert result.exit_code == 0, result.output
    assert [t["thread_id"] for t in json.loads(result.stdout)] == [LEGACY, "short"]
    for args in (("history", path, LEGACY), ("show", path, LEGACY)):
        result = run(*args, "--json")
        assert result.exit_code == 0, result.output
    result = run("delete", path, LEGACY, "--yes")
    assert result.exit_code == 0, result.output
    assert _threads(path) == ["short"]
    # a thread that is not there: one short line, the id quoted in part
    result = run("delete", path, LEGACY)
    assert result.exit_code == 1
    assert "not found" in result.stderr
    assert LEGACY not in result.stderr
    assert "(600 bytes)" in result.stderr

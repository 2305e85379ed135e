"""Append deltas on SQLite: what is stored, and what happens when a snapshot is gone."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tether import SqliteSaver
from tether.backends._sqlbase import value_checksum
from tether.errors import ConfigError, StorageError
from tether.serde import MsgpackSerializer
from tether.testing._history import message

from .helpers import step, thread


def _grow(saver: SqliteSaver, tid: str, n: int, start: Any = None) -> tuple[dict[str, Any], Any]:
    cfg, prev = start if start is not None else (thread(tid), None)
    for _ in range(n):
        history = [*(prev["channel_values"]["history"] if prev else []), None]
        history[-1] = message(len(history))
        cfg, prev = step(saver, cfg, prev, {"history": history, "turn": len(history)})
    return cfg, prev


def _rows(path: Path) -> list[tuple[str, str, str | None, int]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT thread_id, version, base, length(value) FROM tether_blobs "
            "WHERE channel = 'history'"
        ).fetchall()


def test_a_growing_history_is_stored_as_snapshots_and_tails(db_path: Path) -> None:
    with SqliteSaver(db_path, compress_threshold=None) as saver:
        cfg, prev = _grow(saver, "t", 200)
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["history"] == prev["channel_values"]["history"]
    rows = _rows(db_path)
    snapshots = [r for r in rows if r[1].startswith("~")]
    tails = [r for r in rows if r[2] is not None]
    # every step once the history is past the threshold (4 KiB: ten messages)
    assert 185 < len(tails) < 200
    assert 4 < len(snapshots) < 40
    stored = sum(r[3] for r in rows)
    serde = MsgpackSerializer()
    whole = sum(
        len(serde.dumps_typed([message(i) for i in range(1, n + 1)])[1]) for n in range(1, 201)
    )
    # the whole history at every step is O(N^2) bytes; snapshots and tails about
    # O(N^1.5): an eighth here at N = 200, less the longer the history
    assert stored < whole / 6


def test_delta_threshold_none_stores_whole_values(db_path: Path) -> None:
    with SqliteSaver(db_path, delta_threshold=None) as saver:
        _grow(saver, "t", 30)
    assert all(base is None and not v.startswith("~") for _, v, base, _ in _rows(db_path))


def test_bad_delta_threshold_is_a_config_error(db_path: Path) -> None:
    with pytest.raises(ConfigError, match="delta_threshold"):
        SqliteSaver(db_path, delta_threshold=0)


def test_a_tail_whose_snapshot_another_process_deleted_is_stored_whole(db_path: Path) -> None:
    with SqliteSaver(db_path) as writer, SqliteSaver(db_path) as other:
        start = _grow(writer, "t", 30)
        # another process deletes the thread: the writer still remembers its snapshot
        other.delete_thread("t")
        cfg, prev = _grow(writer, "t", 3, start)
        for reader in (writer, other):
            tup = reader.get_tuple(thread("t"))
            assert tup is not None
            assert tup.checkpoint["channel_values"]["history"] == prev["channel_values"]["history"]
        assert len(list(other.list(thread("t")))) == 3
        # and tails resume on the next snapshot
        _grow(writer, "t", 3, (cfg, prev))
    assert sum(1 for r in _rows(db_path) if r[2] is not None) >= 3


def test_prune_keeps_the_snapshots_survivors_extend(db_path: Path) -> None:
    with SqliteSaver(db_path) as saver:
        start = _grow(saver, "t", 60)
        saver.prune(["t"], strategy="keep_latest")
        rows = _rows(db_path)
        # the survivor's row and its snapshot, nothing else
        assert len(rows) == 2
        (tail,) = [r for r in rows if r[2] is not None]
        assert [r[1] for r in rows if r[1].startswith("~")] == [tail[2]]
        _, prev = _grow(saver, "t", 5, start)
        tup = saver.get_tuple(thread("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["history"] == prev["channel_values"]["history"]


def test_a_missing_snapshot_is_a_storage_error_naming_the_value(db_path: Path) -> None:
    with SqliteSaver(db_path) as saver:
        cfg, _ = _grow(saver, "t", 20)
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM tether_blobs WHERE version LIKE '~%'")
    with SqliteSaver(db_path) as saver, pytest.raises(StorageError) as info:
        saver.get_tuple(cfg)
    message_text = str(info.value)
    assert "'t'" in message_text
    assert "'history'" in message_text
    assert "missing" in message_text


def test_the_writer_reads_its_snapshot_without_decompressing_it(db_path: Path) -> None:
    """Snapshots never change: the process that wrote one decodes it from the bytes it holds.

    Shown by damaging the stored (compressed) snapshot: the writer still reads
    the value, a fresh saver, which must decompress it, reports the damage.
    """
    with SqliteSaver(db_path) as writer:
        cfg, prev = _grow(writer, "t", 30)
        with sqlite3.connect(db_path) as conn:
            (snapshot,) = conn.execute(
                "SELECT version FROM tether_blobs WHERE version LIKE '~%' "
                "AND encoding IN (2, 6) "
                "AND version = (SELECT base FROM tether_blobs WHERE channel = 'history' "
                "AND base IS NOT NULL ORDER BY rowid DESC LIMIT 1)"
            ).fetchone()
            # the payload damaged, the row's own checksum made to fit it: only
            # a read of the payload itself can tell
            channel, tag, encoding, base = conn.execute(
                "SELECT channel, type, encoding, base FROM tether_blobs WHERE version = ?",
                (snapshot,),
            ).fetchone()
            damaged = bytes.fromhex("28b52ffd00")
            conn.execute(
                "UPDATE tether_blobs SET value = ?, checksum = ? WHERE version = ?",
                (
                    damaged,
                    value_checksum(channel, snapshot, tag, encoding, base, damaged),
                    snapshot,
                ),
            )
        tup = writer.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["history"] == prev["channel_values"]["history"]
    with SqliteSaver(db_path) as fresh, pytest.raises(StorageError, match="damaged"):
        fresh.get_tuple(cfg)

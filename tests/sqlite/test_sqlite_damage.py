"""Damaged rows on a real file: refused by name, never read back as something else.

* #18.3: a checkpoint row carries an xxh3 checksum of its content; a changed
  byte in any covered column is a ``StorageError`` naming the row, on every
  read path (get_tuple, list with and without filters, the CLI).
* #18.4: a channel the checkpoint names whose value row is gone is a
  ``StorageError`` naming thread, namespace, checkpoint and channel (it used
  to come back without that channel), while a channel no put ever wrote is
  still read as absent; a head whose id is not its row's is refused.
* #20.2: a row whose metadata or versions column is not JSON is named
  (thread, checkpoint), not reported as an unusable database.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import xxhash
from click.testing import CliRunner

from tether import SqliteSaver
from tether.backends._sqlbase import row_checksum
from tether.checkpoint import empty_checkpoint
from tether.cli._app import cli
from tether.errors import DecodeError, StorageError, TetherError
from tether.ids import uuid6

from .helpers import populate, snapshot, step, thread


def _store(path: Path) -> list[tuple[Any, ...]]:
    with SqliteSaver(path) as saver:
        populate(saver)
        return snapshot(saver)


def _target(path: Path) -> tuple[str, str, str]:
    """(thread, ns, checkpoint id) of a checkpoint in the middle of thread-1's root."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM tether_checkpoints "
            "WHERE thread_id = 'thread-1' AND checkpoint_ns = '' ORDER BY checkpoint_id"
        ).fetchall()
    return rows[2]


def _reads(path: Path, tid: str, cid: str) -> list[Any]:
    """Every read that reaches the row: each returns an exception or a value."""
    out: list[Any] = []
    with SqliteSaver(path) as saver:
        for read in (
            lambda: saver.get_tuple({"configurable": {"thread_id": tid, "checkpoint_id": cid}}),
            lambda: list(saver.list({"configurable": {"thread_id": tid}})),
            lambda: list(saver.list(None)),
            lambda: list(saver.list(None, filter={"source": "loop"})),
            lambda: list(saver.list({"configurable": {"thread_id": tid}}, filter={"k": [1, 2]})),
        ):
            try:
                out.append(read())
            except TetherError as exc:
                out.append(exc)
    return out


# --- #18.3: row checksums ---------------------------------------------------------------------


def _flip(value: Any) -> Any:
    """The value with one byte changed (the same SQL type: bytes stay bytes, text text)."""
    if isinstance(value, bytes):
        return value[:10] + bytes([value[10] ^ 0x01]) + value[11:]
    if isinstance(value, int):
        return value ^ 1
    at = len(value) // 2
    return value[:at] + chr(ord(value[at]) ^ 0x01) + value[at + 1 :]


_COLUMNS = ["checkpoint", "metadata", "channel_versions", "parent_checkpoint_id", "type"]


@pytest.mark.parametrize("column", [*_COLUMNS, "checksum"])
def test_a_changed_byte_in_a_checkpoint_row_is_refused_on_every_read(
    db_path: Path, column: str
) -> None:
    _store(db_path)
    tid, ns, cid = _target(db_path)
    key = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
    with sqlite3.connect(db_path) as conn:
        (value,) = conn.execute(
            f"SELECT {column} FROM tether_checkpoints {key}",
            (tid, ns, cid),
        ).fetchone()
        conn.execute(
            f"UPDATE tether_checkpoints SET {column} = ? {key}",
            (_flip(value), tid, ns, cid),
        )
    for got in _reads(db_path, tid, cid):
        assert isinstance(got, StorageError), got
        assert "does not match its checksum: the row is damaged" in str(got)
        assert repr(cid) in str(got)
        assert repr(tid) in str(got)
    result = CliRunner().invoke(cli, ["show", str(db_path), tid, cid])
    assert result.exit_code == 1
    assert "the row is damaged" in result.stderr


def test_the_latest_row_damaged_is_refused_by_tether_threads(db_path: Path) -> None:
    _store(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE tether_checkpoints SET metadata = metadata || ' ' "
            "WHERE checkpoint_id = (SELECT max(checkpoint_id) FROM tether_checkpoints "
            "WHERE thread_id = 'thread-2' AND checkpoint_ns = '')"
        )
    result = CliRunner().invoke(cli, ["threads", str(db_path)])
    assert result.exit_code == 1
    assert "thread 'thread-2'" in result.stderr
    assert "the row is damaged" in result.stderr


def test_rows_from_before_the_checksum_are_read_unverified(db_path: Path) -> None:
    expected = _store(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE tether_checkpoints SET checksum = NULL")
    with SqliteSaver(db_path) as saver:
        assert snapshot(saver) == expected


def test_copied_threads_keep_valid_checksums(db_path: Path) -> None:
    _store(db_path)
    with SqliteSaver(db_path) as saver:
        saver.copy_thread("thread-0", "copy")
        copied = list(saver.list(thread("copy")))
        original = list(saver.list(thread("thread-0")))
    assert [t.checkpoint for t in copied] == [t.checkpoint for t in original]
    with sqlite3.connect(db_path) as conn:
        assert conn.execute(
            "SELECT count(*) FROM tether_checkpoints WHERE thread_id = 'copy' AND checksum IS NULL"
        ).fetchone() == (0,)


def test_the_checksum_frames_its_fields() -> None:
    # the same bytes split differently between fields hash differently
    a = row_checksum("ab", "c", "t", b"h", "{}", "{}", None)
    b = row_checksum("a", "bc", "t", b"h", "{}", "{}", None)
    c = row_checksum("a", None, "t", b"h", "{}", "{}", None)
    d = row_checksum("a", "", "t", b"h", "{}", "{}", None)
    assert len({a, b, c, d}) == 4
    assert all(-(2**63) <= x < 2**63 for x in (a, b, c, d))


# --- #18.4: missing value rows, heads that are not their row's ---------------------------------


def test_a_deleted_value_row_is_a_storage_error_naming_it(db_path: Path) -> None:
    _store(db_path)
    tid, ns, cid = _target(db_path)
    with sqlite3.connect(db_path) as conn:
        (versions,) = conn.execute(
            "SELECT channel_versions FROM tether_checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = ? AND checkpoint_id = ?",
            (tid, ns, cid),
        ).fetchone()
        gone = conn.execute(
            "DELETE FROM tether_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND channel = "
            "'fixed' AND version = ?",
            (tid, ns, json.loads(versions)["fixed"]),
        ).rowcount
    assert gone == 1
    for got in _reads(db_path, tid, cid):
        assert isinstance(got, StorageError), got
        text = str(got)
        assert "channel 'fixed'" in text
        assert "missing" in text
        assert f"thread {tid!r}" in text
        assert "checkpoint " in text


def test_a_put_carrying_over_a_value_its_parent_lost_is_refused(db_path: Path) -> None:
    with SqliteSaver(db_path) as saver:
        # b is a list: stored in a value row (small primitives stay in the head)
        cfg, prev = step(saver, thread("t"), None, {"a": 1, "b": [2]})
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("DELETE FROM tether_blobs WHERE channel = 'b'").rowcount == 1
        with pytest.raises(StorageError, match=r"channel 'b'.*names is missing"):
            step(saver, cfg, prev, {"a": 3})
    with sqlite3.connect(db_path) as conn:  # nothing was stored
        assert conn.execute("SELECT count(*) FROM tether_checkpoints").fetchone() == (1,)


def test_channels_no_put_ever_wrote_read_as_absent(db_path: Path) -> None:
    """The contract allows naming them (LangGraph's savers read them as absent)."""
    with SqliteSaver(db_path) as saver:
        ckpt = empty_checkpoint()
        ckpt["id"] = str(uuid6())
        ckpt["channel_values"] = {"a": 1}
        ckpt["channel_versions"] = {"a": "1", "ghost": "7"}
        cfg = saver.put(thread("t"), ckpt, {}, {"a": "1"})
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 1}
        assert tup.checkpoint["channel_versions"] == {"a": "1", "ghost": "7"}
        # a child carrying the ghost over reads it as absent too
        child = {**ckpt, "id": str(uuid6()), "channel_values": {"a": 2}}
        child["channel_versions"] = {"a": "2", "ghost": "7"}
        tup = saver.get_tuple(saver.put(cfg, child, {}, {"a": "2"}))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 2}
    with sqlite3.connect(db_path) as conn:
        assert [r[0] for r in conn.execute("SELECT unstored FROM tether_checkpoints")] == [
            '["ghost"]',
            '["ghost"]',
        ]


def test_a_head_whose_id_is_not_its_rows_is_refused(db_path: Path) -> None:
    with SqliteSaver(db_path) as saver:
        cfg, prev = step(saver, thread("t"), None, {"a": 1})
        step(saver, cfg, prev, {"a": 2})
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute(
            "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, channel_versions, "
            "metadata, unstored FROM tether_checkpoints ORDER BY checkpoint_id"
        ).fetchall()
        first, second = rows
        # the second row gets the first one's head, with a checksum that fits
        head = first[3]
        checksum = row_checksum(second[0], second[1], second[2], head, *second[4:])
        conn.execute(
            "UPDATE tether_checkpoints SET checkpoint = ?, checksum = ? WHERE checkpoint_id = ?",
            (head, checksum, second[0]),
        )
    for got in _reads(db_path, "t", second[0])[:3]:
        assert isinstance(got, StorageError), got
        assert f"says its checkpoint id is {first[0]!r}" in str(got)


# --- #20.2: one row whose JSON is damaged -------------------------------------------------------


@pytest.mark.parametrize("column", ["metadata", "channel_versions"])
@pytest.mark.parametrize("verified", [True, False], ids=["checksum", "no-checksum"])
def test_a_row_that_is_not_json_is_named_not_the_database(
    db_path: Path, column: str, verified: bool
) -> None:
    _store(db_path)
    tid, ns, cid = _target(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            f"UPDATE tether_checkpoints SET {column} = substr({column}, 1, 9) "
            + ("" if verified else ", checksum = NULL ")
            + "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (tid, ns, cid),
        )
    result = CliRunner().invoke(cli, ["history", str(db_path), tid])
    assert result.exit_code == 1
    assert "not a usable SQLite database" not in result.stderr
    assert cid in result.stderr
    reads = _reads(db_path, tid, cid)
    with SqliteSaver(db_path) as saver:
        try:  # keeps every checkpoint, reads every row's versions to collect values
            saver.prune([tid], strategy="keep_last", keep=99)
        except TetherError as exc:
            reads.append(exc)
    for got in reads:
        if not isinstance(got, TetherError):
            # metadata is only JSON to SQL in a filter; the row itself is named below
            assert column == "metadata"
            continue
        assert "not a usable SQLite database" not in str(got)
        assert cid in str(got)
        assert tid in str(got)
        if verified:
            assert isinstance(got, StorageError)
            assert "the row is damaged" in str(got)
        else:
            assert isinstance(got, DecodeError)
            assert f"stored {column} of a checkpoint" in str(got) or "not JSON" in str(got)
    assert any(isinstance(got, TetherError) for got in reads)


# --- #18: write rows and value rows have checksums, checkpoints count their writes ----------

_WRITE_KEY = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"


def _write_reads(path: Path, tid: str, cid: str) -> list[Any]:
    """Every read that returns the checkpoint's pending writes."""
    out = _reads(path, tid, cid)[:3]
    with SqliteSaver(path) as saver:
        try:
            out.append(saver.get_writes({"configurable": {"thread_id": tid, "checkpoint_id": cid}}))
        except TetherError as exc:
            out.append(exc)
    result = CliRunner().invoke(cli, ["history", str(path), tid])
    out.append(StorageError(result.stderr) if result.exit_code == 1 else result.output)
    return out


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM tether_writes {key} AND idx = 0",
        "UPDATE tether_writes SET checkpoint_id = checkpoint_id || 'x' {key} AND idx = 0",
        "INSERT INTO tether_writes SELECT thread_id, checkpoint_ns, checkpoint_id, task_id || 'x',"
        " task_path, idx, channel, type, value, encoding, checksum FROM tether_writes {key}"
        " AND idx = 0",
    ],
    ids=["deleted", "moved-away", "copied-in"],
)
def test_a_lost_moved_or_added_write_row_is_refused(db_path: Path, damage: str) -> None:
    _store(db_path)
    tid, ns, cid = _target(db_path)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute(f"SELECT count(*) FROM tether_writes {_WRITE_KEY}", (tid, ns, cid))
        conn.execute(damage.format(key=_WRITE_KEY), (tid, ns, cid))
    for got in _write_reads(db_path, tid, cid):
        assert isinstance(got, StorageError), got
        # a row that moves or is copied in under another key fails its own checksum too
        assert "pending write rows where it recorded" in str(got) or (
            damage.startswith("INSERT") and "does not match its checksum" in str(got)
        )
        assert cid in str(got)


@pytest.mark.parametrize("column", ["channel", "task_id", "task_path", "idx", "value", "type"])
def test_a_changed_byte_in_a_write_row_is_refused(db_path: Path, column: str) -> None:
    _store(db_path)
    tid, ns, cid = _target(db_path)
    with sqlite3.connect(db_path) as conn:
        rowid, value = conn.execute(
            f"SELECT rowid, {column} FROM tether_writes {_WRITE_KEY} AND idx = 0", (tid, ns, cid)
        ).fetchone()
        if column == "value":  # the payload's own checksum made to fit: the row's still tells
            value = value[:-1] + bytes([value[-1] ^ 1])
            conn.execute(
                "UPDATE tether_writes SET value = ? WHERE rowid = ?",
                (xxhash.xxh3_64_intdigest(value[4:]).to_bytes(8, "little")[:4] + value[4:], rowid),
            )
        else:  # idx: one no other write of the task has
            changed = value + 100 if column == "idx" else _flip(value)
            conn.execute(f"UPDATE tether_writes SET {column} = ? WHERE rowid = ?", (changed, rowid))
    for got in _write_reads(db_path, tid, cid)[:4]:
        assert isinstance(got, StorageError), got
        assert "does not match its checksum" in str(got)
        assert cid in str(got)


@pytest.mark.parametrize("column", ["base", "version", "type", "value", "encoding"])
def test_a_changed_byte_in_a_value_row_is_refused(db_path: Path, column: str) -> None:
    _store(db_path)
    with sqlite3.connect(db_path) as conn:
        # an append tail: its base names another row of the same channel
        rowid, tid, ns, channel, version, value = conn.execute(
            f"SELECT rowid, thread_id, checkpoint_ns, channel, version, {column} "
            "FROM tether_blobs WHERE base IS NOT NULL AND checkpoint_ns = '' "
            "ORDER BY rowid DESC LIMIT 1"
        ).fetchone()
        if column == "base":  # another stored version of the channel: a valid-looking base
            (changed,) = conn.execute(
                "SELECT version FROM tether_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
                "AND channel = ? AND version <> ? AND version <> ? LIMIT 1",
                (tid, ns, channel, version, value),
            ).fetchone()
        elif column == "encoding":
            changed = value & ~4  # the checksum flag off: the payload read as plain bytes
        else:
            changed = _flip(value)
        conn.execute(f"UPDATE tether_blobs SET {column} = ? WHERE rowid = ?", (changed, rowid))
        (cid,) = conn.execute(
            "SELECT checkpoint_id FROM tether_checkpoints, json_each(channel_versions) AS j "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND j.key = ? AND j.value = ?",
            (tid, ns, channel, version),
        ).fetchone()
    for got in _reads(db_path, tid, cid)[:3]:
        assert isinstance(got, StorageError), got
        assert "damaged" in str(got) or "missing" in str(got)
        assert tid in str(got)


def test_write_counts_follow_every_operation(db_path: Path) -> None:
    """Re-puts, writes before their checkpoint, copies over a target, prunes: no false alarm."""
    expected = _store(db_path)
    with SqliteSaver(db_path) as saver:
        tid = "thread-1"
        latest = saver.get_tuple(thread(tid))
        assert latest is not None
        # a checkpoint put again keeps its writes
        assert latest.parent_config is not None
        saver.put(latest.parent_config, latest.checkpoint, latest.metadata, {})
        assert saver.get_tuple(latest.config) == latest
        # writes before their checkpoint's put
        early = empty_checkpoint()
        early["id"] = str(uuid6())
        saver.put_writes(_at(tid, early["id"]), [("a", 1)], "first")
        saver.put(thread(tid), early, {}, {})
        got = saver.get_tuple(_at(tid, early["id"]))
        assert got is not None
        assert got.pending_writes == [("first", "a", 1)]
        # a copy over a target that has its own writes at the same checkpoint
        saver.put(thread("dst"), early, {}, {})
        saver.put_writes(_at("dst", early["id"]), [("b", 2)], "theirs")
        saver.put_writes(_at("dst", early["id"]), [("a", 9)], "first")
        saver.copy_thread(tid, "dst")
        got = saver.get_tuple(_at("dst", early["id"]))
        assert got is not None
        assert sorted(got.pending_writes) == [("first", "a", 1), ("theirs", "b", 2)]
        assert len(list(saver.list(thread("dst")))) >= len(
            [t for t in expected if t[0] == tid and t[1] == ""]
        )
        saver.prune([tid], strategy="keep_last", keep=2)
        assert len(list(saver.list(thread(tid)))) > 0
        snapshot(saver)  # every checkpoint of every thread reads


def _at(tid: str, cid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cid}}


# --- #19: a small state is read from its row alone, and only when its rows say so -----------


def _small_state(path: Path, writes: int) -> dict[str, Any]:
    """A thread whose latest checkpoint keeps every value inline; ``writes`` pending writes."""
    with SqliteSaver(path) as saver:
        cfg, prev = {"configurable": {"thread_id": "s", "checkpoint_ns": ""}}, None
        for i in range(2):
            cfg, prev = step(saver, cfg, prev, {"k": i}, {"source": "loop", "step": i})
        if writes:
            saver.put_writes(cfg, [("k", n) for n in range(writes)], "task")
    return cfg


@pytest.mark.parametrize(
    ("writes", "damage"),
    [
        (1, "UPDATE tether_checkpoints SET nwrites = 0 {key}"),
        (0, "UPDATE tether_checkpoints SET nwrites = 1 {key}"),
        (
            0,
            "INSERT INTO tether_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
            "channel, type, value) VALUES (?1, ?2, ?3, 'x', 0, 'k', 'msgpack', x'00')",
        ),
    ],
    ids=["count-lost", "count-added", "row-added"],
)
def test_a_small_state_whose_count_and_write_rows_disagree_is_refused(
    db_path: Path, writes: int, damage: str
) -> None:
    cfg = _small_state(db_path, writes)
    cid = cfg["configurable"]["checkpoint_id"]
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            damage.format(key="WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"),
            ("s", "", cid),
        )
    with SqliteSaver(db_path) as saver:
        for config in (cfg, {"configurable": {"thread_id": "s"}}):
            with pytest.raises(StorageError, match="pending write rows where it recorded"):
                saver.get_tuple(config)


def test_a_small_state_with_a_changed_row_is_refused(db_path: Path) -> None:
    cfg = _small_state(db_path, 0)
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE tether_checkpoints SET metadata = "
            "replace(metadata, '\"step\":1', '\"step\":7') "
            "WHERE thread_id = 's' AND checkpoint_id = ?",
            (cfg["configurable"]["checkpoint_id"],),
        )
    with SqliteSaver(db_path) as saver, pytest.raises(StorageError, match="checksum"):
        saver.get_tuple({"configurable": {"thread_id": "s"}})

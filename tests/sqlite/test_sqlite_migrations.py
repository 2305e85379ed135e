"""Every migration from a populated store of the version before, and files whose header lies.

A store of version N is made from real puts: a current store is populated
(namespaces, forks, pending writes, append-delta snapshots and tails), then
its rows are laid out in tables built by the migrations up to N (see
``helpers.as_version``). Opening it migrates it in place; every
checkpoint must read back equal, and the store must go on taking puts.

Files whose ``PRAGMA user_version`` disagrees with their tables (#18.5: a
restore tool, a downgrade script, tampering) are refused before anything is
written: re-running the 2 -> 3 step on a version 3 store rebuilt the blob
table without the append-delta bases, and every tail then read as the whole
list.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tether import SqliteSaver
from tether.backends.sqlite._schema import (
    CREATE,
    MIGRATIONS,
    SCHEMA_VERSION,
    ensure_schema,
    expected_shape,
    migration_functions,
)
from tether.errors import ConfigError, SchemaVersionError

from .helpers import as_version, populate, snapshot, step, thread, user_version


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _set_version(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# Per old version: the options a store of that version could have been written with.
# Stores before version 7 kept no value inline in the head.
_OPTIONS: dict[int, dict[str, Any]] = {
    1: {"delta_threshold": None, "compress_threshold": None, "inline_primitives": False},
    2: {"delta_threshold": None, "inline_primitives": False},
    3: {"inline_primitives": False},
    4: {"inline_primitives": False},
    5: {"inline_primitives": False},
    6: {"inline_primitives": False},
    7: {},
    8: {},
    9: {},
    10: {},
}


def _old_store(tmp_path: Path, version: int) -> tuple[Path, list[tuple[Any, ...]]]:
    """A store of ``version`` from real puts, and every checkpoint it holds."""
    current = tmp_path / "current.db"
    with SqliteSaver(current, **_OPTIONS[version]) as saver:
        populate(saver, deltas=version >= 3)
        expected = snapshot(saver)
    old = tmp_path / f"v{version}.db"
    as_version(current, old, version)
    assert user_version(old) == version
    return old, expected


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
def test_a_populated_store_of_each_version_migrates_with_everything_equal(
    tmp_path: Path, version: int
) -> None:
    old, expected = _old_store(tmp_path, version)
    if version >= 3:
        blobs = "checkpoint_blobs" if version == 3 else "tether_blobs"
        with sqlite3.connect(old) as conn:
            tails = conn.execute(f"SELECT count(*) FROM {blobs} WHERE base IS NOT NULL").fetchone()[
                0
            ]
            snapshots = conn.execute(
                f"SELECT count(*) FROM {blobs} WHERE version LIKE '~%'"
            ).fetchone()[0]
        assert tails > 20
        assert snapshots > 2
    with sqlite3.connect(old) as conn:  # heads as that version wrote them: JSON from 6 on
        table = "tether_checkpoints" if version >= 4 else "checkpoints"
        head = "head+json" if version >= 6 else "msgpack"
        assert conn.execute(f"SELECT DISTINCT type FROM {table}").fetchall() == [(head,)]
    with SqliteSaver(old) as saver:
        assert snapshot(saver) == expected
        # the migrated store takes new puts, tails included, and reads them back
        latest = saver.get_tuple(thread("thread-0"))
        assert latest is not None
        history = [*latest.checkpoint["channel_values"]["history"], {"new": "message"}]
        cfg, _ = step(saver, latest.config, latest.checkpoint, {"history": history})
        back = saver.get_tuple(cfg)
        assert back is not None
        assert back.checkpoint["channel_values"]["history"] == history
    assert user_version(old) == SCHEMA_VERSION
    with sqlite3.connect(old) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        indexes = {
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")
            if not r[0].startswith("sqlite_")
        }
        # rows from before version 4 carry no checksum; the new one does
        checksums = conn.execute(
            "SELECT count(*), count(checksum) FROM tether_checkpoints"
        ).fetchone()
        # rows from before version 5 carry no write count and no blob checksum
        counted = conn.execute("SELECT count(*), count(nwrites) FROM tether_checkpoints").fetchone()
        blob_sums = conn.execute("SELECT count(*), count(checksum) FROM tether_blobs").fetchone()
    assert tables == {
        *("tether_checkpoints", "tether_blobs", "tether_writes", "tether_meta"),
        "tether_threads",
    }
    assert indexes == {
        "tether_checkpoints_nested",
        "tether_checkpoints_order",
        "tether_checkpoints_run",
        "tether_threads_updated",
        "tether_threads_status",
        "tether_threads_retention",
    }
    if version < 4:
        assert checksums == (len(expected) + 1, 1)
    else:
        assert checksums == (len(expected) + 1, len(expected) + 1)
    assert counted == (len(expected) + 1, 1 if version < 5 else len(expected) + 1)
    if version < 5:
        assert 0 < blob_sums[1] < blob_sums[0]
    else:
        assert blob_sums[1] == blob_sums[0]
    with SqliteSaver(old) as saver:  # and opens again as a current store
        assert len(snapshot(saver)) == len(expected) + 1


def _structure(conn: sqlite3.Connection) -> dict[str, Any]:
    """Tables with their columns (name, type, not null, default, pk), and indexes."""
    out: dict[str, Any] = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        out[name] = [tuple(r[1:]) for r in conn.execute(f"PRAGMA table_info({name})")]
        for idx in conn.execute(f"PRAGMA index_list({name})"):
            cols = [r[2] for r in conn.execute(f"PRAGMA index_info({idx[1]})")]
            key = idx[1] if not idx[1].startswith("sqlite_autoindex") else f"{name}:pk"
            out[f"index {key}"] = (idx[2], idx[3], idx[4], cols)
    return out


def test_a_new_store_is_what_the_migrations_build() -> None:
    built = sqlite3.connect(":memory:")
    migration_functions(built)
    for group in MIGRATIONS:
        for statement in group:
            built.execute(statement)
    fresh = sqlite3.connect(":memory:")
    for statement in CREATE:
        fresh.execute(statement)
    assert _structure(fresh) == _structure(built)


def test_a_new_file_is_created_in_one_step(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    assert ensure_schema(conn, str(path), wal=True) == 0
    conn.close()
    assert not any("RENAME" in s for s in statements)
    assert user_version(path) == SCHEMA_VERSION


# --- a header that disagrees with the tables (#18.5) ----------------------------------------


def test_a_v3_store_whose_header_reads_2_is_refused_untouched(tmp_path: Path) -> None:
    old, expected = _old_store(tmp_path, 3)
    _set_version(old, 2)
    before = _digest(old)
    with pytest.raises(SchemaVersionError) as info:
        SqliteSaver(old)
    message = str(info.value)
    assert "records tether schema version 2" in message
    assert "base" in message  # the column that tells the versions apart
    assert "`PRAGMA user_version = 3`" in message
    assert "did not change the file" in message
    assert (info.value.found, info.value.supported) == (2, SCHEMA_VERSION)
    assert _digest(old) == before
    with pytest.raises(SchemaVersionError):
        SqliteSaver(old, read_only=True)
    assert _digest(old) == before
    # once the header agrees again, the store migrates with its tails intact
    _set_version(old, 3)
    with SqliteSaver(old) as saver:
        assert snapshot(saver) == expected


@pytest.mark.parametrize(
    ("recorded", "shape"),
    [
        *((9, 10), (8, 10), (7, 10), (7, 8), (6, 8), (4, 8), (3, 8)),
        *((4, 5), (3, 4), (2, 4), (0, 4), (1, 3), (0, 3)),
    ],
)
def test_every_mismatch_of_header_and_tables_is_refused(
    tmp_path: Path, recorded: int, shape: int
) -> None:
    if shape == SCHEMA_VERSION:
        path = tmp_path / "current.db"
        with SqliteSaver(path) as saver:
            populate(saver, deltas=True)
    else:
        path, _ = _old_store(tmp_path, shape)
    _set_version(path, recorded)
    before = _digest(path)
    # the hint names the first version with those tables (5, 6 and 7 share them:
    # 6 and 7 changed what rows hold, not the tables; 5 then migrates in place)
    same = min(v for v in range(shape + 1) if expected_shape(v) == expected_shape(shape))
    with pytest.raises(SchemaVersionError, match=f"user_version = {same}`"):
        SqliteSaver(path)
    assert _digest(path) == before


def test_unknown_tables_at_version_0_are_still_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")
    before = _digest(path)
    with pytest.raises(Exception, match="not a tether store"):
        SqliteSaver(path)
    assert _digest(path) == before


# --- read-only -------------------------------------------------------------------------------


def test_read_only_reads_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    # a store in rollback-journal mode: a read-only open must not switch it to WAL
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    with SqliteSaver(conn) as saver:
        populate(saver)
        expected = snapshot(saver)
    conn.close()
    before = _digest(path)
    with SqliteSaver(path, read_only=True) as saver:
        assert snapshot(saver) == expected
        assert saver.stats()["checkpoints"] == len(expected)
        tup = saver.get_tuple(thread("thread-1"))
        assert tup is not None
        for call in (
            lambda: saver.put(tup.config, tup.checkpoint, {}, {}),
            lambda: saver.put_writes(tup.config, [("a", 1)], "task"),
            lambda: saver.delete_thread("thread-1"),
            lambda: saver.copy_thread("thread-1", "x"),
            lambda: saver.prune(["thread-1"]),
            lambda: saver.delete_for_runs(["run-1-0"]),
        ):
            with pytest.raises(ConfigError, match="read_only=True"):
                call()
        saver.setup()  # checks, writes nothing
    assert _digest(path) == before
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


async def test_read_only_async(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SqliteSaver(path) as saver:
        populate(saver, deltas=False)
        expected = snapshot(saver)
    async with SqliteSaver(path, read_only=True) as saver:
        got = [t async for t in saver.alist(None)]
        assert len(got) == len(expected)
        with pytest.raises(ConfigError, match="read_only=True"):
            await saver.aput(got[0].config, got[0].checkpoint, {}, {})


def test_read_only_never_migrates(tmp_path: Path) -> None:
    old, _ = _old_store(tmp_path, 3)
    before = _digest(old)
    with pytest.raises(SchemaVersionError) as info:
        SqliteSaver(old, read_only=True)
    assert "without read_only=True" in str(info.value)
    assert (info.value.found, info.value.supported) == (3, SCHEMA_VERSION)
    assert _digest(old) == before


def test_read_only_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(ConfigError, match="no such file"):
        SqliteSaver(missing, read_only=True)
    assert not missing.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(ConfigError, match="no tether store"):
        SqliteSaver(empty, read_only=True)
    assert empty.read_bytes() == b""
    with pytest.raises(ConfigError, match="database file"):
        SqliteSaver(":memory:", read_only=True)
    with pytest.raises(ConfigError, match="needs read_only=False"):
        SqliteSaver(tmp_path / "x.db", read_only=True, import_official=True)


def test_read_only_refuses_a_newer_store(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SqliteSaver(path).close()
    _set_version(path, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="upgrade tether"):
        SqliteSaver(path, read_only=True)


def test_a_store_of_version_6_gets_a_thread_index_equal_to_a_scan(tmp_path: Path) -> None:
    """Migration 6 -> 7 creates tether_threads and fills it: counts, namespaces, the
    latest root checkpoint and its metadata in SQL, the status from the decoded latest
    checkpoint (#15); times from the checkpoints' ts."""
    import asyncio
    from datetime import UTC, datetime

    from tether.checkpoint import ERROR, INTERRUPT
    from tether.testing._driver import Driver
    from tether.testing._threads import check_index, scan

    current = tmp_path / "current.db"
    with SqliteSaver(current) as saver:
        populate(saver, deltas=True)
        # statuses other than idle: an interrupt and an error on latest root checkpoints
        one = saver.get_tuple(thread("thread-1"))
        two = saver.get_tuple(thread("thread-2"))
        assert one is not None
        assert two is not None
        saver.put_writes(one.config, [(INTERRUPT, ["approve?"])], "task-1")
        saver.put_writes(two.config, [(ERROR, "ValueError('no')")], "task-2")
        names = [f"thread-{t}" for t in range(3)]
        expected = asyncio.run(scan(Driver(saver, "sync"), names))
    assert {v["status"] for v in expected.values()} == {"idle", "interrupted", "error"}
    old = tmp_path / "v6.db"
    as_version(current, old, 6)
    with sqlite3.connect(old) as conn:
        assert conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'tether_threads'"
        ).fetchone() == (0,)
    with SqliteSaver(old) as saver:
        asyncio.run(check_index(Driver(saver, "sync"), names, "migrated"))
        rows = {r.thread_id: r for r in saver.threads(order="thread_id")}
        for name in names:  # the first and last ts of the thread (julianday: ms precision)
            stamps = [
                datetime.fromisoformat(t.checkpoint["ts"]).astimezone(UTC)
                for t in saver.list({"configurable": {"thread_id": name}})
            ]
            assert abs((rows[name].updated_at - max(stamps)).total_seconds()) < 0.002
            assert abs((rows[name].created_at - min(stamps)).total_seconds()) < 0.002
        # and it is kept from there on
        latest = saver.get_tuple(thread("thread-0"))
        assert latest is not None
        step(saver, latest.config, latest.checkpoint, {"extra": 1})
        asyncio.run(check_index(Driver(saver, "sync"), names, "a put after the migration"))
    assert user_version(old) == SCHEMA_VERSION


def test_version_10_re_checksums_the_write_rows_that_match_and_keeps_a_damaged_one_refused(
    tmp_path: Path,
) -> None:
    """10 -> 11 swaps each write row's text-framed checksum for the MessagePack-framed
    one only where the old one matches: a row damaged before is still refused."""
    from tether.backends._sqlbase import write_checksum, write_checksum_v1
    from tether.errors import StorageError

    old, _ = _old_store(tmp_path, 10)
    fields = "checkpoint_id, task_id, task_path, idx, channel, type, encoding, value"
    query = f"SELECT rowid, thread_id, checkpoint_ns, checksum, {fields} FROM tether_writes"
    with sqlite3.connect(old) as conn:
        rows = conn.execute(query).fetchall()
        assert len(rows) > 3
        assert all(r[3] == write_checksum_v1(*r[4:]) for r in rows)
        damaged = rows[0]
        # one flipped byte in the payload's own checksum, which the row's covers
        # (damage past it is the payload checksum's to find, before and after)
        conn.execute(
            "UPDATE tether_writes SET value = ? WHERE rowid = ?",
            (bytes([damaged[-1][0] ^ 1]) + damaged[-1][1:], damaged[0]),
        )
    address = {"thread_id": damaged[1], "checkpoint_ns": damaged[2], "checkpoint_id": damaged[4]}
    with SqliteSaver(old) as saver, pytest.raises(StorageError, match="checksum"):
        saver.get_tuple({"configurable": address})
    assert user_version(old) == SCHEMA_VERSION
    with sqlite3.connect(old) as conn:
        after = conn.execute(query).fetchall()
    assert len(after) == len(rows)
    for r in after:
        if r[0] == damaged[0]:
            assert r[3] == damaged[3]  # kept: it matches neither framing
            assert r[3] != write_checksum(*r[4:])
        else:
            assert r[3] == write_checksum(*r[4:])

"""Schema versions, migrations and files that are not (or no longer) tether stores."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether import SqliteSaver
from tether.backends.sqlite._schema import MIGRATIONS, SCHEMA_VERSION, ensure_schema
from tether.errors import SchemaVersionError, StorageError

from .helpers import step, thread


def _version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_new_file_gets_the_current_schema_and_wal(db_path: Path) -> None:
    assert not db_path.exists()
    with SqliteSaver(db_path) as saver:
        assert saver.path == str(db_path)
    assert _version(db_path) == SCHEMA_VERSION
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        *("tether_checkpoints", "tether_blobs", "tether_writes", "tether_meta"),
        "tether_threads",
    } == tables


def test_reopening_is_idempotent_and_keeps_data(db_path: Path) -> None:
    with SqliteSaver(db_path) as saver:
        cfg, _ = step(saver, thread("t"), None, {"a": 1})
        saver.setup()
    with SqliteSaver(db_path) as saver:
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 1}


def test_newer_schema_is_refused_and_nothing_is_written(db_path: Path) -> None:
    SqliteSaver(db_path).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 3}")
    before = db_path.read_bytes()
    with pytest.raises(SchemaVersionError) as info:
        SqliteSaver(db_path)
    assert info.value.found == SCHEMA_VERSION + 3
    assert info.value.supported == SCHEMA_VERSION
    assert str(SCHEMA_VERSION + 3) in str(info.value)
    assert str(SCHEMA_VERSION) in str(info.value)
    assert db_path.read_bytes() == before


def test_a_database_of_the_first_schema_is_migrated_with_its_data(db_path: Path) -> None:
    # Build the file the way the first release did: migration 0 -> 1 only.
    conn = sqlite3.connect(db_path, isolation_level=None)
    ensure_schema(conn, str(db_path), wal=True, target=1)
    assert _version(db_path) == 1
    conn.execute(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, "
        "channel_versions, metadata) VALUES (?, '', ?, ?, ?, ?, ?)",
        ("old", "1ef00000-0000-6000-8000-000000000001", *_head(), '{"a":"1"}', '{"step":3}'),
    )
    conn.execute(
        "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, value) "
        "VALUES ('old', '', 'a', '1', 'msgpack', ?)",
        (b"\x2a",),
    )
    conn.close()
    assert len(MIGRATIONS) > 1
    with SqliteSaver(db_path) as saver:
        tup = saver.get_tuple(thread("old"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 42}
        assert tup.metadata == {"step": 3}
        # the migrated file takes new writes with the new columns
        step(saver, thread("old"), tup.checkpoint, {"a": 43})
        assert saver.get_tuple(thread("old")).checkpoint["channel_values"] == {"a": 43}  # type: ignore[union-attr]
    assert _version(db_path) == SCHEMA_VERSION


def _head() -> tuple[str, bytes]:
    from tether.checkpoint import empty_checkpoint
    from tether.serde import MsgpackSerializer

    head = {k: v for k, v in empty_checkpoint().items() if k != "channel_values"}
    head["id"] = "1ef00000-0000-6000-8000-000000000001"
    head["channel_versions"] = {"a": "1"}
    return MsgpackSerializer().dumps_typed(head)


def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = path.read_bytes()
    with pytest.raises(StorageError) as info:
        SqliteSaver(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == before


def test_a_corrupted_page_raises_storage_error_naming_the_path(db_path: Path) -> None:
    with SqliteSaver(db_path) as saver:
        cfg = thread("t")
        prev = None
        for i in range(200):
            cfg, prev = step(saver, cfg, prev, {"a": "x" * 500 + str(i)})
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    assert pages > 6
    data = bytearray(db_path.read_bytes())
    for page in range(2, pages):  # keep the header page, garble the b-trees
        start = page * page_size
        data[start : start + 64] = b"\xa5" * 64
    db_path.write_bytes(bytes(data))
    with pytest.raises(StorageError) as info, SqliteSaver(db_path) as saver:
        list(saver.list(None))
    assert str(db_path) in str(info.value)


def test_connection_settings(db_path: Path) -> None:
    with (
        SqliteSaver(db_path, synchronous="FULL", busy_timeout=2.5) as saver,
        saver._conns.connection() as conn,
    ):
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
    with SqliteSaver(db_path) as saver, saver._conns.connection() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"synchronous": "OFF"}, "synchronous"),
        ({"busy_timeout": -1}, "busy_timeout"),
        ({"compress_threshold": 0}, "compress_threshold"),
    ],
)
def test_bad_settings_are_config_errors(db_path: Path, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    from tether.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        SqliteSaver(db_path, **kwargs)


def test_a_caller_connection_is_used_and_left_open(db_path: Path) -> None:
    conn = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    with SqliteSaver(conn) as saver:
        step(saver, thread("t"), None, {"a": 1})
    assert conn.execute("SELECT count(*) FROM tether_checkpoints").fetchone()[0] == 1
    conn.close()


def test_memory_mode_is_private(tmp_path: Path) -> None:
    with SqliteSaver(":memory:") as one, SqliteSaver(":memory:") as two:
        step(one, thread("t"), None, {"a": 1})
        assert one.get_tuple(thread("t")) is not None
        assert two.get_tuple(thread("t")) is None

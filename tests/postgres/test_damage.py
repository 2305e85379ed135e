"""Rows lost or altered behind the saver's back are reported, never read as less (issue #18.4).

A checkpoint lists its channels in ``channel_versions``; a channel whose value
is neither inline in the row nor in a blob row at that version is either one
no put ever stored (LangGraph's conformance suite puts such checkpoints) or
one whose row was lost. ``put`` records the former in the row (``absent``),
so a read raises :class:`~tether.errors.StorageError` for the latter, naming
thread, namespace, checkpoint and channel, as for a missing delta snapshot.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, StorageError, make_config
from tether.backends.postgres import _schema

from .conftest import PlainSerializer, fresh_schema
from .helpers import MODES, build_old_store, call, checkpoint, copy_rows, listing

pytestmark = pytest.mark.postgres


def _delete_blob(admin: psycopg.Connection[Any], schema: str, channel: str, version: str) -> None:
    cur = admin.execute(
        f'DELETE FROM "{schema}".tether_blobs WHERE channel = %s AND version = %s',
        (channel, version),
    )
    assert cur.rowcount == 1


async def _history(mode: str, saver: PostgresSaver, ns: str = "") -> list[dict[str, Any]]:
    """Three checkpoints: ``doc`` (a blob) written once, ``n`` (inline) every step."""
    cfg: Any = make_config("t", ns)
    out = []
    for i in range(3):
        values: dict[str, Any] = {"doc": {"text": "d" * 50}, "n": i}
        versions = {"doc": "1", "n": str(i + 1)}
        new = versions if i == 0 else {"n": versions["n"]}
        cfg = await call(mode, saver, "put", cfg, checkpoint(values, versions), {"step": i}, new)
        out.append(cfg)
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ns", ["", "sub:1"])
async def test_a_missing_blob_row_is_a_storage_error_naming_the_channel(
    mode: str, ns: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    configs = await _history(mode, saver, ns)
    latest = await call(mode, saver, "get_tuple", configs[-1])
    assert latest.checkpoint["channel_values"] == {"doc": {"text": "d" * 50}, "n": 2}
    _delete_blob(admin, schema, "doc", "1")  # written by the first put, carried since
    for cfg in configs:
        with pytest.raises(StorageError, match="is missing") as info:
            await call(mode, saver, "get_tuple", cfg)
        message = str(info.value)
        assert "channel 'doc'" in message
        assert "thread 't'" in message
        assert cfg["configurable"]["checkpoint_id"] in message
        if ns:
            assert "ns 'sub:1'" in message
    with pytest.raises(StorageError, match="channel 'doc'"):
        await listing(mode, saver, make_config("t", ns))
    with pytest.raises(StorageError, match="channel 'doc'"):
        await listing(mode, saver, None)


@pytest.mark.parametrize("mode", MODES)
async def test_channels_no_put_stored_are_left_out_without_an_error(
    mode: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    """What LangGraph's conformance suite does: channel_versions naming unwritten channels."""
    cp = checkpoint({"a": [1, 2]}, {"a": "1", "ghost": "1", "gone": "7"})
    cfg = await call(mode, saver, "put", make_config("t"), cp, {}, {"a": "1"})
    got = await call(mode, saver, "get_tuple", cfg)
    assert got.checkpoint["channel_values"] == {"a": [1, 2]}
    assert got.checkpoint["channel_versions"] == {"a": "1", "ghost": "1", "gone": "7"}
    row = admin.execute(f'SELECT absent FROM "{schema}".tether_checkpoints').fetchone()
    assert row is not None
    assert sorted(row[0]) == ["ghost", "gone"]
    # A child naming nothing: "a" is carried (its blob is there), the others stay absent.
    child = await call(mode, saver, "put", cfg, checkpoint({}, cp["channel_versions"]), {}, {})
    again = await call(mode, saver, "get_tuple", child)
    assert again.checkpoint["channel_values"] == {"a": [1, 2]}
    _delete_blob(admin, schema, "a", "1")
    with pytest.raises(StorageError, match="channel 'a'"):
        await call(mode, saver, "get_tuple", child)
    # copy_thread keeps the record.
    admin.execute(f'DELETE FROM "{schema}".tether_checkpoints')
    cfg = await call(mode, saver, "put", make_config("t"), cp, {}, {"a": "1"})
    await call(mode, saver, "copy_thread", "t", "u")
    copied = await call(mode, saver, "get_tuple", make_config("u"))
    assert copied.checkpoint["channel_values"] == {"a": [1, 2]}


@pytest.mark.parametrize("mode", MODES)
async def test_a_head_whose_id_is_not_its_rows_is_refused(
    mode: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    configs = await _history(mode, saver)
    cid = configs[1]["configurable"]["checkpoint_id"]
    admin.execute(
        f"UPDATE \"{schema}\".tether_checkpoints SET checkpoint = jsonb_set(checkpoint, '{{id}}', "
        "to_jsonb(%s::text)) WHERE checkpoint_id = %s",
        (configs[0]["configurable"]["checkpoint_id"], cid),
    )
    expected = f"of thread 't', checkpoint '{cid}' says its checkpoint id"
    with pytest.raises(StorageError, match=expected) as info:
        await call(mode, saver, "get_tuple", configs[1])
    assert configs[0]["configurable"]["checkpoint_id"] in str(info.value)
    with pytest.raises(StorageError, match="damaged"):
        await listing(mode, saver, make_config("t"))
    assert await call(mode, saver, "get_tuple", configs[2])  # the other rows read as before


def test_rows_from_before_the_record_stay_readable_as_they_were(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """A row written before version 12 has no record of its absent channels: not refused."""
    reference, old = fresh_schema(), fresh_schema()
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=reference, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        cp = checkpoint({"a": [1]}, {"a": "1", "ghost": "1"})
        cfg = saver.put(make_config("t"), cp, {}, {"a": "1"})
    build_old_store(admin, old, 11)
    for table in ("tether_checkpoints", "tether_blobs", "tether_writes"):
        copy_rows(admin, f'"{reference}".{table}', f'"{old}".{table}')
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=old, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        row = admin.execute(f'SELECT absent FROM "{old}".tether_checkpoints').fetchone()
        assert row == ([None],)  # unknown
        got = saver.get_tuple(cfg)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"a": [1]}
        _delete_blob(admin, old, "a", "1")
        got = saver.get_tuple(cfg)  # lenient, as every release before was
        assert got is not None
        assert got.checkpoint["channel_values"] == {}
        # A put of the same id records what it knows now.
        saver.put(make_config("t"), cp, {}, {"a": "1"})
        assert admin.execute(f'SELECT absent FROM "{old}".tether_checkpoints').fetchone() == (
            ["ghost"],
        )
    versions = admin.execute(f'SELECT max(v) FROM "{old}".tether_migrations').fetchone()
    assert versions == (_schema.SCHEMA_VERSION,)


# --- #18: pending writes are counted (tether_write_counts, schema 14) ---------------------


async def _with_writes(mode: str, saver: PostgresSaver) -> Any:
    configs = await _history(mode, saver)
    await call(mode, saver, "put_writes", configs[1], [("n", 10), ("doc", {"x": 1})], "task-a")
    await call(mode, saver, "put_writes", configs[1], [("__interrupt__", {"ask": 1})], "task-b")
    return configs[1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM {s}.tether_writes WHERE checkpoint_id = %(cid)s AND task_id = 'task-b'",
        "UPDATE {s}.tether_writes SET checkpoint_id = checkpoint_id || 'x' "
        "WHERE checkpoint_id = %(cid)s AND task_id = 'task-b'",
        "INSERT INTO {s}.tether_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
        "task_path, idx, channel, type, encoding, blob) SELECT thread_id, checkpoint_ns, "
        "checkpoint_id, task_id || 'x', task_path, idx, channel, type, encoding, blob "
        "FROM {s}.tether_writes WHERE checkpoint_id = %(cid)s AND task_id = 'task-b'",
        "DELETE FROM {s}.tether_write_counts WHERE checkpoint_id = %(cid)s",
    ],
    ids=["deleted", "moved-away", "copied-in", "count-lost"],
)
async def test_a_lost_moved_or_added_write_row_is_refused(
    mode: str, damage: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    cfg = await _with_writes(mode, saver)
    cid = cfg["configurable"]["checkpoint_id"]
    before = await call(mode, saver, "get_tuple", cfg)
    assert len(before.pending_writes) == 3
    cur = admin.execute(damage.format(s=f'"{schema}"'), {"cid": cid})
    assert cur.rowcount == 1
    reads = [
        lambda: call(mode, saver, "get_tuple", cfg),
        lambda: call(mode, saver, "get_writes", cfg),
        lambda: listing(mode, saver, make_config("t")),
    ]
    for read in reads:
        with pytest.raises(StorageError, match="pending write rows where it recorded") as info:
            await read()
        assert cid in str(info.value)
        assert schema in str(info.value) or "Postgres" in str(info.value)


def test_concurrent_batches_with_the_same_keys_count_each_row_once(pg_dsn: str) -> None:
    """Two workers retrying one task's writes at once: one row each key, counted once."""
    import threading

    with PostgresSaver.from_conn_string(
        pg_dsn, schema=fresh_schema(), pool_size=8, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        cfg = saver.put(make_config("t"), checkpoint({"n": 0}, {"n": "1"}), {}, {"n": "1"})
        rounds, workers = 30, 6
        errors: list[BaseException] = []
        for r in range(rounds):
            barrier = threading.Barrier(workers)

            def work(w: int, r: int = r, barrier: threading.Barrier = barrier) -> None:
                try:
                    barrier.wait()
                    # the same task's batch from every worker; a special write too
                    writes = [("n", r), ("doc", r), ("__error__", f"w{w}")]
                    saver.put_writes(cfg, writes, f"task-{r}")
                    saver.put_writes(cfg, [("n", w)], f"own-{r}-{w}")
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert not errors, errors[:3]
        got = saver.get_tuple(cfg)
        assert got is not None
        assert len(got.pending_writes) == rounds * (3 + workers)
        assert len(saver.get_writes(cfg)) == rounds * (3 + workers)


@pytest.mark.parametrize("mode", MODES)
async def test_write_counts_follow_every_operation(mode: str, saver: PostgresSaver) -> None:
    """Re-puts, writes before their checkpoint, copies over a target, prunes: no false alarm."""
    cfg = await _with_writes(mode, saver)
    latest = await call(mode, saver, "get_tuple", cfg)
    # a checkpoint put again keeps its writes
    await call(mode, saver, "put", latest.parent_config, latest.checkpoint, latest.metadata, {})
    assert await call(mode, saver, "get_tuple", cfg) == latest
    # writes before their checkpoint's put (LangGraph's "async" durability)
    early = checkpoint({"n": 5}, {"n": "9"})
    at = make_config("t", "", early["id"])
    await call(mode, saver, "put_writes", at, [("a", 1)], "first")
    await call(mode, saver, "put", make_config("t"), early, {}, {"n": "9"})
    got = await call(mode, saver, "get_tuple", at)
    assert got.pending_writes == [("first", "a", 1)]
    # a copy over a target that has its own writes at the same checkpoint
    await call(mode, saver, "put", make_config("dst"), early, {}, {"n": "9"})
    dst = make_config("dst", "", early["id"])
    await call(mode, saver, "put_writes", dst, [("b", 2)], "theirs")
    await call(mode, saver, "put_writes", dst, [("a", 9)], "first")
    await call(mode, saver, "copy_thread", "t", "dst")
    got = await call(mode, saver, "get_tuple", dst)
    assert sorted(got.pending_writes) == [("first", "a", 1), ("theirs", "b", 2)]
    for tid in ("t", "dst"):
        assert await listing(mode, saver, make_config(tid))
    await call(mode, saver, "prune", ["t"], strategy="keep_latest")
    assert len(await listing(mode, saver, make_config("t"))) == 1
    await call(mode, saver, "delete_thread", "dst")
    assert await listing(mode, saver, make_config("dst")) == []

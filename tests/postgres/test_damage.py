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
            assert "namespace 'sub:1'" in message
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
    with pytest.raises(StorageError, match=f"checkpoint {cid} of thread 't' holds") as info:
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
    with PostgresSaver.from_conn_string(pg_dsn, schema=reference, serde=PlainSerializer()) as saver:
        saver.setup()
        cp = checkpoint({"a": [1]}, {"a": "1", "ghost": "1"})
        cfg = saver.put(make_config("t"), cp, {}, {"a": "1"})
    build_old_store(admin, old, 11)
    for table in ("tether_checkpoints", "tether_blobs", "tether_writes"):
        copy_rows(admin, f'"{reference}".{table}', f'"{old}".{table}')
    with PostgresSaver.from_conn_string(pg_dsn, schema=old, serde=PlainSerializer()) as saver:
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

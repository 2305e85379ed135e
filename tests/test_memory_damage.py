"""The in-memory saver when what it holds is not what a put left (#18.4).

Its maps are reached directly here, as only a bug could: a blob a checkpoint
names is gone, a row holds another checkpoint's head. Both used to read back
as something else (the channel silently absent, the head as is).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tether import InMemorySaver
from tether.checkpoint import empty_checkpoint, make_config
from tether.errors import StorageError
from tether.ids import uuid6


def _put(
    saver: InMemorySaver, config: dict[str, Any], values: dict[str, Any], prev: Any = None
) -> tuple[dict[str, Any], Any]:
    ckpt = empty_checkpoint() if prev is None else {**prev, "channel_values": {}}
    ckpt["id"] = str(uuid6())
    versions = dict(prev["channel_versions"]) if prev else {}
    new = {}
    for channel in values:
        new[channel] = versions[channel] = saver.get_next_version(versions.get(channel))
    ckpt["channel_versions"] = versions
    ckpt["channel_values"] = {**(prev or {}).get("channel_values", {}), **values}
    return saver.put(config, ckpt, {"step": 1}, new), ckpt


def test_a_missing_blob_is_a_storage_error_naming_it() -> None:
    saver = InMemorySaver()
    cfg, first = _put(saver, make_config("t"), {"a": 1, "b": "x" * 10})
    cfg, _ = _put(saver, cfg, {"a": 2}, first)
    blobs = saver._threads["t"][""].blobs
    (key,) = [k for k in blobs if k[0] == "b"]
    del blobs[key]
    with pytest.raises(StorageError) as info:
        saver.get_tuple(cfg)
    assert "thread 't'" in str(info.value)
    assert "channel 'b'" in str(info.value)
    assert cfg["configurable"]["checkpoint_id"] in str(info.value)
    with pytest.raises(StorageError, match="channel 'b'"):
        list(saver.list(make_config("t")))


def test_a_put_carrying_over_a_value_its_parent_lost_is_refused() -> None:
    saver = InMemorySaver()
    cfg, first = _put(saver, make_config("t"), {"a": 1, "b": 2})
    blobs = saver._threads["t"][""].blobs
    del blobs[next(k for k in blobs if k[0] == "b")]
    with pytest.raises(StorageError, match=r"channel 'b'.*names is missing"):
        _put(saver, cfg, {"a": 3}, first)
    assert len(saver._threads["t"][""].checkpoints) == 1


def test_channels_no_put_ever_wrote_read_as_absent() -> None:
    saver = InMemorySaver()
    ckpt = empty_checkpoint()
    ckpt["id"] = str(uuid6())
    ckpt["channel_values"] = {"a": 1}
    ckpt["channel_versions"] = {"a": "1", "ghost": 7}
    cfg = saver.put(make_config("t"), ckpt, {}, {"a": "1"})
    tup = saver.get_tuple(cfg)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": 1}
    child = {**ckpt, "id": str(uuid6()), "channel_versions": {"a": "2", "ghost": 7}}
    child["channel_values"] = {"a": 2}
    tup = saver.get_tuple(saver.put(cfg, child, {}, {"a": "2"}))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": 2}


def test_a_head_whose_id_is_not_its_rows_is_refused() -> None:
    saver = InMemorySaver()
    cfg, first = _put(saver, make_config("t"), {"a": 1})
    cfg2, _ = _put(saver, cfg, {"a": 2}, first)
    rows = saver._threads["t"][""].checkpoints
    one, two = cfg["configurable"]["checkpoint_id"], cfg2["configurable"]["checkpoint_id"]
    rows[two] = dataclasses.replace(rows[two], head=rows[one].head)
    with pytest.raises(StorageError, match=f"says its checkpoint id is {one!r}"):
        saver.get_tuple(cfg2)

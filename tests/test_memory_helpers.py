"""The shared helpers every put runs (InMemorySaver's hot path): fast paths change nothing.

(index_writes is prepare_writes without a frozen row object per write.)

``merge_metadata``, ``check_checkpoint`` and ``split_channel_values`` take a
fast path for plain dicts and fall back to the general checks for anything
else. Each case here runs through both (a ``MappingProxyType`` is a Mapping
but not a dict) and must give the same result or the same error.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import pytest

from tether.contract import (
    EMPTY,
    check_checkpoint,
    index_writes,
    merge_metadata,
    prepare_writes,
    split_channel_values,
)
from tether.errors import ConfigError


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except ConfigError as exc:
        return ("error", str(exc))


CONFIG = {
    "configurable": {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c",
        "user": "u\x00x",
        "n": 3,
        "flag": True,
        "ratio": 0.5,
        "inf": math.inf,
        "obj": object(),
        "__internal": "no",
        "step": 99,
    },
    "metadata": {"source": "from-config", "extra": "e"},
}


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"source": "loop", "step": 3, "parents": {}},
        {"source": "loop", "step": 3, "parents": {"": "1ef"}, "run_id": "r"},
        {"writes": {"node": 1}, "step": 1},
        {"k\x00ey": "v", "k": "w"},
        {"k": "v\x00al"},
        {"nested": {"a": [1, 2.5, None, {"b\x00": "c\x00"}], "t": (1, 2)}},
        {"big": 2**80, "neg": -1, "b": False, "none": None},
        {"f": 1.5},
        {"f": math.nan},
        {"f": [math.inf]},
        {1: "non-str key"},
        {"ok": 1, 2: "non-str key later"},
        {"bad": object()},
        {"bad": {"deep": b"bytes"}},
        {"bad": {3: "x"}},
    ],
)
@pytest.mark.parametrize("config", [CONFIG, {}, {"configurable": {"thread_id": "t"}}])
def test_merge_metadata_fast_path_agrees(metadata: dict[Any, Any], config: Any) -> None:
    fast = _outcome(merge_metadata, config, metadata)
    general = _outcome(merge_metadata, config, MappingProxyType(metadata))
    assert fast == general
    if fast[0] == "ok":
        merged = fast[1]
        assert "writes" not in merged
        assert all("\x00" not in k for k in merged)
        assert merged is not metadata


def test_merge_metadata_copies_nested_values() -> None:
    parents: dict[str, str] = {}
    metadata = {"parents": parents, "nested": {"a": [1]}}
    merged = merge_metadata({}, metadata)
    assert merged == metadata
    assert merged["parents"] is not parents
    assert merged["nested"]["a"] is not metadata["nested"]["a"]


def test_merge_metadata_refuses_a_non_mapping() -> None:
    with pytest.raises(ConfigError, match="metadata must be a mapping"):
        merge_metadata({}, [("a", 1)])  # type: ignore[arg-type]


def _checkpoint(**over: Any) -> dict[str, Any]:
    cp: dict[str, Any] = {
        "v": 4,
        "id": "1ef",
        "channel_values": {"a": 1, "b": [2]},
        "channel_versions": {"a": "1.5", "b": 2, "c": 3.0, "n": None},
    }
    cp.update(over)
    return cp


@pytest.mark.parametrize(
    ("over", "new_versions"),
    [
        ({}, {"a": "1.5", "b": 2}),
        ({}, {}),
        ({}, {"c": 3}),  # 3 == 3.0
        ({}, {"a": "1.6"}),
        ({}, {"b": "2"}),
        ({}, {"n": "1"}),  # a None version does not conflict
        ({}, {"zz": "9"}),  # a channel the checkpoint does not name
        ({}, {"c": math.nan}),
        ({"channel_versions": {"c": math.nan}}, {"c": math.nan}),
        ({"id": ""}, {}),
        ({"id": 5}, {}),
        ({"channel_versions": None}, {}),
        ({"channel_values": []}, {}),
        ({}, [("a", "1.5")]),
    ],
)
def test_check_checkpoint_fast_path_agrees(over: dict[str, Any], new_versions: Any) -> None:
    cp = _checkpoint(**over)
    fast = _outcome(check_checkpoint, cp, new_versions)
    proxied = {k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in cp.items()}
    nv = MappingProxyType(new_versions) if isinstance(new_versions, dict) else new_versions
    general = _outcome(check_checkpoint, MappingProxyType(proxied), nv)
    assert fast == general


def _split_reference(checkpoint: Any, new_versions: Any) -> Any:
    """split_channel_values as first written."""
    head = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    values = checkpoint.get("channel_values", {})
    blobs = {
        channel: (str(version), values.get(channel, EMPTY) if values else EMPTY)
        for channel, version in new_versions.items()
    }
    return head, blobs


@pytest.mark.parametrize(
    "checkpoint",
    [
        _checkpoint(extra_key={"kept": True}),
        _checkpoint(channel_values={}),
        {k: v for k, v in _checkpoint().items() if k != "channel_values"},
        MappingProxyType(_checkpoint()),
    ],
)
def test_split_channel_values_is_unchanged(checkpoint: Any) -> None:
    new_versions = {"a": "1.5", "b": 2, "gone": 4.0}
    head, blobs = split_channel_values(checkpoint, new_versions)
    want_head, want_blobs = _split_reference(checkpoint, new_versions)
    assert head == want_head
    assert list(head) == list(want_head)
    assert blobs == want_blobs
    assert blobs["gone"][1] is EMPTY


@pytest.mark.parametrize(
    "writes",
    [
        [],
        [("a", 1), ("b", [2])],
        [("__error__", "e1"), ("a", 1), ("__interrupt__", "i"), ("__error__", "e2"), ("a", 3)],
        [("__resume__", 1), ("__scheduled__", 2)],
        [("a", 1, 2)],
        ["ab"],
        [("a", 1), (3, "channel is not a str")],
        [None],
    ],
)
@pytest.mark.parametrize(
    ("task_id", "task_path"), [("task", ""), ("task", "p~1"), ("", ""), ("t", 3)]
)
def test_index_writes_is_prepare_writes_as_tuples(
    writes: Any, task_id: Any, task_path: Any
) -> None:
    rows = _outcome(prepare_writes, writes, task_id, task_path)
    tuples = _outcome(index_writes, writes, task_id, task_path)
    if rows[0] == "error":
        assert tuples == rows
        return
    assert tuples[1] == [(r.idx, r.channel, r.value) for r in rows[1]]
    assert all((r.task_id, r.task_path) == (task_id, task_path) for r in rows[1])


def test_a_repeated_special_write_keeps_its_first_position_and_last_value() -> None:
    rows = index_writes([("__error__", "e1"), ("a", 1), ("__error__", "e2")], "t")
    assert rows == [(-1, "__error__", "e2"), (1, "a", 1)]

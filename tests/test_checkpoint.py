"""Data model and addressing (SPEC S1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tether.checkpoint import (
    CHECKPOINT_VERSION,
    WRITES_IDX_MAP,
    Address,
    address_fields,
    copy_checkpoint,
    empty_checkpoint,
    make_config,
    ns_join,
    ns_parent,
    ns_split,
    write_index,
)
from tether.errors import ConfigError
from tether.ids import uuid6_timestamp


def test_empty_checkpoint_shape() -> None:
    cp = empty_checkpoint()
    assert cp["v"] == CHECKPOINT_VERSION == 4
    assert set(cp) == {
        "v",
        "id",
        "ts",
        "channel_values",
        "channel_versions",
        "versions_seen",
        "updated_channels",
    }
    assert "pending_sends" not in cp
    assert uuid.UUID(cp["id"]).clock_seq == 0x3FFE  # the empty sentinel
    assert cp["ts"].endswith("+00:00")
    assert uuid6_timestamp(cp["id"]) > 0


def test_address_reads_config_with_unrelated_keys() -> None:
    cfg = {
        "configurable": {
            "thread_id": "t",
            "checkpoint_ns": "a:1",
            "checkpoint_id": "c",
            "user": "x",
            "__pregel_secret": object(),
        },
        "callbacks": [object()],
        "recursion_limit": 5,
        "tags": ["a"],
    }
    assert Address.from_config(cfg) == Address("t", "a:1", "c")


def test_address_defaults_and_conversions() -> None:
    assert Address.from_config({"configurable": {"thread_id": 7}}) == Address("7", "", None)
    u = uuid.uuid4()
    assert Address.from_config({"configurable": {"thread_id": u}}).thread_id == str(u)
    assert Address.from_config({"configurable": {"thread_id": "t", "checkpoint_id": ""}}) == (
        Address("t")
    )


@pytest.mark.parametrize(
    "cfg",
    [{}, {"configurable": {}}, {"configurable": {"thread_id": None}}, {"configurable": "x"}],
)
def test_missing_thread_is_a_config_error(cfg: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        Address.from_config(cfg)


def test_bad_field_types() -> None:
    with pytest.raises(ConfigError, match="checkpoint_ns"):
        Address.from_config({"configurable": {"thread_id": "t", "checkpoint_ns": 3}})
    with pytest.raises(ConfigError, match="checkpoint_id"):
        Address.from_config({"configurable": {"thread_id": "t", "checkpoint_id": 3}})
    with pytest.raises(ConfigError, match="mapping"):
        Address.from_config("t")  # type: ignore[arg-type]


class _ReadOnly(Mapping[str, Any]):
    """A config that is a Mapping but not a dict (the checked path)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class _Str(str):
    pass


def _fields_or_error(cfg: Any) -> Any:
    try:
        fields = address_fields(cfg)
    except ConfigError as exc:
        return ("error", str(exc))
    return fields, [type(f) for f in fields], Address.from_config(cfg)


@pytest.mark.parametrize(
    "conf",
    [
        {"thread_id": "t"},
        {"thread_id": "t", "checkpoint_ns": None, "checkpoint_id": None},
        {"thread_id": "t", "checkpoint_ns": "a:1", "checkpoint_id": "c", "x": 1},
        {"thread_id": 7, "checkpoint_ns": "", "checkpoint_id": ""},
        {"thread_id": _Str("t"), "checkpoint_ns": _Str("n"), "checkpoint_id": _Str("c")},
        {"thread_id": "t", "checkpoint_ns": 3},
        {"thread_id": "t", "checkpoint_id": 3},
        {"thread_id": None},
        {"thread_id": object()},
        {},
    ],
)
def test_address_fields_fast_path_agrees_with_the_checked_one(conf: dict[str, Any]) -> None:
    # Plain dicts take a fast path; a config that is a Mapping but not a dict
    # (or whose "configurable" is one) takes the checked path. Same answers,
    # same errors.
    plain = _fields_or_error({"configurable": conf, "metadata": {}})
    assert _fields_or_error(_ReadOnly({"configurable": conf, "metadata": {}})) == plain
    assert _fields_or_error({"configurable": _ReadOnly(conf)}) == plain
    if plain[0] != "error":
        assert plain[2] == Address(
            str(conf["thread_id"]),
            conf.get("checkpoint_ns") or "",
            conf.get("checkpoint_id") or None,
        )


def test_optional_address() -> None:
    assert Address.optional(None) is None
    assert Address.optional({"configurable": {}}) is None
    assert Address.optional({"configurable": {"thread_id": "t"}}) == Address("t")


def test_config_round_trip() -> None:
    cfg = make_config("t", "ns", "id")
    assert cfg == {"configurable": {"thread_id": "t", "checkpoint_ns": "ns", "checkpoint_id": "id"}}
    assert Address.from_config(cfg).to_config() == cfg
    assert make_config("t") == {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def test_namespaces() -> None:
    ns = ns_join(ns_join("", "agent", "t1"), "tool", "t2")
    assert ns == "agent:t1|tool:t2"
    assert ns_split(ns) == [("agent", "t1"), ("tool", "t2")]
    assert ns_split("") == []
    assert ns_parent(ns) == "agent:t1"
    assert ns_parent("agent:t1") == ""
    with pytest.raises(ConfigError, match="may not contain"):
        ns_join("", "a|b", "t")


def test_write_indexes() -> None:
    assert WRITES_IDX_MAP == {
        "__error__": -1,
        "__scheduled__": -2,
        "__interrupt__": -3,
        "__resume__": -4,
    }
    assert write_index("messages", 3) == 3
    assert write_index("__interrupt__", 0) == -3


def test_copy_checkpoint_is_independent_and_keeps_unknown_keys() -> None:
    cp = empty_checkpoint()
    cp["channel_values"]["msgs"] = [{"a": 1}]
    cp["channel_versions"]["msgs"] = "1"
    cp["versions_seen"]["node"] = {"msgs": "1"}
    cp["updated_channels"] = ["msgs"]
    cp["future_field"] = {"x": [1]}  # type: ignore[typeddict-unknown-key]
    c2 = copy_checkpoint(cp)
    c2["channel_values"]["msgs"][0]["a"] = 2
    c2["channel_versions"]["msgs"] = "2"
    c2["versions_seen"]["node"]["msgs"] = "2"
    assert c2["updated_channels"] is not None
    c2["updated_channels"].append("x")
    assert cp["channel_values"]["msgs"] == [{"a": 1}]
    assert cp["channel_versions"]["msgs"] == "1"
    assert cp["versions_seen"]["node"]["msgs"] == "1"
    assert cp["updated_channels"] == ["msgs"]
    assert c2["future_field"] == {"x": [1]}  # type: ignore[typeddict-item]

"""InMemorySaver's values (SPEC S5.1): each comes back as it went in, whatever serializer.

The in-memory saver once kept scalars as they were and packed heads and
metadata itself under tether's own serializer (fast paths, withdrawn in
#14: it is the readable reference now and stores the records SQLite
stores). These tests stay as its round-trip suite: the same values through
tether's serializer, through the same serializer under another class, and
through a serializer of its own, and metadata exactly as ``merge_metadata``
returns it.
"""

from __future__ import annotations

import copy
import enum
import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from tether import InMemorySaver
from tether.checkpoint import CheckpointTuple, make_config
from tether.contract import dumps_json, loads_json, merge_metadata
from tether.errors import ConfigError
from tether.serde import MsgpackSerializer
from tether.testing._driver import new_checkpoint


class Serialized(MsgpackSerializer):
    """tether's serializer under another class: the saver takes no fast path with it."""


class Recording:
    """A serializer of its own (not tether's class): counts what it is given."""

    def __init__(self) -> None:
        self.inner = MsgpackSerializer()
        self.dumped: list[Any] = []
        self.loaded = 0

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dumped.append(obj)
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.loaded += 1
        return self.inner.loads_typed(data)


class Color(enum.IntEnum):
    RED = 1


class Label(str):
    """A str subclass: written as its base type."""


COLOR = (Color.__module__, Color.__qualname__)

SCALARS: dict[str, Any] = {
    "int": 7,
    "zero": 0,
    "negative": -3,
    "small": 255,
    "not_small": 256,
    "huge": 2**70,
    "float": 0.1,
    "negative_zero": -0.0,
    "inf": math.inf,
    "true": True,
    "false": False,
    "none": None,
    "ascii": "user-1",
    "empty": "",
    "nul": "a\x00b",
}


def _round_trip(
    saver: InMemorySaver,
    values: dict[str, Any],
    writes: list[tuple[str, Any]] | None = None,
    **extra: Any,
) -> CheckpointTuple:
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    return _put_and_get(saver, new_checkpoint(values, versions, **extra), writes)


def _put_and_get(
    saver: InMemorySaver, cp: Any, writes: list[tuple[str, Any]] | None = None
) -> CheckpointTuple:
    metadata = {"source": "loop", "step": 1, "parents": {}}
    cfg = saver.put(make_config("t"), cp, metadata, dict(cp["channel_versions"]))
    if writes:
        saver.put_writes(cfg, writes, "task")
    tup = saver.get_tuple(make_config("t"))
    assert tup is not None
    return tup


def _both(
    values: dict[str, Any], writes: list[tuple[str, Any]] | None = None, **extra: Any
) -> tuple[InMemorySaver, CheckpointTuple, InMemorySaver, CheckpointTuple]:
    """The same checkpoint (and writes) under tether's serializer and under another class."""
    versions = {channel: f"{i + 1:032}.0.5" for i, channel in enumerate(values)}
    cp = new_checkpoint(values, versions, **extra)
    fast, slow = InMemorySaver(), InMemorySaver(serde=Serialized())
    return (
        fast,
        _put_and_get(fast, copy.deepcopy(cp), copy.deepcopy(writes)),
        slow,
        _put_and_get(slow, copy.deepcopy(cp), copy.deepcopy(writes)),
    )


def _same(got: Any, want: Any) -> bool:
    """Equal with the same type; NaN equals NaN."""
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if type(got) is not type(want):
        return False
    if isinstance(want, float) and want == 0:
        return math.copysign(1, got) == math.copysign(1, want)
    return bool(got == want)


@pytest.mark.parametrize("serde", [None, Serialized()], ids=["as-is", "serialized"])
def test_scalars_and_writes_round_trip_with_their_exact_type(serde: Any) -> None:
    saver = InMemorySaver(serde=serde)
    values = {**SCALARS, "nan": math.nan}
    writes = list(values.items())
    tup = _round_trip(saver, values, writes)
    got = tup.checkpoint["channel_values"]
    assert list(got) == list(values)
    for channel, value in values.items():
        assert _same(got[channel], value), channel
    assert tup.pending_writes is not None
    assert [(t, c) for t, c, _ in tup.pending_writes] == [("task", c) for c in values]
    for (_, channel, value), want in zip(tup.pending_writes, values.values(), strict=True):
        assert _same(value, want), channel
    assert got["true"] is True
    assert got["false"] is False


def test_subclasses_and_other_strings_go_through_the_serializer() -> None:
    serde = MsgpackSerializer(allowlist=[COLOR])
    values: dict[str, Any] = {
        "enum": Color.RED,
        "label": Label("x"),
        "accented": "é",
        "surrogate": "a\ud800b",
        "decimal": Decimal("1.5"),
        "stamp": datetime(2024, 1, 1, tzinfo=UTC),
    }
    tup = _round_trip(InMemorySaver(serde=serde), values, list(values.items()))
    # what the serializer's own round trip gives, value by value
    want = {k: serde.loads_typed(serde.dumps_typed(v)) for k, v in values.items()}
    assert type(want["enum"]) is Color
    assert want["enum"] is Color.RED
    assert type(want["label"]) is str
    assert want["surrogate"] == "a?b"  # MessagePack replaces a lone surrogate
    got = tup.checkpoint["channel_values"]
    assert tup.pending_writes is not None
    written = {channel: value for _, channel, value in tup.pending_writes}
    for channel, value in want.items():
        assert _same(got[channel], value), channel
        assert _same(written[channel], value), channel


def test_a_serializer_of_its_own_sees_every_value_and_write_and_never_the_head() -> None:
    """Values and writes go through the saver's serializer; the head is JSON (as on SQLite)."""
    serde = Recording()
    saver = InMemorySaver(serde=serde)
    tup = _round_trip(saver, SCALARS, [("w", 1), ("s", "x")], custom=[1, 2])
    assert tup.checkpoint["channel_values"] == SCALARS
    assert tup.pending_writes == [("task", "w", 1), ("task", "s", "x")]
    assert tup.checkpoint["custom"] == [1, 2]  # type: ignore[typeddict-unknown-key]
    dumped = serde.dumped
    assert dumped[: len(SCALARS)] == list(SCALARS.values())
    assert dumped[len(SCALARS) :] == [1, "x"]  # the writes; no head
    assert serde.loaded == len(SCALARS) + 2


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"custom": {"nested": [1, "two", {"three": 3.0}], "flag": True}},
        {"huge": 2**70, "accented": "é", "null": None},
    ],
    ids=["plain", "nested", "json beyond msgpack"],
)
def test_json_heads_round_trip_as_through_the_serializer(extra: dict[str, Any]) -> None:
    _, fast, _, slow = _both({"a": 1}, **extra)
    got: dict[str, Any] = dict(fast.checkpoint)
    want: dict[str, Any] = dict(slow.checkpoint)
    assert list(got) == list(want)
    for key, value in want.items():
        assert _same(got[key], value) or repr(got[key]) == repr(value), key
        for inner, v in value.items() if isinstance(value, dict) else ():
            assert type(got[key][inner]) is type(v), (key, inner)


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        ({"pair": (1, "x")}, "checkpoint.pair is tuple"),
        ({"when": datetime(2024, 1, 1, tzinfo=UTC)}, "checkpoint.when is datetime"),
        ({"tags": {"a"}}, "checkpoint.tags is set"),
        ({"keys": {1: "int key"}}, "checkpoint.keys has the key 1"),
        ({"label": Label("x")}, "checkpoint.label is Label"),
        ({"surrogate": "a\ud800b"}, "checkpoint.surrogate .* holds a lone surrogate"),
        ({"raw": b"\x00\xff"}, "checkpoint.raw is bytes"),
        ({"nan": math.nan}, "checkpoint.nan is nan"),
        ({"deep": {"n": [float("inf")]}}, r"checkpoint.deep.n\[0\] is inf"),
    ],
    ids=["tuple", "datetime", "set", "int key", "str subclass", "surrogate", "bytes", "nan", "inf"],
)
def test_heads_that_are_not_json_are_refused_by_both_paths(
    extra: dict[str, Any], where: str
) -> None:
    """The head is JSON on every backend (Postgres keeps it as JSONB): no path stores more."""
    for serde in (None, Serialized()):
        saver = InMemorySaver(serde=serde)
        cp: Any = new_checkpoint({"a": 1}, {"a": "1"}, **extra)
        with pytest.raises(ConfigError, match=where):
            saver.put(make_config("t"), cp, {}, {"a": "1"})
        assert saver.get_tuple(make_config("t")) is None


def test_nothing_a_caller_mutates_after_put_or_get_reaches_the_store() -> None:
    saver = InMemorySaver()
    values: dict[str, Any] = {"n": 1, "s": "x", "b": True, "l": [1, [2]]}
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    cp: Any = new_checkpoint(values, versions, custom={"nested": {"k": [1]}})
    cp["versions_seen"] = {"node": dict(versions)}
    metadata: dict[str, Any] = {"source": "loop", "step": 1, "parents": {"": "p"}}
    writes: list[tuple[str, Any]] = [("w", 1), ("v", {"k": [1]})]
    before = (copy.deepcopy(cp), copy.deepcopy(metadata), copy.deepcopy(writes))
    cfg = saver.put(make_config("t"), cp, metadata, dict(versions))
    saver.put_writes(cfg, writes, "task")

    def mutate(cp: Any, metadata: Any) -> None:
        cp["channel_values"]["n"] = 2
        cp["channel_values"]["l"][1].append(3)
        cp["channel_versions"]["n"] = "x"
        cp["versions_seen"]["node"]["n"] = "x"
        cp["updated_channels"].append("x")
        cp["custom"]["nested"]["k"].append(2)
        cp["extra"] = 1
        metadata["parents"][""] = "q"
        metadata["step"] = 9

    mutate(cp, metadata)
    writes[1][1]["k"].append(2)
    first = saver.get_tuple(cfg)
    assert first is not None
    for tup in (first, saver.get_tuple(cfg)):
        assert tup is not None
        want, want_meta, want_writes = before
        assert tup.checkpoint == want
        assert tup.metadata == want_meta
        assert tup.pending_writes == [("task", c, v) for c, v in want_writes]
        mutate(tup.checkpoint, tup.metadata)
        assert tup.pending_writes is not None
        tup.pending_writes[1][2]["k"].append(2)


CONFIGS: dict[str, dict[str, Any]] = {
    "plain": make_config("t"),
    "parent": make_config("t", "", "1ef00000-0000-6000-8000-000000000001"),
    "extra keys": {"configurable": {"thread_id": "t", "user": "u", "__x": 1}},
    "metadata": {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "r", "step": 5}},
}

METADATA: dict[str, Any] = {
    "langgraph": {"source": "loop", "step": 0, "parents": {}},
    "subgraph": {"source": "loop", "step": 3, "parents": {"": "1ef"}, "run_id": "r"},
    "nul key": {"k\x00": "v"},
    "nul value": {"k": "a\x00b", "step": 0},
    "nul nested": {"parents": {"": "a\x00b"}, "l": ["x\x00"]},
    "step 0 nested": {"source": "loop", "step": 0, "parents": {"": "1ef"}},
    "step 0 nul key": {"step": 0, "k\x00": "v"},
    "backslash": {"k": "\\x00"},
    "floats": {"ratio": 0.5, "l": [1.5]},
    "nan": {"f": math.nan},
    "inf nested": {"d": {"f": -math.inf}},
    "bytes": {"b": b"x"},
    "nested": {"d": {"l": [1, None, True, "é", {"e": {}}]}, "big": 2**53},
    "tuple": {"t": (1, 2)},
    "writes": {"source": "loop", "writes": {"n": 1}},
    "run_id dict": {"run_id": {"k": "v"}},
    "enum": {"e": Color.RED},
    "label": {Label("k"): Label("v")},
    "non-str key": {1: "x"},
    "huge": {"h": 2**70},
    "set": {"s": {1}},
    "not a dict": [("k", "v")],
}


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except ConfigError as exc:
        return ("error", type(exc), str(exc))


def _merged(config: Any, metadata: Any) -> Any:
    """What every backend stores: merge_metadata's result as JSON (any int size)."""
    return loads_json(dumps_json(merge_metadata(config, metadata)))  # as stored, as SQLite


@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
@pytest.mark.parametrize("metadata", list(METADATA.values()), ids=list(METADATA))
def test_stored_metadata_is_what_merge_metadata_returns(config: Any, metadata: Any) -> None:
    saver = InMemorySaver()
    cp = new_checkpoint({}, {})

    def put_and_read(config: Any, metadata: Any) -> Any:
        saver.put(config, cp, metadata, {})
        tup = saver.get_tuple(make_config("t", "", cp["id"]))
        assert tup is not None
        return tup.metadata

    want = _outcome(_merged, config, metadata)
    got = _outcome(put_and_read, config, metadata)
    assert got == want
    if want[0] == "ok":
        assert [type(v) for v in got[1].values()] == [type(v) for v in want[1].values()]


def test_run_id_from_metadata_is_what_delete_for_runs_matches() -> None:
    saver = InMemorySaver()
    for run in ("r1", "r2"):
        cp = new_checkpoint({"a": 1}, {"a": saver.get_next_version(None, None)})
        saver.put(make_config(run), cp, {"source": "loop", "run_id": run}, cp["channel_versions"])
    saver.delete_for_runs(["r1"])
    assert saver.get_tuple(make_config("r1")) is None
    assert saver.get_tuple(make_config("r2")) is not None


def test_versions_that_are_not_strings_still_find_their_blobs() -> None:
    saver = InMemorySaver()
    cfg = make_config("t")
    for step in (1, 2, 3):
        cp = new_checkpoint({"a": step, "b": [step]}, {"a": step, "b": 1})
        cfg = saver.put(cfg, cp, {}, {"a": step} if step > 1 else {"a": step, "b": 1})
    listed = list(saver.list(make_config("t")))
    assert [t.checkpoint["channel_values"] for t in listed] == [
        {"a": 3, "b": [1]},
        {"a": 2, "b": [1]},
        {"a": 1, "b": [1]},
    ]
    saver.prune(["t"])
    tup = saver.get_tuple(make_config("t"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": 3, "b": [1]}
    assert saver.stats()["blobs"] == 2

"""The contract suite: one test per rule of :mod:`tether.base`, run sync and async.

See :mod:`tether.testing` for how a backend uses it.

Why one long module: it is one test class (``SaverContract``) whose methods
each state one rule, grouped by the section of :mod:`tether.base` they test;
a backend inherits it whole, so splitting it would only scatter one class.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import threading
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings

from tether.base import BaseCheckpointSaver
from tether.checkpoint import ERROR, INTERRUPT, RESUME, SCHEDULED, StoredWrite, make_config
from tether.contract import metadata_matches
from tether.errors import ConfigError, DecodeError, TetherError
from tether.testing._driver import (
    MODES,
    RECORD_TYPE,
    UNKNOWN_ID,
    ContractRecord,
    Driver,
    Line,
    cid,
    new_checkpoint,
)
from tether.testing._history import HistoryContract
from tether.testing._lifecycle import LifecycleContract
from tether.testing._model import Op, programs, run_program
from tether.testing._threads import ThreadsContract

__all__ = ["SaverContract"]

#: Random programs per run of the model test (each up to 25 operations).
MODEL_EXAMPLES = 25


def _thread_worker(saver: BaseCheckpointSaver, thread_id: str, n: int) -> list[str]:
    config: dict[str, Any] = make_config(thread_id)
    out = []
    for i in range(n):
        v = saver.get_next_version(None if i == 0 else f"{i:032}.0", None)
        cp = new_checkpoint({"i": [i, thread_id]}, {"i": v})
        meta: dict[str, Any] = {"step": i, "worker": thread_id}
        config = saver.put(config, cp, meta, {"i": v})  # type: ignore[arg-type]
        saver.put_writes(config, [("w", i)], "task")
        out.append(cid(config))
    return out


async def _task_worker(saver: BaseCheckpointSaver, thread_id: str, n: int) -> list[str]:
    config: dict[str, Any] = make_config(thread_id)
    out = []
    for i in range(n):
        v = saver.get_next_version(None if i == 0 else f"{i:032}.0", None)
        cp = new_checkpoint({"i": [i, thread_id]}, {"i": v})
        meta: dict[str, Any] = {"step": i, "worker": thread_id}
        config = await saver.aput(config, cp, meta, {"i": v})  # type: ignore[arg-type]
        await saver.aput_writes(config, [("w", i)], "task")
        out.append(cid(config))
    return out


# Metadata stored on one checkpoint each, and which of them each filter must match.
FILTER_METADATA: list[dict[str, Any]] = [
    {"n": 1},  # 0
    {"n": 1.0},  # 1
    {"n": True},  # 2
    {"n": None},  # 3
    {},  # 4
    {"n": "1"},  # 5
    {"n": {"a": 1, "b": [1, 2]}},  # 6
    {"n": {"a": 1, "b": [1, 2], "c": 3}},  # 7
    {"n": [1, 2]},  # 8
    {"n": [2, 1]},  # 9
    {"n": 0},  # 10
    {"n": False},  # 11
    {"n": 1, "k": "x"},  # 12
]

FILTER_CASES: list[tuple[dict[str, Any], set[int]]] = [
    ({"n": 1}, {0, 1, 12}),
    ({"n": 1.0}, {0, 1, 12}),
    ({"n": True}, {2}),
    ({"n": False}, {11}),
    ({"n": 0}, {10}),
    ({"n": None}, {3}),
    ({"n": "1"}, {5}),
    ({"n": {"b": [1, 2], "a": 1}}, {6}),
    ({"n": {"a": 1}}, set()),
    ({"n": [1, 2]}, {8}),
    ({"n": [1]}, set()),
    ({"missing": None}, set()),
    ({"n": 1, "k": "x"}, {12}),
    ({"n": 1, "k": "y"}, set()),
    ({}, set(range(13))),
]

INJECTION_KEYS = [
    "a') OR 1=1 --",
    "n') OR 1=1 --",
    'n" = "n',
    "'; DROP TABLE checkpoints; --",
    "n' ? 'n",
    "%s",
    "%(n)s",
    "$.n",
    "n\\",
]


class SaverContract(HistoryContract, ThreadsContract, LifecycleContract):
    """The saver contract as pytest tests; subclass it and provide a ``saver`` fixture."""

    # --- fixtures -------------------------------------------------------------------

    @pytest.fixture(params=MODES)
    def mode(self, request: pytest.FixtureRequest) -> str:
        """``"sync"`` or ``"async"``: which methods the test calls."""
        return str(request.param)

    @pytest.fixture
    def saver(self) -> BaseCheckpointSaver:
        """Override: a fresh, empty saver for every test."""
        raise NotImplementedError(
            f"{type(self).__name__} must define a `saver` fixture returning a fresh, empty "
            "tether saver (see tether.testing)"
        )

    @pytest.fixture
    def driver(self, saver: BaseCheckpointSaver, mode: str) -> Driver:
        return Driver(saver, mode)

    # --- put / get_tuple ----------------------------------------------------------

    async def test_get_tuple_of_unknown_thread_is_none(self, driver: Driver) -> None:
        assert await driver.get_tuple(make_config("nobody")) is None
        assert await driver.get_tuple(make_config("nobody", "", UNKNOWN_ID)) is None
        assert await driver.list(make_config("nobody")) == []

    async def test_put_returns_the_three_part_config(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        cfg = await driver.put(make_config("t"), cp, {}, {"a": "1"})
        assert cfg == {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cp["id"]}
        }
        sub = new_checkpoint({"a": 1}, {"a": "1"})
        cfg = await driver.put(make_config("t", "child:1"), sub, {}, {"a": "1"})
        assert cfg == {
            "configurable": {
                "thread_id": "t",
                "checkpoint_ns": "child:1",
                "checkpoint_id": sub["id"],
            }
        }

    async def test_round_trip_of_every_field(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": [1, "x"], "b": "s"}, {"a": "00001.5", "b": "00002.5"})
        cp["versions_seen"] = {"node": {"a": "00001.5"}, "__input__": {}}
        cp["updated_channels"] = ["a"]
        sent = copy.deepcopy(cp)
        cfg = await driver.put(
            make_config("t"), cp, {"source": "loop", "step": 3}, {"a": "00001.5", "b": "00002.5"}
        )
        tup = await driver.get(cfg)
        assert tup.checkpoint == sent
        assert tup.metadata == {"source": "loop", "step": 3}
        assert tup.config == cfg
        assert tup.parent_config is None
        assert tup.pending_writes == []

    async def test_latest_of_thread_and_each_by_id(self, driver: Driver) -> None:
        line = Line(driver, "t")
        ids = await line.steps(4)
        latest = await driver.get(make_config("t"))
        assert cid(latest.config) == ids[-1]
        assert latest.checkpoint["channel_values"] == {
            "messages": ["m0", "m1", "m2", "m3"],
            "count": 3,
        }
        for i, at in enumerate(ids):
            tup = await driver.get(make_config("t", "", at))
            assert cid(tup.config) == at
            assert tup.checkpoint["id"] == at
            assert tup.checkpoint["channel_values"]["count"] == i
        await line.check()

    async def test_latest_is_the_greatest_id_not_the_last_put(self, driver: Driver) -> None:
        older = new_checkpoint({"a": "old"}, {"a": "1"})
        newer = new_checkpoint({"a": "new"}, {"a": "2"})
        await driver.put(make_config("t"), newer, {}, {"a": "2"})
        await driver.put(make_config("t"), older, {}, {"a": "1"})
        tup = await driver.get(make_config("t"))
        assert tup.checkpoint["id"] == newer["id"]
        assert tup.checkpoint["channel_values"] == {"a": "new"}

    async def test_unknown_id_or_namespace_is_none(self, driver: Driver) -> None:
        ids = await Line(driver, "t").steps(2)
        assert await driver.get_tuple(make_config("t", "", UNKNOWN_ID)) is None
        assert await driver.get_tuple(make_config("t", "child:1")) is None
        assert await driver.get_tuple(make_config("t", "child:1", ids[0])) is None
        assert await driver.get_tuple(make_config("other", "", ids[0])) is None

    async def test_address_is_read_from_a_config_with_unrelated_keys(self, driver: Driver) -> None:
        config: dict[str, Any] = {
            "configurable": {
                "thread_id": "t",
                "checkpoint_ns": "",
                "user_id": "u",
                "model": {"name": "m"},
                "__pregel_task": object(),
            },
            "tags": ["a", "b"],
            "recursion_limit": 25,
            "callbacks": None,
            "run_name": "x",
        }
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        cfg = await driver.put(config, cp, {}, {"a": "1"})
        assert cfg == make_config("t", "", cp["id"])
        reader = {**config, "configurable": {**config["configurable"], "checkpoint_id": cp["id"]}}
        tup = await driver.get(reader)
        assert tup.checkpoint["id"] == cp["id"]
        assert tup.config == make_config("t", "", cp["id"])
        assert [cid(t.config) for t in await driver.list(config)] == [cp["id"]]

    async def test_missing_checkpoint_ns_means_root(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        cfg = await driver.put({"configurable": {"thread_id": "t"}}, cp, {}, {"a": "1"})
        assert cfg["configurable"]["checkpoint_ns"] == ""
        tup = await driver.get({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
        assert tup.checkpoint["id"] == cp["id"]

    async def test_non_string_thread_id_is_converted(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        cfg = await driver.put({"configurable": {"thread_id": 42}}, cp, {}, {"a": "1"})
        assert cfg["configurable"]["thread_id"] == "42"
        assert (await driver.get(make_config("42"))).checkpoint["id"] == cp["id"]

    async def test_namespaces_are_isolated(self, driver: Driver) -> None:
        root = Line(driver, "t")
        child = Line(driver, "t", "child:1")
        deeper = Line(driver, "t", "child:1|grand:2")
        await root.step({"a": "root-1"})
        await child.step({"a": "child-1"})
        await root.step({"a": "root-2"})
        await deeper.step({"a": "deep-1"})
        await child.step({"b": "child-2"})
        assert cid((await driver.get(make_config("t"))).config) == root.ids[-1]
        child_latest = await driver.get(make_config("t", "child:1"))
        assert cid(child_latest.config) == child.ids[-1]
        assert child_latest.checkpoint["channel_values"] == {"a": "child-1", "b": "child-2"}
        assert child_latest.config["configurable"]["checkpoint_ns"] == "child:1"
        deep = await driver.get(make_config("t", "child:1|grand:2"))
        assert deep.checkpoint["channel_values"] == {"a": "deep-1"}
        for line in (root, child, deeper):
            await line.check()
        assert await driver.ids(make_config("t", "child:1")) == child.ids[::-1]

    async def test_parent_is_the_incoming_checkpoint_id(self, driver: Driver) -> None:
        line = Line(driver, "t", "sub:1")
        ids = await line.steps(3)
        first = await driver.get(make_config("t", "sub:1", ids[0]))
        assert first.parent_config is None
        for parent, child in itertools.pairwise(ids):
            tup = await driver.get(make_config("t", "sub:1", child))
            assert tup.parent_config == make_config("t", "sub:1", parent)

    async def test_unchanged_channels_are_found_by_version_not_by_parent(
        self, driver: Driver
    ) -> None:
        """A copy of a checkpoint put under an older parent (LangGraph's ``__copy__`` fork)."""
        v1 = {"n": "00001.1", "s": "00001.1", "l": "00001.1"}
        c1 = await driver.put(
            make_config("t"), new_checkpoint({"n": 1, "s": "one", "l": [1]}, v1), {}, v1
        )
        v2 = {"n": "00002.1", "s": "00002.1", "l": "00002.1"}
        c2 = await driver.put(c1, new_checkpoint({"n": 2, "s": "two", "l": [2]}, v2), {}, v2)
        # The copy names c1 as parent, c2's versions, and writes nothing new.
        c3 = await driver.put(c1, new_checkpoint({"n": 2, "s": "two", "l": [2]}, v2), {}, {})
        tup = await driver.get(c3)
        assert tup.checkpoint["channel_values"] == {"n": 2, "s": "two", "l": [2]}
        assert tup.parent_config == c1
        # ... and a checkpoint with no parent at all, pointing at versions stored earlier.
        c4 = await driver.put(make_config("t"), new_checkpoint({}, v1), {}, {})
        assert (await driver.get(c4)).checkpoint["channel_values"] == {"n": 1, "s": "one", "l": [1]}
        assert (await driver.get(c2)).checkpoint["channel_values"] == {"n": 2, "s": "two", "l": [2]}

    async def test_only_new_versions_are_written(self, driver: Driver) -> None:
        v1 = {"kept": "00001.1", "list": "00001.1"}
        c1 = await driver.put(
            make_config("t"), new_checkpoint({"kept": "v", "list": [1]}, v1), {}, v1
        )
        # The caller sends nothing, then lies, about channels not in new_versions.
        c2 = await driver.put(c1, new_checkpoint({}, v1), {}, {})
        c3 = await driver.put(c2, new_checkpoint({"kept": "lie", "list": ["lie"]}, v1), {}, {})
        v4 = {**v1, "list": "00002.1"}
        c4 = await driver.put(
            c3, new_checkpoint({"kept": "lie", "list": [2]}, v4), {}, {"list": "00002.1"}
        )
        for cfg in (c1, c2, c3):
            assert (await driver.get(cfg)).checkpoint["channel_values"] == {
                "kept": "v",
                "list": [1],
            }
        assert (await driver.get(c4)).checkpoint["channel_values"] == {"kept": "v", "list": [2]}

    async def test_unchanged_channel_is_read_across_many_checkpoints(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.step({"big": {"doc": "x" * 5000}, "n": 0})
        for i in range(1, 6):
            await line.step({"n": i})
        for at in line.ids:
            tup = await driver.get(make_config("t", "", at))
            assert tup.checkpoint["channel_values"]["big"] == {"doc": "x" * 5000}
            assert tup.checkpoint["channel_versions"]["big"] == line.versions["big"]

    async def test_channels_no_put_wrote_read_as_absent(self, driver: Driver) -> None:
        """``channel_versions`` may name channels no put ever stored (LangGraph's savers allow it).

        They read as absent, in the checkpoint that names them and in a child
        that carries them over; their versions stay as put. (A channel whose
        stored value was lost is another matter: the backends refuse it.)
        """
        v1 = {"a": "00001.1", "ghost": "00007.1"}
        c1 = await driver.put(make_config("t"), new_checkpoint({"a": 1}, v1), {}, {"a": "00001.1"})
        tup = await driver.get(c1)
        assert tup.checkpoint["channel_values"] == {"a": 1}
        assert tup.checkpoint["channel_versions"] == v1
        v2 = {**v1, "a": "00002.1"}
        c2 = await driver.put(c1, new_checkpoint({"a": 2}, v2), {}, {"a": "00002.1"})
        assert (await driver.get(c2)).checkpoint["channel_values"] == {"a": 2}
        listed = await driver.list(make_config("t"))
        assert [t.checkpoint["channel_values"] for t in listed] == [{"a": 2}, {"a": 1}]

    async def test_channel_without_value_in_new_versions_is_cleared(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.step({"a": [1], "b": "keep"})
        await line.step(clear=["a"])
        tup = await driver.get(line.config)
        assert tup.checkpoint["channel_values"] == {"b": "keep"}
        assert "a" in tup.checkpoint["channel_versions"]
        await line.check()

    async def test_blob_reput_at_the_same_version_overwrites(self, driver: Driver) -> None:
        v = {"a": "00001.5"}
        c1 = await driver.put(make_config("t"), new_checkpoint({"a": ["first"]}, v), {}, v)
        c2 = await driver.put(c1, new_checkpoint({"a": ["second"]}, v), {}, v)
        assert (await driver.get(c2)).checkpoint["channel_values"] == {"a": ["second"]}
        assert (await driver.get(make_config("t"))).checkpoint["channel_values"] == {
            "a": ["second"]
        }
        # The blob is shared: the first checkpoint reads the value stored last too.
        assert (await driver.get(c1)).checkpoint["channel_values"] == {"a": ["second"]}

    async def test_reput_of_an_id_overwrites_it(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1, "l": [1]}, {"a": "1", "l": "1"})
        cfg = await driver.put(make_config("t"), cp, {"step": 1}, {"a": "1", "l": "1"})
        again = copy.deepcopy(cp)
        again["channel_values"] = {"a": 2, "l": [2]}
        again["channel_versions"] = {"a": "2", "l": "2"}
        assert await driver.put(make_config("t"), again, {"step": 2}, {"a": "2", "l": "2"}) == cfg
        tup = await driver.get(cfg)
        assert tup.checkpoint["channel_values"] == {"a": 2, "l": [2]}
        assert tup.checkpoint["channel_versions"] == {"a": "2", "l": "2"}
        assert tup.metadata == {"step": 2}
        assert await driver.ids(make_config("t")) == [cp["id"]]

    async def test_unknown_checkpoint_keys_round_trip(self, driver: Driver) -> None:
        cp = new_checkpoint(
            {"a": 1},
            {"a": "1"},
            custom={"nested": [1, "two", {"three": 3.0}]},
            future_flag=True,
        )
        cfg = await driver.put(make_config("t"), cp, {}, {"a": "1"})
        tup = await driver.get(cfg)
        got: Mapping[str, Any] = tup.checkpoint
        assert got["custom"] == {"nested": [1, "two", {"three": 3.0}]}
        assert got["future_flag"] is True
        assert got["channel_values"] == {"a": 1}

    async def test_caller_mutation_after_put_does_not_reach_the_store(self, driver: Driver) -> None:
        values: dict[str, Any] = {"l": [1, 2], "d": {"k": "v"}}
        versions = {"l": "1", "d": "1"}
        cp = new_checkpoint(values, versions)
        cp["versions_seen"] = {"node": {"l": "1"}}
        meta: dict[str, Any] = {"step": 1, "tags": ["a"]}
        new_versions = dict(versions)
        cfg = await driver.put(make_config("t"), cp, meta, new_versions)
        values["l"].append(3)
        values["d"]["k"] = "changed"
        cp["channel_versions"]["l"] = "9"
        cp["versions_seen"]["node"]["l"] = "9"
        cp["channel_values"]["new"] = "x"
        meta["tags"].append("b")
        meta["step"] = 99
        new_versions["l"] = "9"
        tup = await driver.get(cfg)
        assert tup.checkpoint["channel_values"] == {"l": [1, 2], "d": {"k": "v"}}
        assert tup.checkpoint["channel_versions"] == {"l": "1", "d": "1"}
        assert tup.checkpoint["versions_seen"] == {"node": {"l": "1"}}
        assert tup.metadata == {"step": 1, "tags": ["a"]}

    async def test_mutating_what_was_read_does_not_reach_the_store(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"l": [1]}, {"tags": ["a"]})
        tup = await driver.get(cfg)
        tup.checkpoint["channel_values"]["l"].append(2)
        tup.checkpoint["channel_versions"]["l"] = "x"
        tup.metadata["tags"].append("b")  # type: ignore[typeddict-item]
        again = await driver.get(cfg)
        assert again.checkpoint["channel_values"] == {"l": [1]}
        assert again.checkpoint["channel_versions"]["l"] != "x"
        assert dict(again.metadata) == {"tags": ["a"]}

    # --- metadata -----------------------------------------------------------------

    async def test_metadata_is_merged_from_the_config(self, driver: Driver) -> None:
        config: dict[str, Any] = {
            "configurable": {
                "thread_id": "t",
                "checkpoint_ns": "",
                "user": "u1",
                "attempt": 2,
                "ratio": 0.5,
                "flag": False,
                "nested": {"ignored": 1},
                "listed": [1],
                "none": None,
                "__internal": "x",
                "__pregel_step": 3,
                "checkpoint_map": {"": "x"},
                "langgraph_node": "n",
                "source": "from-config",
            },
            "metadata": {"run_id": "r1", "tenant": "acme", "user": "meta-user"},
        }
        cp = new_checkpoint({}, {})
        cfg = await driver.put(config, cp, {"source": "loop", "step": 1, "writes": {"x": 1}}, {})
        tup = await driver.get(cfg)
        assert tup.metadata == {
            "source": "loop",
            "step": 1,
            "run_id": "r1",
            "tenant": "acme",
            "user": "meta-user",
            "attempt": 2,
            "ratio": 0.5,
            "flag": False,
        }

    async def test_metadata_round_trips_as_json(self, driver: Driver) -> None:
        meta = {
            "source": "update",
            "step": -1,
            "parents": {"": "1ef00000-0000-6000-8000-000000000001"},
            "nested": {"list": [1, 2.5, None, True, "é"], "empty": {}},
            "none": None,
            "unicode": "日本語 ✓",
            "big": 2**53,
        }
        cfg = await driver.put(make_config("t"), new_checkpoint({}, {}), meta, {})
        tup = await driver.get(cfg)
        assert tup.metadata == meta
        assert type(tup.metadata["step"]) is int
        assert tup.metadata["nested"]["list"][3] is True  # type: ignore[typeddict-item]

    async def test_nul_characters_are_dropped_from_metadata(self, driver: Driver) -> None:
        cfg = await driver.put(make_config("t"), new_checkpoint({}, {}), {"k\x00": "a\x00b"}, {})
        assert (await driver.get(cfg)).metadata == {"k": "ab"}

    async def test_metadata_that_is_not_json_is_refused(self, driver: Driver) -> None:
        bad_metadata: list[Any] = [
            {"s": {1, 2}},
            {"f": float("nan")},
            {"d": datetime.now(UTC)},
            {1: "x"},
        ]
        for bad in bad_metadata:
            with pytest.raises(ConfigError):
                await driver.put(make_config("t"), new_checkpoint({}, {}), bad, {})
        assert await driver.list(None) == []

    # --- list -----------------------------------------------------------------------

    async def test_list_is_newest_first_with_values_and_parents(self, driver: Driver) -> None:
        line = Line(driver, "t")
        ids = await line.steps(5)
        got = await driver.list(make_config("t"))
        assert [cid(t.config) for t in got] == ids[::-1]
        for t in got:
            assert t.checkpoint["channel_values"] == line.expected[cid(t.config)]
        assert [t.parent_config for t in got] == [
            *(make_config("t", "", at) for at in ids[::-1][1:]),
            None,
        ]

    async def test_list_none_lists_every_thread_newest_first(self, driver: Driver) -> None:
        a, b = Line(driver, "a"), Line(driver, "b")
        await a.steps(2)
        await b.steps(1)
        await a.steps(1)
        sub = Line(driver, "b", "sub:1")
        await sub.steps(2)
        every = sorted(a.ids + b.ids + sub.ids, reverse=True)
        assert await driver.ids(None) == every
        assert await driver.ids({"configurable": {}}) == every
        got = await driver.list(None)
        assert {t.config["configurable"]["thread_id"] for t in got} == {"a", "b"}
        by_id = {cid(t.config): t.config for t in got}
        assert by_id[sub.ids[0]] == make_config("b", "sub:1", sub.ids[0])

    async def test_list_a_thread_spans_namespaces_unless_one_is_named(self, driver: Driver) -> None:
        root, sub = Line(driver, "t"), Line(driver, "t", "sub:1")
        await root.steps(2)
        await sub.steps(2)
        await root.steps(1)
        await Line(driver, "other").steps(1)
        assert await driver.ids({"configurable": {"thread_id": "t"}}) == sorted(
            root.ids + sub.ids, reverse=True
        )
        assert await driver.ids(make_config("t", "")) == root.ids[::-1]
        assert await driver.ids(make_config("t", "sub:1")) == sub.ids[::-1]

    async def test_list_with_a_checkpoint_id_lists_just_that_one(self, driver: Driver) -> None:
        ids = await Line(driver, "t").steps(3)
        assert await driver.ids(make_config("t", "", ids[1])) == [ids[1]]
        assert await driver.ids(make_config("t", "", UNKNOWN_ID)) == []

    async def test_list_before(self, driver: Driver) -> None:
        line = Line(driver, "t")
        ids = await line.steps(5)
        assert await driver.ids(make_config("t"), before=line.configs[3]) == ids[:3][::-1]
        assert await driver.ids(make_config("t"), before=line.configs[0]) == []
        other = await Line(driver, "u").steps(1)
        assert await driver.ids(None, before=line.configs[2]) == ids[:2][::-1]
        assert await driver.ids(None, before=make_config("u", "", other[0])) == ids[::-1]

    async def test_list_before_needs_only_a_checkpoint_id(self, driver: Driver) -> None:
        """LangGraph's replay of a graph with subgraphs passes ``before`` without a thread:
        only its checkpoint id bounds the listing; other keys of it are ignored."""
        root, sub = Line(driver, "t"), Line(driver, "t", "sub:1")
        await root.steps(2)
        await sub.steps(2)
        ids = await root.steps(2)
        bound = {"configurable": {"checkpoint_id": ids[0]}}
        assert await driver.ids(make_config("t", ""), before=bound, limit=1) == [root.ids[1]]
        assert await driver.ids(make_config("t", "sub:1"), before=bound) == sub.ids[::-1]
        assert await driver.ids(None, before=bound) == sorted(root.ids[:2] + sub.ids, reverse=True)
        # A thread or namespace in `before` does not narrow or widen the listing.
        other = {"configurable": {"thread_id": "elsewhere", "checkpoint_ns": "x:1"}}
        other["configurable"]["checkpoint_id"] = ids[0]
        assert await driver.ids(make_config("t", ""), before=other) == root.ids[:2][::-1]
        assert (
            await driver.ids(
                make_config("t", ""),
                before={
                    "configurable": {"checkpoint_id": ids[0], "checkpoint_map": {}},
                    "metadata": {},
                },
            )
            == root.ids[:2][::-1]
        )

    @pytest.mark.parametrize(
        "before",
        [
            {"configurable": {}},
            {"configurable": {"thread_id": "t"}},
            {"configurable": {"checkpoint_id": None}},
            {"configurable": {"checkpoint_id": 5}},
            {"configurable": {"checkpoint_id": "a\x00b"}},
            {"configurable": {"checkpoint_id": "x" * 600}},
            {"checkpoint_id": "1f0a"},
            "1f0a",
        ],
    )
    async def test_list_before_without_a_usable_checkpoint_id_is_a_config_error(
        self, driver: Driver, before: Any
    ) -> None:
        await Line(driver, "t").steps(1)
        with pytest.raises(ConfigError, match="before"):
            await driver.list(make_config("t"), before=before)

    async def test_list_limit(self, driver: Driver) -> None:
        line = Line(driver, "t")
        ids = await line.steps(5)
        assert await driver.ids(make_config("t"), limit=None) == ids[::-1]
        assert await driver.ids(make_config("t"), limit=2) == ids[::-1][:2]
        assert await driver.ids(make_config("t"), limit=50) == ids[::-1]
        assert await driver.ids(make_config("t"), limit=0) == []
        assert await driver.ids(None, limit=0) == []
        assert await driver.ids(make_config("t"), before=line.configs[4], limit=2) == [
            ids[3],
            ids[2],
        ]

    @pytest.mark.parametrize("limit", [-1, -100, 1.5, "3", True])
    async def test_list_bad_limit_is_a_config_error(self, driver: Driver, limit: Any) -> None:
        await Line(driver, "t").steps(1)
        with pytest.raises(ConfigError):
            await driver.list(make_config("t"), limit=limit)

    async def test_list_with_pending_writes(self, driver: Driver) -> None:
        line = Line(driver, "t")
        ids = await line.steps(2)
        await driver.put_writes(line.configs[0], [("x", 1)], "task-a")
        await driver.put_writes(line.configs[1], [("y", 2), (ERROR, "boom")], "task-b")
        got = {cid(t.config): t.pending_writes for t in await driver.list(make_config("t"))}
        assert got == {
            ids[0]: [("task-a", "x", 1)],
            ids[1]: [("task-b", ERROR, "boom"), ("task-b", "y", 2)],
        }

    # --- filter -------------------------------------------------------------------

    async def test_filter_is_exact_json_equality(self, driver: Driver) -> None:
        line = Line(driver, "t")
        for i, meta in enumerate(FILTER_METADATA):
            await line.step({"i": i}, meta)
        index = {at: i for i, at in enumerate(line.ids)}
        for flt, want in FILTER_CASES:
            # The table is the contract; the reference helper must agree with it too.
            assert {i for i, m in enumerate(FILTER_METADATA) if metadata_matches(m, flt)} == want
            got = [index[at] for at in await driver.ids(None, filter=flt)]
            assert set(got) == want, flt
            assert got == sorted(got, reverse=True), flt
            got_thread = {index[at] for at in await driver.ids(make_config("t"), filter=flt)}
            assert got_thread == want, flt

    async def test_filter_with_limit_before_and_namespace(self, driver: Driver) -> None:
        root, sub = Line(driver, "t"), Line(driver, "t", "sub:1")
        for i in range(6):
            await root.step({"i": i}, {"parity": i % 2})
            await sub.step({"i": i}, {"parity": i % 2})
        even_root = [at for i, at in enumerate(root.ids) if i % 2 == 0][::-1]
        assert await driver.ids(make_config("t", ""), filter={"parity": 0}) == even_root
        assert (
            await driver.ids(make_config("t", ""), filter={"parity": 0}, limit=2) == even_root[:2]
        )
        assert (
            await driver.ids(make_config("t", ""), filter={"parity": 0}, before=root.configs[4])
            == even_root[1:]
        )
        both = await driver.ids({"configurable": {"thread_id": "t"}}, filter={"parity": 1})
        assert len(both) == 6

    async def test_filter_matches_values_from_the_config_merge(self, driver: Driver) -> None:
        config = {"configurable": {"thread_id": "t", "user": "u1"}, "metadata": {"run_id": "r9"}}
        cfg = await driver.put(config, new_checkpoint({}, {}), {"step": 1}, {})
        await Line(driver, "t").step({"a": 1}, {"step": 2})
        assert await driver.ids(None, filter={"user": "u1"}) == [cid(cfg)]
        assert await driver.ids(None, filter={"run_id": "r9", "step": 1}) == [cid(cfg)]

    async def test_filter_keys_that_look_like_injection(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.steps(3, {"n": 1, "a": 1})
        before = await driver.list(None)
        for key in INJECTION_KEYS:
            assert await driver.list(None, filter={key: 1}) == [], key
            assert await driver.list(make_config("t"), filter={key: "x", "n": 1}) == [], key
        after = await driver.list(None)
        assert [(t.config, t.checkpoint, t.metadata) for t in after] == [
            (t.config, t.checkpoint, t.metadata) for t in before
        ]
        await line.check()
        # A key really stored under such a name is matched as a plain key.
        weird = INJECTION_KEYS[0]
        cfg = await driver.put(make_config("w"), new_checkpoint({}, {}), {weird: 1}, {})
        assert await driver.ids(None, filter={weird: 1}) == [cid(cfg)]

    async def test_filter_with_a_non_string_key_is_a_config_error(self, driver: Driver) -> None:
        await Line(driver, "t").steps(1)
        with pytest.raises(ConfigError):
            await driver.list(None, filter={1: "x"})  # type: ignore[dict-item]

    # --- put_writes -----------------------------------------------------------------

    async def test_pending_writes_order_by_task_path_task_id_idx(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        await driver.put_writes(cfg, [("x", 1), ("y", 2)], "t2", "b")
        await driver.put_writes(cfg, [("x", 3), ("y", 4), ("z", 5)], "t1", "b")
        await driver.put_writes(cfg, [("x", 6)], "t9", "a")
        await driver.put_writes(cfg, [("x", 7)], "t0", "c")
        tup = await driver.get(cfg)
        assert tup.pending_writes == [
            ("t9", "x", 6),
            ("t1", "x", 3),
            ("t1", "y", 4),
            ("t1", "z", 5),
            ("t2", "x", 1),
            ("t2", "y", 2),
            ("t0", "x", 7),
        ]

    async def test_ordinary_writes_are_insert_or_ignore(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        await driver.put_writes(cfg, [("x", "first"), ("y", "first")], "task")
        await driver.put_writes(cfg, [("x", "second")], "task")
        await driver.put_writes(cfg, [("x", "a"), ("y", "b"), ("z", "third")], "task")
        tup = await driver.get(cfg)
        assert tup.pending_writes == [
            ("task", "x", "first"),
            ("task", "y", "first"),
            ("task", "z", "third"),
        ]

    async def test_special_writes_replace(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        await driver.put_writes(
            cfg, [(ERROR, "e1"), (INTERRUPT, ["i1"]), (SCHEDULED, 1), (RESUME, "r1")], "task"
        )
        await driver.put_writes(cfg, [(ERROR, "e2")], "task")
        await driver.put_writes(cfg, [(INTERRUPT, ["i2"]), (RESUME, {"v": "r2"})], "task")
        await driver.put_writes(cfg, [("x", 1)], "task")
        tup = await driver.get(cfg)
        assert tup.pending_writes == [
            ("task", RESUME, {"v": "r2"}),
            ("task", INTERRUPT, ["i2"]),
            ("task", SCHEDULED, 1),
            ("task", ERROR, "e2"),
            ("task", "x", 1),
        ]

    async def test_special_channel_twice_in_one_batch_keeps_the_last(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        await driver.put_writes(cfg, [(ERROR, "first"), ("x", 1), (ERROR, "last")], "task")
        assert (await driver.get(cfg)).pending_writes == [("task", ERROR, "last"), ("task", "x", 1)]

    async def test_writes_belong_to_one_checkpoint(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.steps(2)
        sub = Line(driver, "t", "sub:1")
        await sub.steps(1)
        await driver.put_writes(line.configs[0], [("x", "on-first")], "task")
        await driver.put_writes(sub.configs[0], [("x", "on-sub")], "task")
        assert (await driver.get(line.configs[0])).pending_writes == [("task", "x", "on-first")]
        assert (await driver.get(line.configs[1])).pending_writes == []
        assert (await driver.get(sub.configs[0])).pending_writes == [("task", "x", "on-sub")]

    async def test_write_values_round_trip(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        values: list[Any] = [None, b"\x00\xff", "", [], {"k": [1, {"d": 2.5}]}, "x" * 5000, 10**20]
        await driver.put_writes(cfg, [(f"c{i}", v) for i, v in enumerate(values)], "task")
        got = (await driver.get(cfg)).pending_writes
        assert got == [("task", f"c{i}", v) for i, v in enumerate(values)]

    async def test_get_writes_gives_each_write_its_task_path_and_index(
        self, driver: Driver
    ) -> None:
        line = Line(driver, "t")
        cfg = await line.step({"a": 1})
        sub = await Line(driver, "t", "sub:1").step({"a": 2})
        await driver.put_writes(cfg, [("x", 1), ("y", [2])], "t2", "~pull, b")
        # LangGraph's batch of a resumed task: its ordinary writes start at 1.
        await driver.put_writes(cfg, [(RESUME, "yes"), ("x", {"v": 3})], "t1", "~pull, a")
        await driver.put_writes(cfg, [(INTERRUPT, ["i"])], "t1", "~pull, a")
        await driver.put_writes(cfg, [("x", "no path")], "t0")
        await driver.put_writes(sub, [("x", "in sub")], "t1", "~pull, a")
        writes = await driver.get_writes(cfg)
        assert writes == [
            StoredWrite("t0", "x", "no path", "", 0),
            StoredWrite("t1", RESUME, "yes", "~pull, a", -4),
            StoredWrite("t1", INTERRUPT, ["i"], "~pull, a", -3),
            StoredWrite("t1", "x", {"v": 3}, "~pull, a", 1),
            StoredWrite("t2", "x", 1, "~pull, b", 0),
            StoredWrite("t2", "y", [2], "~pull, b", 1),
        ]
        # The same writes, in the same order, as get_tuple's pending writes.
        assert [tuple(w[:3]) for w in writes] == (await driver.get(cfg)).pending_writes
        assert await driver.get_writes(sub) == [StoredWrite("t1", "x", "in sub", "~pull, a", 0)]
        later = await line.step({"a": 3})
        assert await driver.get_writes(later) == []
        assert await driver.get_writes(make_config("t", "", UNKNOWN_ID)) == []
        assert await driver.get_writes(make_config("nobody", "", UNKNOWN_ID)) == []
        with pytest.raises(ConfigError, match="checkpoint_id"):
            await driver.get_writes(make_config("t"))

    async def test_bad_writes_are_config_errors(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        with pytest.raises(ConfigError, match="checkpoint_id"):
            await driver.put_writes(make_config("t"), [("x", 1)], "task")
        with pytest.raises(ConfigError):
            await driver.put_writes(cfg, [("x", 1)], "")
        with pytest.raises(ConfigError):
            await driver.put_writes(cfg, [("x", 1, 2)], "task")
        with pytest.raises(ConfigError):
            await driver.put_writes(cfg, [(1, "x")], "task")
        assert (await driver.get(cfg)).pending_writes == []

    # --- thread operations ---------------------------------------------------------------

    async def test_delete_thread_removes_every_namespace(self, driver: Driver) -> None:
        line, sub = Line(driver, "t"), Line(driver, "t", "sub:1")
        await line.steps(3)
        await sub.steps(2)
        await driver.put_writes(line.configs[-1], [("x", 1)], "task")
        other = Line(driver, "other")
        await other.steps(2)
        await driver.delete_thread("t")
        assert await driver.get_tuple(make_config("t")) is None
        assert await driver.get_tuple(make_config("t", "sub:1")) is None
        assert await driver.list({"configurable": {"thread_id": "t"}}) == []
        assert await driver.ids(None) == other.ids[::-1]
        await other.check()
        # The old writes do not come back when the same id is stored again.
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        cp["id"] = line.ids[-1]
        cfg = await driver.put(make_config("t"), cp, {}, {"a": "1"})
        tup = await driver.get(cfg)
        assert tup.pending_writes == []
        assert tup.checkpoint["channel_values"] == {"a": 1}

    async def test_delete_thread_of_unknown_thread_is_a_no_op(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.steps(2)
        await driver.delete_thread("nobody")
        assert await driver.ids(None) == line.ids[::-1]

    async def test_delete_for_runs(self, driver: Driver) -> None:
        r1 = Line(driver, "t")
        await r1.steps(3, {"run_id": "r1"})
        r2 = r1.fork(r1.configs[0])
        await r2.step({"extra": ["only-r2"]}, {"run_id": "r2"})
        sub = Line(driver, "t", "sub:1")
        await sub.steps(1, {"run_id": "r1"})
        r3 = Line(driver, "other")
        await r3.steps(2, {"run_id": "r3"})
        await driver.put_writes(r1.configs[1], [("x", 1)], "task")
        await driver.put_writes(r2.configs[0], [("x", 2)], "task")
        await driver.delete_for_runs(["r1", "nope"])
        assert await driver.ids({"configurable": {"thread_id": "t"}}) == r2.ids
        tup = await driver.get(make_config("t"))
        # r2 still reads the channels it shares with r1's deleted checkpoints.
        assert tup.checkpoint["channel_values"] == r2.expected[r2.ids[0]]
        assert tup.checkpoint["channel_values"]["messages"] == ["m0"]
        assert tup.pending_writes == [("task", "x", 2)]
        assert await driver.get_tuple(make_config("t", "sub:1")) is None
        assert await driver.ids(make_config("other")) == r3.ids[::-1]
        await r3.check()

    async def test_delete_for_runs_with_no_match_is_a_no_op(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.steps(2, {"run_id": "r1"})
        await driver.delete_for_runs([])
        await driver.delete_for_runs(["unknown"])
        assert await driver.ids(None) == line.ids[::-1]
        with pytest.raises(ConfigError):
            await driver.delete_for_runs("r1")
        assert await driver.ids(None) == line.ids[::-1]

    async def test_copy_thread(self, driver: Driver) -> None:
        src, sub = Line(driver, "src"), Line(driver, "src", "sub:1")
        await src.steps(3, {"run_id": "r1", "tag": "x"})
        await sub.steps(2)
        await driver.put_writes(src.configs[1], [("x", 1), (ERROR, "e")], "task", "p")
        await driver.put_writes(sub.configs[0], [("y", 2)], "task")
        await driver.copy_thread("src", "dst")
        source = await driver.list({"configurable": {"thread_id": "src"}})
        target = await driver.list({"configurable": {"thread_id": "dst"}})
        assert [cid(t.config) for t in target] == [cid(t.config) for t in source]
        for a, b in zip(source, target, strict=True):
            ns = a.config["configurable"]["checkpoint_ns"]
            assert b.config == make_config("dst", ns, cid(a.config))
            assert b.checkpoint == a.checkpoint
            assert b.metadata == a.metadata
            assert b.pending_writes == a.pending_writes
            if a.parent_config is None:
                assert b.parent_config is None
            else:
                assert b.parent_config == make_config("dst", ns, cid(a.parent_config))
        assert (await driver.get(src.configs[1])).pending_writes == [
            ("task", ERROR, "e"),
            ("task", "x", 1),
        ]
        await src.check(thread_id="dst")
        await sub.check(thread_id="dst")
        assert cid((await driver.get(make_config("dst", "sub:1"))).config) == sub.ids[-1]

    async def test_copy_thread_overwrites_the_target(self, driver: Driver) -> None:
        src = Line(driver, "src")
        ids = await src.steps(2)
        clash = new_checkpoint({"messages": ["target-version"]}, {"messages": "00009.9"})
        clash["id"] = ids[1]
        await driver.put(make_config("dst"), clash, {"mine": True}, {"messages": "00009.9"})
        own = new_checkpoint({"own": 1}, {"own": "1"})
        await driver.put(make_config("dst", "own:1"), own, {}, {"own": "1"})
        await driver.copy_thread("src", "dst")
        tup = await driver.get(make_config("dst", "", ids[1]))
        assert tup.checkpoint["channel_values"] == src.expected[ids[1]]
        assert tup.metadata == {}
        assert await driver.ids(make_config("dst", "")) == ids[::-1]
        # Checkpoints only the target had are left alone.
        assert (await driver.get(make_config("dst", "own:1"))).checkpoint["channel_values"] == {
            "own": 1
        }

    async def test_copy_is_independent_of_its_source(self, driver: Driver) -> None:
        src = Line(driver, "src")
        await src.steps(2)
        await driver.copy_thread("src", "dst")
        await driver.put_writes(make_config("dst", "", src.ids[0]), [("x", "dst")], "task")
        await driver.delete_thread("src")
        assert await driver.list({"configurable": {"thread_id": "src"}}) == []
        await src.check(thread_id="dst")
        assert (await driver.get(make_config("dst", "", src.ids[0]))).pending_writes == [
            ("task", "x", "dst")
        ]

    async def test_copy_thread_edge_cases(self, driver: Driver) -> None:
        await Line(driver, "src").steps(1)
        await driver.copy_thread("nobody", "dst")
        assert await driver.list({"configurable": {"thread_id": "dst"}}) == []
        with pytest.raises(ConfigError):
            await driver.copy_thread("src", "src")
        assert len(await driver.list(None)) == 1

    async def test_prune_keep_latest(self, driver: Driver) -> None:
        root, sub = Line(driver, "t"), Line(driver, "t", "sub:1")
        await root.step({"static": {"doc": "written once"}})
        await root.steps(4)
        await sub.steps(3)
        for cfg in root.configs + sub.configs:
            await driver.put_writes(cfg, [("x", cid(cfg))], "task")
        other = Line(driver, "other")
        await other.steps(3)
        await driver.prune(["t"])
        assert await driver.ids(make_config("t", "")) == [root.ids[-1]]
        assert await driver.ids(make_config("t", "sub:1")) == [sub.ids[-1]]
        latest = await driver.get(make_config("t"))
        # The survivor still reads a channel last written by a pruned checkpoint.
        assert latest.checkpoint["channel_values"] == root.expected[root.ids[-1]]
        assert latest.checkpoint["channel_values"]["static"] == {"doc": "written once"}
        assert latest.pending_writes == [("task", "x", root.ids[-1])]
        assert (await driver.get(make_config("t", "sub:1"))).pending_writes == [
            ("task", "x", sub.ids[-1])
        ]
        assert await driver.ids(make_config("other")) == other.ids[::-1]
        await other.check()

    @pytest.mark.parametrize("keep", [1, 2, 10])
    async def test_prune_keep_last(self, driver: Driver, keep: int) -> None:
        root, sub = Line(driver, "t"), Line(driver, "t", "sub:1")
        await root.step({"static": "once"})
        await root.steps(4)
        await sub.steps(3)
        await driver.put_writes(root.configs[-2], [("x", 1)], "task")
        await driver.prune(["t"], strategy="keep_last", keep=keep)
        assert await driver.ids(make_config("t", "")) == root.ids[::-1][:keep]
        assert await driver.ids(make_config("t", "sub:1")) == sub.ids[::-1][:keep]
        for tup in await driver.list({"configurable": {"thread_id": "t"}}):
            line = root if tup.config["configurable"]["checkpoint_ns"] == "" else sub
            assert tup.checkpoint["channel_values"] == line.expected[cid(tup.config)]
        if keep >= 2:
            assert (await driver.get(root.configs[-2])).pending_writes == [("task", "x", 1)]

    async def test_prune_delete(self, driver: Driver) -> None:
        await Line(driver, "t").steps(3)
        await Line(driver, "t", "sub:1").steps(2)
        keep = Line(driver, "u")
        await keep.steps(2)
        await driver.prune(["t", "nobody"], strategy="delete")
        assert await driver.list({"configurable": {"thread_id": "t"}}) == []
        assert await driver.ids(None) == keep.ids[::-1]
        await keep.check()

    async def test_prune_then_continue_the_thread(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.step({"static": [1, 2, 3]})
        await line.steps(3)
        await driver.prune(["t"])
        await line.steps(2)
        tup = await driver.get(make_config("t"))
        assert tup.checkpoint["channel_values"] == line.expected[line.ids[-1]]
        assert await driver.ids(make_config("t")) == line.ids[::-1][:3]

    async def test_prune_bad_arguments_are_config_errors(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await line.steps(3)
        with pytest.raises(ConfigError):
            await driver.prune(["t"], strategy="keep_last", keep=0)
        with pytest.raises(ConfigError):
            await driver.prune(["t"], strategy="keep_last", keep=-1)
        with pytest.raises(ConfigError):
            await driver.prune(["t"], strategy="newest")
        with pytest.raises(ConfigError):
            await driver.prune("t")
        assert await driver.ids(None) == line.ids[::-1]
        await driver.prune([])
        assert await driver.ids(None) == line.ids[::-1]

    # --- bad input --------------------------------------------------------------------

    async def test_missing_thread_id_is_a_config_error(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        configs: list[dict[str, Any]] = [
            {},
            {"configurable": {}},
            {"configurable": {"checkpoint_ns": "x"}},
        ]
        for config in configs:
            with pytest.raises(ConfigError, match="thread_id"):
                await driver.get_tuple(config)
            with pytest.raises(ConfigError, match="thread_id"):
                await driver.put(config, cp, {}, {"a": "1"})
            with pytest.raises(ConfigError, match="thread_id"):
                await driver.put_writes(config, [("x", 1)], "task")
        assert await driver.list(None) == []

    async def test_bad_addresses_are_config_errors(self, driver: Driver) -> None:
        cp = new_checkpoint({"a": 1}, {"a": "1"})
        bad: list[Any] = [
            None,
            "t",
            {"configurable": {"thread_id": ["t"]}},
            {"configurable": {"thread_id": "t", "checkpoint_ns": 3}},
            {"configurable": {"thread_id": "t", "checkpoint_id": 3}},
        ]
        for config in bad:
            with pytest.raises(ConfigError):
                await driver.get_tuple(config)
            with pytest.raises(ConfigError):
                await driver.put(config, cp, {}, {"a": "1"})
        assert await driver.list(None) == []

    @pytest.mark.parametrize(("bad", "problem"), [("x\ud800", "lone surrogate"), ("x\x00", "NUL")])
    async def test_names_no_backend_can_store_are_refused(
        self, driver: Driver, bad: str, problem: str
    ) -> None:
        """A lone surrogate or U+0000 in a name: ConfigError naming the field, on every backend.

        Postgres text holds neither, UTF-8 cannot encode a lone surrogate; one
        rule everywhere keeps every stored thread copyable to any backend.
        """
        good = await Line(driver, "t").step({"a": 1})
        cp = new_checkpoint({"a": 2}, {"a": "2"})
        addresses: dict[str, Any] = {
            "thread_id": make_config(bad),
            "checkpoint_ns": make_config("t", bad),
            "checkpoint_id": make_config("t", "", bad),
        }
        for field, config in addresses.items():
            with pytest.raises(ConfigError, match=f"{field}.*{problem}"):
                await driver.get_tuple(config)
            with pytest.raises(ConfigError, match=f"{field}.*{problem}"):
                await driver.put(config, cp, {}, {"a": "2"})
            with pytest.raises(ConfigError, match=f"{field}.*{problem}"):
                await driver.list(config)
        named = new_checkpoint({bad: 1}, {bad: "1"})
        with pytest.raises(ConfigError, match=f"channel name.*{problem}"):
            await driver.put(make_config("t"), named, {}, {bad: "1"})
        bad_version = new_checkpoint({"a": 1}, {"a": bad})
        with pytest.raises(ConfigError, match=f"version of channel 'a'.*{problem}"):
            await driver.put(make_config("t"), bad_version, {}, {"a": bad})
        bad_id = new_checkpoint({"a": 1}, {"a": "3"})
        bad_id["id"] = bad
        with pytest.raises(ConfigError, match=f"checkpoint id.*{problem}"):
            await driver.put(make_config("t"), bad_id, {}, {"a": "3"})
        with pytest.raises(ConfigError, match=f"task_id.*{problem}"):
            await driver.put_writes(good, [("x", 1)], bad)
        with pytest.raises(ConfigError, match=f"task_path.*{problem}"):
            await driver.put_writes(good, [("x", 1)], "task", bad)
        with pytest.raises(ConfigError, match=f"channel.*{problem}"):
            await driver.put_writes(good, [(bad, 1)], "task")
        with pytest.raises(ConfigError, match=problem):
            await driver.delete_thread(bad)
        with pytest.raises(ConfigError, match=problem):
            await driver.copy_thread("t", bad)
        with pytest.raises(ConfigError, match=problem):
            await driver.prune(["t", bad])
        with pytest.raises(ConfigError, match=problem):
            await driver.delete_for_runs([bad])
        # nothing was written, and the thread is intact
        assert [t.config for t in await driver.list(None)] == [good]
        assert (await driver.get(good)).pending_writes == []

    async def test_metadata_with_a_lone_surrogate_is_refused(self, driver: Driver) -> None:
        for bad in ({"k": "a\udc80"}, {"k\udc80": 1}, {"k": ["ok", {"deep": "\ud83d"}]}):
            with pytest.raises(ConfigError, match=r"metadata.*lone surrogate"):
                await driver.put(make_config("t"), new_checkpoint({}, {}), bad, {})
        config = {"configurable": {"thread_id": "t", "user": "\ud800"}}
        with pytest.raises(ConfigError, match=r"config key 'user'.*lone surrogate"):
            await driver.put(config, new_checkpoint({}, {}), {}, {})
        assert await driver.list(None) == []
        # non-ASCII text that is valid Unicode is stored as it is, names included
        cfg = await driver.put(
            make_config("fil-ü-日本"),
            new_checkpoint({"é": 1}, {"é": "1"}),
            {"k": "ü😀"},
            {"é": "1"},
        )
        got = await driver.get(cfg)
        assert got.metadata == {"k": "ü😀"}
        assert got.checkpoint["channel_values"] == {"é": 1}
        assert got.config["configurable"]["thread_id"] == "fil-ü-日本"

    async def test_a_lone_surrogate_in_a_checkpoint_fields_key_is_refused(
        self, driver: Driver
    ) -> None:
        """Found by the odd-input test: Postgres raised UnicodeEncodeError for such a key."""
        for where in ("extra", "versions_seen"):
            cp: Any = new_checkpoint({}, {})
            cp[where] = {"x\ud800": {}}
            with pytest.raises(ConfigError, match="lone surrogate"):
                await driver.put(make_config("t"), cp, {}, {})
        assert await driver.list(None) == []

    async def test_metadata_integers_of_any_size_round_trip_and_filter(
        self, driver: Driver
    ) -> None:
        """JSON integers have no size limit; MessagePack's and SQLite's stop at 64 bits."""
        big = {"n": 10**30, "neg": -(10**25), "nested": [{"x": 2**64}], "small": 5}
        cfg = await driver.put(make_config("t"), new_checkpoint({}, {}), big, {})
        got: dict[str, Any] = dict((await driver.get(cfg)).metadata)
        assert got == big
        assert type(got["n"]) is int
        assert await driver.ids(None, filter={"n": 10**30}) == [cid(cfg)]
        assert await driver.ids(None, filter={"n": 10**30 + 1}) == []
        assert await driver.ids(make_config("t"), filter={"nested": [{"x": 2**64}]}) == [cid(cfg)]

    async def test_metadata_numbers_keep_their_type(self, driver: Driver) -> None:
        """A float stays a float (JSONB's numeric gave 1e16 back as an int), an int an int."""
        numbers = {"a": 1e16, "b": 2.5e16, "c": 1.0, "d": 1e-7, "e": 10**20, "f": 1e308, "g": 7}
        cfg = await driver.put(make_config("t"), new_checkpoint({}, {}), {"n": numbers}, {})
        got = dict((await driver.get(cfg)).metadata)["n"]
        assert got == numbers
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in numbers.items()}
        assert await driver.ids(None, filter={"n": numbers}) == [cid(cfg)]

    async def test_metadata_nested_too_deep_is_refused(self, driver: Driver) -> None:
        def nest(depth: int) -> Any:
            value: Any = 1
            for _ in range(depth):
                value = [value]
            return value

        cfg = await driver.put(make_config("t"), new_checkpoint({}, {}), {"ok": nest(60)}, {})
        assert (await driver.get(cfg)).metadata == {"ok": nest(60)}
        for depth in (65, 5000):  # 5000: past Python's recursion limit
            with pytest.raises(ConfigError, match="nested more than 64 levels"):
                await driver.put(make_config("t"), new_checkpoint({}, {}), {"x": nest(depth)}, {})
            with pytest.raises(ConfigError, match="nested more than 64 levels"):
                await driver.list(None, filter={"x": nest(depth)})
        assert [t.config for t in await driver.list(None)] == [cfg]

    async def test_versions_must_be_int_float_or_str(self, driver: Driver) -> None:
        bad: Any
        for bad in (None, [1], True, {"v": 1}):
            cp = new_checkpoint({"a": 1}, {"a": bad})
            with pytest.raises(ConfigError, match="version of channel 'a' must be"):
                await driver.put(make_config("t"), cp, {}, {"a": bad})
            not_a_version: Any = bad if bad is not None else [None]
            with pytest.raises(ConfigError, match="channel version must be"):
                driver.saver.get_next_version(not_a_version, None)
        for good in (3, 2.5, "00000000000000000000000000000004.0.5"):
            cp = new_checkpoint({"a": good}, {"a": good})
            cfg = await driver.put(make_config(f"t-{good}"), cp, {}, {"a": good})
            assert (await driver.get(cfg)).checkpoint["channel_values"] == {"a": good}

    async def test_writes_must_be_a_sequence_of_pairs(self, driver: Driver) -> None:
        cfg = await Line(driver, "t").step({"a": 1})
        not_writes: Any
        for not_writes in (5, None, object()):
            with pytest.raises(ConfigError, match="sequence of \\(channel, value\\) pairs"):
                await driver.put_writes(cfg, not_writes, "task")
        pairs: Any = (pair for pair in [("x", 1), ("y", 2)])  # any iterable of pairs
        await driver.put_writes(cfg, pairs, "task")
        assert (await driver.get(cfg)).pending_writes == [("task", "x", 1), ("task", "y", 2)]

    async def test_bad_checkpoints_are_config_errors(self, driver: Driver) -> None:
        no_id: Any = new_checkpoint({"a": 1}, {"a": "1"})
        del no_id["id"]
        with pytest.raises(ConfigError, match="id"):
            await driver.put(make_config("t"), no_id, {}, {"a": "1"})
        mismatch = new_checkpoint({"a": 1}, {"a": "1"})
        with pytest.raises(ConfigError, match="'a'"):
            await driver.put(make_config("t"), mismatch, {}, {"a": "2"})
        not_a_mapping: Any = ["id"]
        with pytest.raises(ConfigError):
            await driver.put(make_config("t"), not_a_mapping, {}, {})
        with pytest.raises(ConfigError):
            await driver.put(make_config("t"), new_checkpoint({}, {}), "meta", {})
        assert await driver.list(None) == []

    async def test_config_errors_are_tether_and_value_errors(self, driver: Driver) -> None:
        with pytest.raises(TetherError) as info:
            await driver.get_tuple({"configurable": {}})
        assert isinstance(info.value, ConfigError)
        assert isinstance(info.value, ValueError)

    # --- serializer --------------------------------------------------------------

    async def test_rich_values_round_trip(self, driver: Driver) -> None:
        values: dict[str, Any] = {
            "when": datetime(2024, 2, 29, 12, 30, 15, 123456, tzinfo=UTC),
            "naive": datetime(2020, 1, 1, 0, 0),
            "day": date(1999, 12, 31),
            "span": timedelta(days=2, microseconds=5),
            "uuid": UUID("12345678-1234-5678-1234-567812345678"),
            "set": {"a", "b"},
            "frozen": frozenset({1, 2}),
            "pair": (1, "x"),
            "dec": Decimal("1.10"),
            "raw": b"\x00\xff",
            "huge": 10**30,
            "float": 0.1,
            "none": None,
            "empty": "",
            "nested": {"list": [1, {"d": date(2020, 1, 1)}, {UUID(int=1)}]},
        }
        line = Line(driver, "t")
        cfg = await line.step(values)
        await driver.put_writes(cfg, [("w", {"at": values["when"], "id": values["uuid"]})], "task")
        tup = await driver.get(cfg)
        got = tup.checkpoint["channel_values"]
        assert got == values
        for key, value in values.items():
            assert type(got[key]) is type(value), key
        assert got["when"].tzinfo is not None
        assert tup.pending_writes == [("task", "w", {"at": values["when"], "id": values["uuid"]})]

    async def test_dataclass_needs_the_allowlist(self, driver: Driver) -> None:
        record = ContractRecord("r", datetime(2024, 1, 1, tzinfo=UTC), frozenset({"x"}))
        allowed = driver.using(driver.saver.with_allowlist([RECORD_TYPE]))
        cfg = await Line(allowed, "t").step({"record": record, "list": [record]})
        await allowed.put_writes(cfg, [("w", record)], "task")
        tup = await allowed.get(cfg)
        assert tup.checkpoint["channel_values"] == {"record": record, "list": [record]}
        assert type(tup.checkpoint["channel_values"]["record"]) is ContractRecord
        assert tup.pending_writes == [("task", "w", record)]
        # The clone shares storage; the strict original refuses to build the type.
        assert await allowed.ids(None) == [cid(cfg)]
        with pytest.raises(DecodeError, match="ContractRecord"):
            await driver.get_tuple(cfg)

    # --- versions and forks (S2.5) -------------------------------------------------

    async def test_get_next_version_increases(self, driver: Driver) -> None:
        saver = driver.saver
        v1 = saver.get_next_version(None, None)
        v2 = saver.get_next_version(v1, None)
        v3 = saver.get_next_version(v2, None)
        assert str(v1) < str(v2) < str(v3)
        assert saver.get_next_version(v1, None) != v2  # forks get distinct versions

    async def test_two_branches_forked_from_one_checkpoint(self, driver: Driver) -> None:
        main = Line(driver, "t")
        await main.step({"shared": "base", "messages": ["m0"]})
        await main.step({"messages": ["m0", "m1"]})
        fork_point = main.configs[0]
        left, right = main.fork(fork_point), main.fork(fork_point)
        await left.step({"messages": ["m0", "left"]})
        await right.step({"messages": ["m0", "right"]})
        await left.step({"messages": ["m0", "left", "left-2"]})
        await right.step({"shared": "right-changed"})
        # Each branch computed the same next major version; their values stay apart.
        assert (await driver.get(left.configs[0])).checkpoint["channel_values"] == {
            "shared": "base",
            "messages": ["m0", "left"],
        }
        assert (await driver.get(right.configs[0])).checkpoint["channel_values"] == {
            "shared": "base",
            "messages": ["m0", "right"],
        }
        assert (await driver.get(left.configs[1])).checkpoint["channel_values"] == {
            "shared": "base",
            "messages": ["m0", "left", "left-2"],
        }
        assert (await driver.get(right.configs[1])).checkpoint["channel_values"] == {
            "shared": "right-changed",
            "messages": ["m0", "right"],
        }
        for line in (main, left, right):
            await line.check()
        for first in (left.configs[0], right.configs[0]):
            assert (await driver.get(first)).parent_config == fork_point
        latest = await driver.get(make_config("t"))
        assert cid(latest.config) == right.ids[-1]

    # --- concurrency ------------------------------------------------------------------

    async def test_concurrent_writers(self, driver: Driver) -> None:
        """8 threads (sync) or 8 tasks (async) writing at once lose nothing."""
        n = 10
        names = [f"w{i}" for i in range(8)]
        if driver.mode == "sync":
            results: dict[str, list[str]] = {}
            errors: list[BaseException] = []

            def run(name: str) -> None:
                try:
                    results[name] = _thread_worker(driver.saver, name, n)
                except BaseException as exc:  # reported below, in the test's thread
                    errors.append(exc)

            threads = [threading.Thread(target=run, args=(name,)) for name in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
        else:
            done = await asyncio.gather(*(_task_worker(driver.saver, name, n) for name in names))
            results = dict(zip(names, done, strict=True))
        for name in names:
            ids = results[name]
            got = await driver.list(make_config(name))
            assert [cid(t.config) for t in got] == ids[::-1]
            for i, tup in enumerate(reversed(got)):
                assert tup.checkpoint["channel_values"] == {"i": [i, name]}
                assert tup.pending_writes == [("task", "w", i)]
                assert tup.metadata == {"step": i, "worker": name}
        assert len(await driver.list(None)) == 8 * n

    # --- the reference model ----------------------------------------------------------

    @settings(
        max_examples=MODEL_EXAMPLES,
        deadline=None,
        # One saver serves every example; each program uses fresh thread names.
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(program=programs())
    async def test_matches_a_reference_model(self, driver: Driver, program: list[Op]) -> None:
        """Random put/write/delete/copy/prune programs leave what a plain model predicts."""
        await run_program(driver, program)

"""``get_delta_channel_history`` answered by the storage (#19).

LangGraph's default walks ``get_tuple`` once per ancestor; tether's backends
walk the parent links in one statement (the in-memory saver: its dicts). The
answer must be the default's over the same saver, for every checkpoint of a
thread (every namespace, forks, a checkpoint at a snapshot, a channel never
written), the same as the official saver's for the same graph, and one
statement. A cut chain or a damaged row is an error, not a short value.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import END, START, StateGraph

from tether.backends._payload import BlobCodec
from tether.backends._records import (
    WriteRecord,
)
from tether.backends._walk import (
    Ancestor,
    walk_delta,
)
from tether.checkpoint import Address
from tether.errors import DecodeError, StorageError
from tether.langgraph import InMemorySaver, PostgresSaver, SqliteSaver, TetherLangGraphSaver

from .savers import BACKENDS, fresh_schema
from .test_delta_channel import delta_graph, turn_input
from .test_graphs import MODES, Runner, official, tether_saver

# What is asked: both delta channels, one, and a mix with a plain channel and a
# channel the graph never wrote (every backend answers it "start empty").
ASKS = [["items", "messages"], ["messages"], ["never", "items", "turns"]]

PERSISTENT = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


async def histories(saver: BaseCheckpointSaver[Any], mode: str, thread: str) -> list[Any]:
    """Per checkpoint of the thread, for each ask: the saver's answer (on tether, checked
    against LangGraph's default walk over the same saver). Namespaces in the order they
    began, each newest first (the official savers list namespaces in different orders)."""
    config = {"configurable": {"thread_id": thread}}
    if mode == "async":
        tuples = [t async for t in saver.alist(config)]
    else:
        tuples = await asyncio.to_thread(lambda: list(saver.list(config)))
    spaces: dict[str, list[Any]] = {}
    for tup in sorted(tuples, key=lambda t: t.config["configurable"]["checkpoint_id"]):
        spaces.setdefault(tup.config["configurable"]["checkpoint_ns"], []).insert(0, tup)
    out = []
    for position, (ns, members) in enumerate(spaces.items()):
        for tup in members:
            for ask in ASKS:
                if mode == "async":
                    got = await saver.aget_delta_channel_history(config=tup.config, channels=ask)
                else:
                    got = await asyncio.to_thread(
                        saver.get_delta_channel_history, config=tup.config, channels=ask
                    )
                if isinstance(saver, TetherLangGraphSaver):
                    default = await asyncio.to_thread(
                        BaseCheckpointSaver.get_delta_channel_history,
                        saver,
                        config=tup.config,
                        channels=ask,
                    )
                    assert got == default, (tup.config, ask)
                out.append((position, bool(ns), ask, _plain(got)))
    return out


def _plain(got: Mapping[str, Any]) -> dict[str, Any]:
    """Without task ids, which differ between two runs of a graph (they hash the checkpoint id)."""
    return {
        channel: {**entry, "writes": [(ch, value) for _, ch, value in entry["writes"]]}
        for channel, entry in got.items()
    }


# --- a graph with forks, and one with a subgraph ---------------------------------------------


async def forked_thread(r: Runner) -> None:
    graph = delta_graph(r)
    for i in range(7):
        await r.invoke(graph, turn_input(i))
    history = await r.history(graph)
    await r.invoke(graph, turn_input(100), history[6].config)  # new input at a past checkpoint
    fork = await r.update(graph, history[9].config, {"items": ["edited"]})
    await r.invoke(graph, None, fork)
    await r.invoke(graph, turn_input(200))


def concat(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for write in writes for item in write)]


class Inner(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(concat, snapshot_frequency=2)]


class Outer(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(concat, snapshot_frequency=2)]
    log: Annotated[list[str], operator.add]


def nested_graph(r: Runner) -> Any:
    inner = StateGraph(Inner)
    inner.add_node("inner_a", lambda s: {"items": [f"a{len(s.get('items', []))}"]})
    inner.add_node("inner_b", lambda s: {"items": [f"b{len(s.get('items', []))}"]})
    inner.add_edge(START, "inner_a")
    inner.add_edge("inner_a", "inner_b")
    inner.add_edge("inner_b", END)
    outer = StateGraph(Outer)
    outer.add_node("child", inner.compile())
    outer.add_node("after", lambda s: {"log": [str(len(s.get("items", [])))], "items": ["x"]})
    outer.add_edge(START, "child")
    outer.add_edge("child", "after")
    outer.add_edge("after", END)
    return r.compile(outer)


async def nested_thread(r: Runner) -> None:
    graph = nested_graph(r)
    for i in range(4):
        await r.invoke(graph, {"items": [f"in{i}"], "log": []})


SCENARIOS = {"forks": forked_thread, "subgraph": nested_thread}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("backend", BACKENDS)
async def test_same_as_the_default_walk_and_the_official_saver(
    backend: str, scenario: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    thread = f"h-{scenario}-{uuid.uuid4().hex[:8]}"
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        await SCENARIOS[scenario](Runner(saver, mode, "sync", thread))
        ours = await histories(saver, mode, thread)
        tuples = [t async for t in saver.alist({"configurable": {"thread_id": thread}})]
    async with official(backend, mode, tmp_path, request) as reference:
        await SCENARIOS[scenario](Runner(reference, mode, "sync", thread))
        theirs = await histories(reference, mode, thread)
    assert ours == theirs
    # what the comparison covered
    values = [t.checkpoint["channel_values"] for t in tuples]
    assert any(isinstance(v.get("items"), _DeltaSnapshot) for v in values)  # at a snapshot
    assert any("items" not in v for v in values)  # rebuilt from writes
    assert any(entry["writes"] and "seed" in entry for *_, got in ours for entry in got.values())
    assert all("seed" not in got["never"] and not got["never"]["writes"] for *_, got in ours[2::3])
    if scenario == "subgraph":
        assert any(in_ns for _, in_ns, _, _ in ours)
    else:
        assert len(
            {(t.parent_config or {}).get("configurable", {}).get("checkpoint_id") for t in tuples}
        ) < len(tuples)  # fmt: skip  (a fork: a parent of two)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_checkpoint_and_no_channel(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        r = Runner(saver, mode, "sync", "t")
        await r.invoke(delta_graph(r), turn_input(0))
        for config in (
            {"configurable": {"thread_id": "nobody"}},
            {"configurable": {"thread_id": "t", "checkpoint_id": "1f0-not-there"}},
        ):
            assert await saver.aget_delta_channel_history(config=config, channels=["items"]) == {
                "items": {"writes": []}
            }
        latest = {"configurable": {"thread_id": "t"}}  # no id: the latest checkpoint
        assert await saver.aget_delta_channel_history(config=latest, channels=[]) == {}
        got = await saver.aget_delta_channel_history(config=latest, channels=["items", "items"])
        head = await saver.aget_tuple(latest)
        assert head is not None
        assert got == await BaseCheckpointSaver.aget_delta_channel_history(
            saver, config=head.config, channels=["items"]
        )


# --- one statement -------------------------------------------------------------------------


def _sqlite_counted(tmp_path: Path) -> tuple[TetherLangGraphSaver, list[str]]:
    conn = sqlite3.connect(tmp_path / "counted.db", check_same_thread=False, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return SqliteSaver(conn), statements


class _CountingCursor(psycopg.Cursor[Any]):
    log: list[str] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        type(self).log.append(str(query))
        return super().execute(query, params, **kwargs)


@pytest.fixture
def counted(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[TetherLangGraphSaver, list[str]]]:
    if request.param == "sqlite":
        saver, statements = _sqlite_counted(tmp_path)
        yield saver, statements
        saver.close()
        return
    dsn = request.getfixturevalue("pg_dsn")
    log: list[str] = []
    cursor = type("Cursor", (_CountingCursor,), {"log": log})
    with psycopg.connect(dsn, autocommit=True, cursor_factory=cursor) as conn:
        pg = PostgresSaver(conn, schema=fresh_schema())
        pg.setup()
        yield pg, log


def _queries(statements: list[str]) -> list[str]:
    return [s for s in statements if s.split()[0].upper() not in ("BEGIN", "COMMIT")]


@pytest.mark.parametrize("counted", PERSISTENT, indirect=True)
def test_one_statement_per_call(counted: tuple[TetherLangGraphSaver, list[str]]) -> None:
    saver, statements = counted
    r = Runner(saver, "sync", "sync", "t")
    graph = delta_graph(r)
    for i in range(4):
        graph.invoke(turn_input(i), r.config())
    walks = 0
    for tup in saver.list(r.config()):
        statements.clear()
        got = saver.get_delta_channel_history(config=tup.config, channels=["items", "messages"])
        assert len(_queries(statements)) == 1
        walked = sum(len(entry["writes"]) for entry in got.values())
        if walked:
            walks += 1
            statements.clear()
            BaseCheckpointSaver.get_delta_channel_history(
                saver, config=tup.config, channels=["items", "messages"]
            )
            assert len(_queries(statements)) > 1  # the default: a get_tuple per ancestor
    assert walks > 3


# --- damage ----------------------------------------------------------------------------------


async def _walking_head(r: Runner) -> tuple[dict[str, Any], list[str]]:
    """Invoke until the latest checkpoint rebuilds a delta channel from writes and a seed;
    its config and the channel."""
    graph = delta_graph(r)
    for i in range(12):
        await r.invoke(graph, turn_input(i))
        head = await r.checkpointer.aget_tuple(r.config())
        assert head is not None
        for channel in ("items", "messages"):
            if channel not in head.checkpoint["channel_values"]:
                got = await r.checkpointer.aget_delta_channel_history(
                    config=head.config, channels=[channel]
                )
                if "seed" in got[channel] and got[channel]["writes"]:
                    return head.config, [channel]
    pytest.fail("no checkpoint rebuilt a delta channel from a seed")  # pragma: no cover


@pytest.mark.parametrize("backend", PERSISTENT)
async def test_a_lost_seed_is_an_error(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with tether_saver(backend, "async", tmp_path, request) as saver:
        config, walked = await _walking_head(Runner(saver, "async", "sync", "lost"))
        # the snapshot rows: the values the walk would start from
        if backend == "sqlite":
            with sqlite3.connect(tmp_path / "lg.db") as conn:
                conn.execute(
                    "DELETE FROM tether_blobs WHERE type <> 'empty' AND channel = ?", (walked[0],)
                )
        else:
            schema = saver.saver._statements.schema  # type: ignore[attr-defined]
            dsn = request.getfixturevalue("pg_dsn")
            with psycopg.connect(dsn, autocommit=True) as pg:
                pg.execute(
                    f'DELETE FROM "{schema}".tether_blobs '  # type: ignore[arg-type]
                    "WHERE type <> 'empty' AND channel = %s",
                    (walked[0],),
                )
        with pytest.raises(StorageError, match="missing") as info:
            await saver.aget_delta_channel_history(config=config, channels=walked)
        assert repr(walked[0]) in str(info.value)
        assert "'lost'" in str(info.value)


async def test_an_undecodable_write_names_its_channel() -> None:
    async with InMemorySaver() as saver:
        config, walked = await _walking_head(Runner(saver, "async", "sync", "bad"))
        ns = saver.saver._threads["bad"][""]  # type: ignore[attr-defined]
        # the nearest ancestor with a write to a walked channel
        parent = ns.checkpoints[config["configurable"]["checkpoint_id"]].parent_id
        while not any(w.channel in walked for w in ns.writes.get(parent, {}).values()):
            parent = ns.checkpoints[parent].parent_id
        bucket = ns.writes[parent]
        key, write = next((k, w) for k, w in bucket.items() if w.channel in walked)
        # well framed (checksum and all), but not MessagePack
        bucket[key] = WriteRecord(
            write.task_id, write.task_path, write.idx, write.channel,
            *BlobCodec().encode_bytes("msgpack", b"\xc1"),
        )  # fmt: skip
        with pytest.raises(DecodeError) as info:
            await saver.aget_delta_channel_history(config=config, channels=walked)
        assert info.value.context["channel"] == write.channel
        assert info.value.context["checkpoint_id"] == parent
        assert info.value.context["thread_id"] == "bad"


# --- the walk itself, on made-up records ------------------------------------------------------


def _write(channel: str, task: str, path: str = "", idx: int = 0) -> WriteRecord:
    return WriteRecord(task, path, idx, channel, "msgpack", 0, b"")


def _chain(*records: Ancestor) -> Mapping[str, Ancestor]:
    return {a.checkpoint_id: a for a in records}


VALUE = ("msgpack", 0, b"", None)
EMPTY = ("empty", 0, None, None)


def _walk(
    chain: Mapping[str, Ancestor], channels: list[str], parent: str | None = "04"
) -> dict[str, list[tuple[str, str]]]:
    stored = {("a", "1"): VALUE, ("a", "2"): EMPTY, ("b", "1"): VALUE}
    walk = walk_delta(
        Address("t", "", "05"), parent, channels, chain.get, lambda c, v: stored.get((c, v))
    )
    out = {
        c: [(at.checkpoint_id or "", w.task_id) for at, w in ws] for c, ws in walk.writes.items()
    }
    out["seeds"] = [(c, at.checkpoint_id or "") for c, (at, _) in walk.seeds.items()]
    return out


def test_walk_order_seeds_and_the_seed_writes() -> None:
    chain = _chain(
        Ancestor("01", None, {"a": "1", "b": "1"}, {}, (), [_write("a", "t1")]),
        Ancestor("02", "01", {"a": "2"}, {}, (), [_write("a", "t2"), _write("b", "t2")]),
        Ancestor("03", "02", {"a": "1"}, {}, (), [_write("a", "t3")]),
        Ancestor(
            "04", "03", {"a": "2"}, {}, (),
            [_write("a", "z", "0"), _write("a", "y", "1"), _write("a", "x", "1", 1)],
        ),
    )  # fmt: skip
    got = _walk(chain, ["a", "b"])
    # a: seeded at 03 (its writes included); b: no value until 01, past 02's
    assert got["a"] == [("03", "t3"), ("04", "z"), ("04", "y"), ("04", "x")]
    assert got["b"] == [("02", "t2")]
    assert got["seeds"] == [("a", "03"), ("b", "01")]
    # a seed kept inline in the head (Postgres) counts as a value
    inline = {**chain, "04": Ancestor("04", "03", {"a": "2"}, {"a": 7}, (), [])}
    assert _walk(inline, ["a"])["seeds"] == [("a", "04")]


def test_walk_stops_at_a_loop_and_a_root() -> None:
    looped = _chain(
        Ancestor("03", "04", {"a": "2"}, {}, (), [_write("a", "t3")]),
        Ancestor("04", "03", {"a": "2"}, {}, (), [_write("a", "t4")]),
    )
    got = _walk(looped, ["a"])
    assert got["a"] == [("03", "t3"), ("04", "t4")]
    assert got["seeds"] == []
    assert _walk(looped, ["a"], parent=None) == {"a": [], "seeds": []}


def test_walk_refuses_a_cut_chain_and_a_lost_value() -> None:
    with pytest.raises(StorageError, match="'03' of thread 't', the parent of checkpoint '04'"):
        _walk(_chain(Ancestor("04", "03", {}, {}, (), [])), ["a"])
    lost = _chain(Ancestor("04", None, {"a": "9"}, {}, (), []))
    with pytest.raises(
        StorageError, match="checkpoint '04', channel 'a' at version '9' is missing"
    ):
        _walk(lost, ["a"])
    # recorded as never stored by its put, or a record from before that was recorded: absent
    for unstored in (["a"], None):
        ok = _chain(Ancestor("04", None, {"a": "9"}, {}, unstored, []))
        assert _walk(ok, ["a"]) == {"a": [], "seeds": []}


# --- names a JSON path cannot spell, values kept inline (SQLite) --------------------------


@pytest.mark.parametrize("names", [["plain", "n"], ['q"uote', "é", "back\\slash", "sp ace"]])
def test_inline_seeds_under_any_channel_name(tmp_path: Path, names: list[str]) -> None:
    """SQLite keeps small values inline in the head; the walk finds them as seeds whatever
    the channel's name (a path for most names, json_each for the others)."""
    from langgraph.checkpoint.base import empty_checkpoint

    with SqliteSaver.from_conn_string(str(tmp_path / "odd.db")) as saver:
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        checkpoint: Any = empty_checkpoint()
        for step in range(6):
            checkpoint = empty_checkpoint() | {  # a new id, the values and versions so far
                "channel_values": dict(checkpoint["channel_values"]),
                "channel_versions": dict(checkpoint["channel_versions"]),
            }
            new = {}
            if step in (0, 3):  # a stored (inline) value, then writes on later steps
                for name in names:
                    version = saver.get_next_version(checkpoint["channel_versions"].get(name), None)
                    checkpoint["channel_values"][name] = step
                    checkpoint["channel_versions"][name] = version
                    new[name] = version
            config = saver.put(config, checkpoint, {"source": "loop", "step": step}, new)
            saver.put_writes(config, [(name, f"w{step}") for name in names], f"task-{step}")
        tuples = list(saver.list({"configurable": {"thread_id": "t"}}))
        assert len(tuples) == 6
        for tup in tuples:
            got = saver.get_delta_channel_history(config=tup.config, channels=names)
            default = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=tup.config, channels=names
            )
            assert got == default, tup.config
        latest = saver.get_delta_channel_history(config=tuples[0].config, channels=names)
        assert all(latest[name].get("seed") == 3 for name in names), latest

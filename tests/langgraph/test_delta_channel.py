"""LangGraph's ``DeltaChannel`` (beta) on tether's drop-in savers.

A ``DeltaChannel`` stores its value only every ``snapshot_frequency`` updates,
as a ``_DeltaSnapshot`` in ``channel_values``; in between, LangGraph rebuilds
it from the writes stored on the checkpoint's ancestors
(``get_delta_channel_history``). The graphs here run on each tether backend
and on LangGraph's official saver of the same kind, sync and async, in every
durability mode; the traces (returns, state histories, which checkpoints
hold a snapshot) must be equal.

Thread operations: ``prune`` keeps the ancestors a kept checkpoint rebuilds
from, ``delete_for_runs`` refuses to cut such a chain, ``copy_thread``
copies everything (see ``tether._delta_chains``).
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from tether._delta_chains import ThreadChains
from tether.checkpoint import CheckpointTuple
from tether.errors import ConfigError, StorageError
from tether.langgraph import TetherLangGraphSaver
from tether.lifecycle import Retention

from .savers import BACKENDS
from .test_graphs import (
    DURABILITIES,
    MODES,
    Runner,
    chain,
    official,
    tether_saver,
    trace_history,
)

INVOKES = 10


# --- the graph ----------------------------------------------------------------------------


def concat(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    """Batching-invariant, as DeltaChannel requires: one fold over all writes."""
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


def add_messages_batch(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    return functools.reduce(add_messages, writes, state)  # type: ignore[arg-type]


class DeltaState(TypedDict, total=False):
    items: Annotated[list[str], DeltaChannel(concat, snapshot_frequency=3)]
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch, snapshot_frequency=3)]
    turns: int


def delta_graph(r: Runner) -> Any:
    """bot answers (messages, items, turns), then tally appends to items only:
    the two delta channels reach their snapshot cadence at different steps."""

    def bot(state: DeltaState) -> DeltaState:
        turn = state.get("turns", 0)
        last = state["messages"][-1].content if state.get("messages") else "-"
        return {
            "messages": [AIMessage(f"echo {last}", id=f"ai-{turn}")],
            "items": [f"bot{turn}"],
            "turns": turn + 1,
        }

    def tally(state: DeltaState) -> DeltaState:
        return {"items": [f"tally{len(state.get('items', []))}"]}

    builder = StateGraph(DeltaState)
    builder.add_node("bot", bot)
    builder.add_node("tally", tally)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", "tally")
    builder.add_edge("tally", END)
    return r.compile(builder)


def turn_input(i: int) -> DeltaState:
    return {"messages": [HumanMessage(f"hi {i}", id=f"h-{i}")], "items": [f"in{i}"]}


async def stored_kinds(r: Runner) -> list[dict[str, str]]:
    """Per checkpoint (newest first), how each delta channel is stored: the saver's view."""
    config = r.config()
    if r.mode == "async":
        tuples = [t async for t in r.checkpointer.alist(config)]
    else:
        tuples = await asyncio.to_thread(lambda: list(r.checkpointer.list(config)))
    out = []
    for tup in tuples:
        values = tup.checkpoint["channel_values"]
        out.append({k: type(values[k]).__name__ for k in ("items", "messages") if k in values})
    return out


# --- scenarios ------------------------------------------------------------------------------


async def scenario_invokes(r: Runner) -> dict[str, Any]:
    """Ten turns; state and history must be what the official saver gives."""
    graph = delta_graph(r)
    outs = [await r.invoke(graph, turn_input(i)) for i in range(INVOKES)]
    state = await r.state(graph)
    assert len(state.values["items"]) == 3 * INVOKES
    assert len(state.values["messages"]) == 2 * INVOKES
    stored = await stored_kinds(r)
    assert any("_DeltaSnapshot" in kinds.values() for kinds in stored)
    return {
        "outs": outs,
        "state": state.values,
        "history": trace_history(await r.history(graph)),
        "stored": stored,
    }


async def scenario_time_travel(r: Runner) -> dict[str, Any]:
    """New input at past checkpoints (forks), a replay from the middle of a run, and
    update_state at a past checkpoint."""
    graph = delta_graph(r)
    for i in range(6):
        await r.invoke(graph, turn_input(i))
    history = await r.history(graph)
    # in exit mode only the final checkpoint of each invoke exists: clamp
    past = history[min(7, len(history) - 1)]
    older = history[min(11, len(history) - 1)]
    mid_run = [s for s in history if s.next == ("tally",)]
    forked_past = await r.invoke(graph, turn_input(100), past.config)
    forked_older = await r.invoke(graph, turn_input(101), older.config)
    resumed = await r.invoke(graph, None, mid_run[-1].config) if mid_run else None
    fork = await r.update(graph, history[min(4, len(history) - 1)].config, {"items": ["edited"]})
    edited = await r.invoke(graph, None, fork)
    after = await r.invoke(graph, turn_input(200))
    return {
        "past": past.values,
        "forked_past": forked_past,
        "forked_older": forked_older,
        "resumed": resumed,
        "edited": edited,
        "after": after,
        "history": trace_history(await r.history(graph)),
        "stored": await stored_kinds(r),
    }


SCENARIOS = {"invokes": scenario_invokes, "time_travel": scenario_time_travel}


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("backend", BACKENDS)
async def test_same_as_official(
    backend: str,
    scenario: str,
    mode: str,
    durability: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    thread = f"delta-{scenario}-{uuid.uuid4().hex[:8]}"
    run = SCENARIOS[scenario]
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        ours = await run(Runner(saver, mode, durability, thread))
    async with official(backend, mode, tmp_path, request) as reference:
        theirs = await run(Runner(reference, mode, durability, thread))
    assert ours["history"], "the scenario left no history"
    if backend == "sqlite":
        # LangGraph's SqliteSaver stores channel_values as given, so a checkpoint
        # that did not update a snapshotted channel stores nothing for it. Its
        # InMemorySaver and PostgresSaver, like tether, keep a value per channel
        # version, and such a checkpoint reads the snapshot of that version. The
        # values read back are the same; what is stored must be InMemorySaver's.
        async with official("memory", mode, tmp_path, request) as memory:
            by_version = await run(Runner(memory, mode, durability, thread))
        assert ours["stored"] == by_version["stored"]
        ours, theirs = {**ours, "stored": None}, {**theirs, "stored": None}
    assert ours == theirs


# --- thread operations ----------------------------------------------------------------------


class Ops:
    """A saver's thread operations, called the sync way (in a worker thread) or the async way."""

    def __init__(self, saver: TetherLangGraphSaver, mode: str) -> None:
        self.saver = saver
        self.mode = mode

    async def prune(self, threads: list[str], **kw: Any) -> None:
        if self.mode == "async":
            await self.saver.aprune(threads, **kw)
        else:
            await asyncio.to_thread(lambda: self.saver.prune(threads, **kw))

    async def delete_for_runs(self, runs: list[str]) -> None:
        if self.mode == "async":
            await self.saver.adelete_for_runs(runs)
        else:
            await asyncio.to_thread(self.saver.delete_for_runs, runs)

    async def copy_thread(self, src: str, dst: str) -> None:
        if self.mode == "async":
            await self.saver.acopy_thread(src, dst)
        else:
            await asyncio.to_thread(self.saver.copy_thread, src, dst)

    async def count(self, thread: str) -> int:
        return len([t async for t in self.saver.alist({"configurable": {"thread_id": thread}})])


async def until_head_walks(r: Runner, graph: Any, first: int) -> None:
    """Invoke until the latest checkpoint stores some delta channel as nothing (not a
    snapshot): reading it then needs the ancestors."""
    for i in range(first, first + 6):
        await r.invoke(graph, turn_input(i))
        if len((await stored_kinds(r))[0]) < 2:
            return
    pytest.fail("every invoke ended on a snapshot")  # pragma: no cover


def _values_by_id(history: Sequence[Any]) -> dict[str, Any]:
    return {s.config["configurable"]["checkpoint_id"]: s.values for s in history}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_naive_prune_would_lose_delta_values(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Why the drop-in checks: tether's own prune (which knows no graphs) cuts the
    chain. LangGraph's default walk would then read the channels back short without
    an error; tether's walk names the missing checkpoint and the channels."""
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        r = Runner(saver, mode, "sync", "naive")
        graph = delta_graph(r)
        await until_head_walks(r, graph, 0)
        head = await saver.aget_tuple(r.config())
        assert head is not None
        walked = [k for k in ("items", "messages") if k not in head.checkpoint["channel_values"]]
        await saver.saver.aprune(["naive"], strategy="keep_latest")
        with pytest.raises(StorageError, match="is missing") as info:
            await r.state(graph)
        assert "'naive'" in str(info.value)
        assert all(repr(k) in str(info.value) for k in walked)
        # LangGraph's own walk over the same saver: short, and no error
        short = await BaseCheckpointSaver.aget_delta_channel_history(
            saver, config=head.config, channels=walked
        )
        assert all("seed" not in short[k] for k in walked)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_prune_keeps_what_delta_channels_need(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        ops = Ops(saver, mode)
        r = Runner(saver, mode, "sync", "t-delta")
        graph = delta_graph(r)
        for i in range(INVOKES):
            await r.invoke(graph, turn_input(i))
        # a fork from a recent checkpoint: its branch rebuilds from there too
        history = await r.history(graph)
        fork = await r.update(graph, history[5].config, {"items": ["forked"]})
        await r.invoke(graph, None, fork)
        await until_head_walks(r, graph, 50)
        # a thread without delta channels, pruned in the same call
        plain = Runner(saver, mode, "sync", "t-plain")
        plain_graph = chain(plain)
        for _ in range(3):
            await plain.invoke(plain_graph, {"x": 0, "log": ["in"]})

        full = _values_by_id(await r.history(graph))
        latest = (await r.state(graph)).values
        total = await ops.count("t-delta")

        await ops.prune(["t-delta", "t-plain"], strategy="keep_latest")
        kept = await ops.count("t-delta")
        assert 1 < kept < total, (kept, total)
        assert await ops.count("t-plain") == 1  # pruned as asked
        assert (await r.state(graph)).values == latest
        # every checkpoint that is left still reads as before
        left = _values_by_id(await r.history(graph))
        assert len(left) == kept
        assert all(full[cid] == values for cid, values in left.items())

        # the thread goes on as if nothing happened
        out = await r.invoke(graph, turn_input(90))
        turn, size = latest["turns"], len(latest["items"])
        assert out["items"] == [*latest["items"], "in90", f"bot{turn}", f"tally{size + 2}"]
        assert len(out["messages"]) == len(latest["messages"]) + 2

        # keep_last: the newest N, and what they need
        full = _values_by_id(await r.history(graph))
        await ops.prune(["t-delta"], strategy="keep_last", keep=2)
        left = _values_by_id(await r.history(graph))
        assert len(left) >= 2
        assert all(full[cid] == values for cid, values in left.items())

        await ops.prune(["t-delta"], strategy="delete")
        assert await ops.count("t-delta") == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_sweep_keeps_what_delta_channels_need(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """keep_last through the drop-in's sweep (#15): as its prune, the kept checkpoints
    keep the ancestors they rebuild DeltaChannel values from."""
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        r = Runner(saver, mode, "sync", "t-sweep")
        graph = delta_graph(r)
        for i in range(INVOKES):
            await r.invoke(graph, turn_input(i))
        await until_head_walks(r, graph, 50)
        full = _values_by_id(await r.history(graph))
        latest = (await r.state(graph)).values
        saver.retention = Retention(keep_last=1)
        later = datetime.now(UTC) + timedelta(hours=1)
        if mode == "async":
            report = await saver.asweep(now=later)
        else:
            report = await asyncio.to_thread(lambda: saver.sweep(now=later))
        left = _values_by_id(await r.history(graph))
        assert report.pruned_threads == 1
        assert report.checkpoints == len(full) - len(left)
        assert 1 < len(left) < len(full)
        assert all(full[cid] == values for cid, values in left.items())
        assert (await r.state(graph)).values == latest


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_prune_of_a_snapshot_head_keeps_one(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """When the latest checkpoint stores every delta channel, it needs no ancestor."""
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        ops = Ops(saver, mode)
        r = Runner(saver, mode, "sync", "snap")
        graph = delta_graph(r)
        for i in range(INVOKES):
            await r.invoke(graph, turn_input(i))
            head = (await stored_kinds(r))[0]
            if head == {"items": "_DeltaSnapshot", "messages": "_DeltaSnapshot"}:
                break
        else:  # pragma: no cover
            pytest.fail("no invoke ended on a snapshot of both channels")
        values = (await r.state(graph)).values
        await ops.prune(["snap"], strategy="keep_latest")
        assert await ops.count("snap") == 1
        assert (await r.state(graph)).values == values


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_copy_thread_rebuilds_the_same_values(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        ops = Ops(saver, mode)
        src = Runner(saver, mode, "sync", "src")
        graph = delta_graph(src)
        for i in range(INVOKES):
            await src.invoke(graph, turn_input(i))
        await ops.copy_thread("src", "dst")
        dst = Runner(saver, mode, "sync", "dst")
        assert trace_history(await dst.history(graph)) == trace_history(await src.history(graph))
        assert await src.invoke(graph, turn_input(99)) == await dst.invoke(graph, turn_input(99))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_delete_for_runs_refuses_to_cut_delta_history(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        ops = Ops(saver, mode)
        r = Runner(saver, mode, "sync", "runs")
        graph = delta_graph(r)
        runs = [str(uuid.uuid4()) for _ in range(4)]
        states = []
        for i, run in enumerate(runs):
            await r.invoke(graph, turn_input(i), {**r.config(), "metadata": {"run_id": run}})
            states.append((await r.state(graph)).values)
        total = await ops.count("runs")

        # an early run: later checkpoints rebuild their delta channels from its writes
        with pytest.raises(ConfigError, match="DeltaChannel") as info:
            await ops.delete_for_runs([runs[1]])
        assert "'runs'" in str(info.value)
        assert runs[1] in str(info.value)
        assert "nothing was deleted" in str(info.value)
        assert await ops.count("runs") == total
        assert (await r.state(graph)).values == states[-1]

        # the latest run: nothing that stays depends on it (LangGraph's rollback)
        await ops.delete_for_runs([runs[-1]])
        assert await ops.count("runs") < total
        assert (await r.state(graph)).values == states[-2]

        # the rest, all at once: nothing is left to depend on them
        await ops.delete_for_runs(runs[:-1])
        assert await ops.count("runs") == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_delete_for_runs_without_delta_channels_is_unchanged(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with tether_saver(backend, mode, tmp_path, request) as saver:
        ops = Ops(saver, mode)
        r = Runner(saver, mode, "sync", "plain-runs")
        graph = chain(r)
        runs = [str(uuid.uuid4()) for _ in range(3)]
        for run in runs:
            await r.invoke(
                graph, {"x": 0, "log": ["in"]}, {**r.config(), "metadata": {"run_id": run}}
            )
        total = await ops.count("plain-runs")
        await ops.delete_for_runs([runs[1]])
        assert 0 < await ops.count("plain-runs") < total


# --- the chain arithmetic, on made-up threads -------------------------------------------------


def _tup(
    cid: str,
    parent: str | None,
    *,
    ns: str = "",
    stores: tuple[str, ...] = (),
    walks: tuple[str, ...] = (),
    unwritten: tuple[str, ...] = (),
    run: str | None = None,
) -> CheckpointTuple:
    """A checkpoint that stores a value for ``stores`` and rebuilds ``walks`` by walking;
    ``unwritten`` delta channels have counters but no version (nothing to rebuild)."""

    def conf(checkpoint_id: str) -> dict[str, Any]:
        return {
            "configurable": {"thread_id": "t", "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
        }

    metadata: dict[str, Any] = {"step": 0}
    if walks or unwritten:
        metadata["counters_since_delta_snapshot"] = {k: [1, 1] for k in (*walks, *unwritten)}
    if run is not None:
        metadata["run_id"] = run
    checkpoint: Any = {
        "channel_values": {k: _DeltaSnapshot([k]) for k in stores},
        "channel_versions": {k: "1" for k in (*stores, *walks)},
    }
    return CheckpointTuple(conf(cid), checkpoint, metadata, conf(parent) if parent else None)


def test_chains_walk_back_to_the_seed_of_every_channel() -> None:
    chains = ThreadChains(
        [
            _tup("01", None, stores=("a", "b")),
            _tup("02", "01", walks=("a", "b")),
            _tup("03", "02", stores=("a",), walks=("b",)),
            _tup("04", "03", walks=("a", "b")),
            _tup("05", "04", walks=("a",)),
        ]
    )
    assert chains.walk("", "05") == ["04", "03"]  # the seed's own writes are read too
    assert chains.walk("", "04") == ["03", "02", "01"]  # b has no value before 01
    assert chains.walk("", "01") == []
    # 05 needs 04 and 03; keeping 04 then needs 02 and 01: everything
    assert chains.keep_count(1) == 5


def test_chains_keep_no_more_than_needed() -> None:
    chains = ThreadChains(
        [
            _tup("01", None, stores=("a",)),
            _tup("02", "01", walks=("a",)),
            _tup("03", "02", stores=("a",)),
            _tup("04", "03", walks=("a",)),
            _tup("05", "04", walks=("a",)),
            _tup("06", "05", unwritten=("x",)),
        ]
    )
    assert chains.keep_count(1) == 1
    assert chains.keep_count(2) == 4  # 05 reads 04 and 03
    assert chains.keep_count(5) == 6


def test_chains_a_kept_fork_leaf_grows_the_count() -> None:
    """keep_last keeps the newest N by id, whatever branch they are on: each kept one's
    walk counts, so a newer leaf of an older fork keeps its own ancestors too."""

    def thread(fork_parent: str) -> ThreadChains:
        return ThreadChains(
            [
                _tup("01", None, stores=("a",)),
                _tup("02", "01", walks=("a",)),
                _tup("03", "02", stores=("a",)),
                _tup("04", "03", walks=("a",)),
                _tup("05", fork_parent, walks=("a",)),  # a fork
                _tup("06", "04", walks=("a",)),
            ]
        )

    assert thread("03").walk("", "06") == ["04", "03"]
    assert thread("03").keep_count(1) == 4  # 06, 05, 04, 03
    # 06 needs down to 03; that keeps 05 too, which needs 02 and 01
    assert thread("02").keep_count(1) == 6


def test_chains_one_count_for_every_namespace() -> None:
    chains = ThreadChains(
        [
            _tup("01", None, stores=("a",)),
            _tup("02", "01", walks=("a",)),
            _tup("03", "02", walks=("a",)),
            _tup("11", None, ns="child", stores=("a",)),
            _tup("12", "11", ns="child"),
            _tup("13", "12", ns="child", walks=("a",)),
            _tup("14", "13", ns="child"),
        ]
    )
    # "" needs all 3; at 3, "child" keeps 14, 13, 12, and 13 walks back to 11
    assert chains.keep_count(1) == 4


def test_chains_stop_at_a_missing_parent() -> None:
    chains = ThreadChains([_tup("05", "04", walks=("a",)), _tup("06", "05", walks=("a",))])
    assert chains.walk("", "06") == ["05"]
    assert chains.keep_count(1) == 2


def test_chains_without_delta_channels_keep_as_asked() -> None:
    chains = ThreadChains([_tup("01", None), _tup("02", "01"), _tup("03", "02")])
    assert not chains.uses_delta
    assert chains.keep_count(1) == 1
    assert chains.delete_conflicts({"r1"}) == []


def test_chains_delete_conflicts() -> None:
    chains = ThreadChains(
        [
            _tup("01", None, stores=("a",), run="r1"),
            _tup("02", "01", walks=("a",), run="r1"),
            _tup("03", "02", walks=("a",), run="r2"),
            _tup("04", "03", stores=("a",), run="r3"),
            _tup("05", "04", walks=("a",), run="r4"),
        ]
    )
    assert chains.delete_conflicts({"r1"}) == [("", "03", "02", "r1")]
    assert chains.delete_conflicts({"r1", "r2"}) == []  # 04 stores its own value
    assert chains.delete_conflicts({"r3"}) == [("", "05", "04", "r3")]
    assert chains.delete_conflicts({"r4"}) == []

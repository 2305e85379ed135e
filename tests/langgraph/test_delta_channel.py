"""LangGraph's ``DeltaChannel`` (beta) on tether's drop-in savers.

A ``DeltaChannel`` stores its value only every ``snapshot_frequency`` updates,
as a ``_DeltaSnapshot`` in ``channel_values``; in between, LangGraph rebuilds
it from the writes stored on the checkpoint's ancestors
(``get_delta_channel_history``). The graphs here run on each tether backend
and on LangGraph's official saver of the same kind, sync and async, in every
durability mode; the traces (returns, state histories, which checkpoints
hold a snapshot) must be equal.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from lg_savers import BACKENDS
from test_graphs import (
    DURABILITIES,
    MODES,
    Runner,
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

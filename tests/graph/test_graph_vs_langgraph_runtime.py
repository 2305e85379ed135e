"""Checkpoints written by tether's runtime are LangGraph's, and the other way round.

The same graph is built twice, with ``tether.graph`` and with LangGraph, over
one tether saver (LangGraph sees it through ``tether.langgraph``). A thread
stopped by one runtime (``interrupt_before``) is read and finished by the
other: same channel names, versions, ``versions_seen`` and metadata.
"""

from __future__ import annotations

import operator
from types import ModuleType
from typing import Annotated, Any, TypedDict

import pytest

import tether
import tether.graph as tether_graph

lg_graph = pytest.importorskip("langgraph.graph")
from tether.langgraph import TetherLangGraphSaver  # noqa: E402


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def build(mod: ModuleType, saver: Any, **kwargs: Any) -> Any:
    g = mod.StateGraph(State)
    for name in "abc":
        g.add_node(name, lambda s, name=name: {"items": [name]})
    g.add_edge(mod.START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    return g.compile(checkpointer=saver, **kwargs)


CFG = {"configurable": {"thread_id": "t"}}


def test_langgraph_continues_a_thread_tether_started() -> None:
    saver = tether.InMemorySaver()
    ours = build(tether_graph, saver, interrupt_before=["b"])
    theirs = build(lg_graph, TetherLangGraphSaver(saver))
    assert ours.invoke({"items": ["in"]}, CFG) == {"items": ["in", "a"]}
    state = theirs.get_state(CFG)
    assert state.values == {"items": ["in", "a"]}
    assert state.next == ("b",)
    assert state.metadata["source"] == "loop"
    assert state.metadata["step"] == 1
    assert theirs.invoke(None, CFG) == {"items": ["in", "a", "b", "c"]}
    steps = [(s.metadata["source"], s.metadata["step"]) for s in ours.get_state_history(CFG)]
    assert steps == [("loop", 3), ("loop", 2), ("loop", 1), ("loop", 0), ("input", -1)]


def test_tether_continues_a_thread_langgraph_started() -> None:
    saver = tether.InMemorySaver()
    theirs = build(lg_graph, TetherLangGraphSaver(saver), interrupt_before=["b"])
    ours = build(tether_graph, saver)
    assert theirs.invoke({"items": ["in"]}, CFG) == {"items": ["in", "a"]}
    state = ours.get_state(CFG)
    assert state.values == {"items": ["in", "a"]}
    assert state.next == ("b",)
    assert ours.invoke(None, CFG) == {"items": ["in", "a", "b", "c"]}
    lg_state = theirs.get_state(CFG)
    assert lg_state.values == {"items": ["in", "a", "b", "c"]}
    assert lg_state.next == ()

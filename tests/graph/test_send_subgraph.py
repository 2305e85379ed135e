"""Send fan-out, subgraphs (S6.5) and the compile-time allowlist (S3.4)."""

from __future__ import annotations

import enum
import operator
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest

import tether
from tether.checkpoint import ns_split
from tether.errors import DecodeError
from tether.graph import END, START, Command, Send, StateGraph, interrupt


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class MapState(TypedDict):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]


def map_reduce(runs: Counter[str], fail: set[str] | None = None) -> StateGraph:
    def fan_out(state: MapState) -> list[Send]:
        return [Send("joke", {"subject": s}) for s in state["subjects"]]

    def joke(arg: dict[str, str]) -> dict[str, Any]:
        runs[arg["subject"]] += 1
        if fail and arg["subject"] in fail:
            raise RuntimeError(f"no joke about {arg['subject']}")
        return {"jokes": [f"joke about {arg['subject']}"]}

    g = StateGraph(MapState)
    g.add_node("plan", lambda s: {})
    g.add_node("joke", joke)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan_out)
    g.add_edge("joke", END)
    return g


def test_send_fans_out_one_task_per_packet() -> None:
    runs: Counter[str] = Counter()
    app = map_reduce(runs).compile(checkpointer=tether.InMemorySaver())
    out = app.invoke({"subjects": ["cats", "dogs", "owls"], "jokes": []}, cfg())
    # writes are applied in packet order whatever order the tasks finished in
    assert out["jokes"] == ["joke about cats", "joke about dogs", "joke about owls"]
    assert runs == {"cats": 1, "dogs": 1, "owls": 1}


def test_sends_survive_a_failure_and_only_the_failed_packet_reruns() -> None:
    runs: Counter[str] = Counter()
    fail = {"dogs"}
    app = map_reduce(runs, fail).compile(checkpointer=tether.InMemorySaver())
    with pytest.raises(RuntimeError, match="no joke about dogs"):
        app.invoke({"subjects": ["cats", "dogs", "owls"], "jokes": []}, cfg())
    state = app.get_state(cfg())
    assert [t.path for t in state.tasks] == [("push", 0), ("push", 1), ("push", 2)]
    assert state.next == ("joke",)
    fail.clear()
    out = app.invoke(None, cfg())
    assert len(out["jokes"]) == 3
    assert runs == {"cats": 1, "dogs": 2, "owls": 1}


async def test_async_send() -> None:
    app = map_reduce(Counter()).compile(checkpointer=tether.InMemorySaver())
    out = await app.ainvoke({"subjects": ["a", "b"], "jokes": []}, cfg())
    assert out["jokes"] == ["joke about a", "joke about b"]


def test_command_goto_send() -> None:
    g = StateGraph(MapState)
    g.add_node("go", lambda s: Command(goto=[Send("echo", x) for x in s["subjects"]]))
    g.add_node("echo", lambda x: {"jokes": [x]})
    g.add_edge(START, "go")
    assert g.compile().invoke({"subjects": ["p", "q"], "jokes": []})["jokes"] == ["p", "q"]


# --- subgraphs ------------------------------------------------------------------------


class Inner(TypedDict):
    items: Annotated[list[str], operator.add]
    answer: str


class Outer(TypedDict):
    items: Annotated[list[str], operator.add]


def inner_graph(runs: Counter[str], ask: bool = False) -> Any:
    def step1(state: Inner) -> dict[str, Any]:
        runs["inner1"] += 1
        return {"items": ["inner1"]}

    def step2(state: Inner) -> dict[str, Any]:
        runs["inner2"] += 1
        answer = interrupt("inner question") if ask else "none"
        return {"items": [f"inner2:{answer}"], "answer": answer}

    g = StateGraph(Inner)
    g.add_node("step1", step1)
    g.add_node("step2", step2)
    g.add_edge(START, "step1")
    g.add_edge("step1", "step2")
    return g.compile()


def outer_graph(runs: Counter[str], ask: bool = False, saver: Any = None) -> Any:
    def before(state: Outer) -> dict[str, Any]:
        runs["before"] += 1
        return {"items": ["before"]}

    def after(state: Outer) -> dict[str, Any]:
        runs["after"] += 1
        return {"items": ["after"]}

    g = StateGraph(Outer)
    g.add_node("before", before)
    g.add_node("sub", inner_graph(runs, ask))
    g.add_node("after", after)
    g.add_edge(START, "before")
    g.add_edge("before", "sub")
    g.add_edge("sub", "after")
    return g.compile(checkpointer=saver or tether.InMemorySaver())


def test_subgraph_keeps_its_own_checkpoints_under_its_namespace() -> None:
    saver = tether.InMemorySaver()
    app = outer_graph(Counter(), saver=saver)
    out = app.invoke({"items": []}, cfg())
    # the subgraph's output keys that the parent has are merged (operator.add appends)
    assert out["items"] == ["before", "before", "inner1", "inner2:none", "after"]
    root = list(saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}))
    everything = list(saver.list(cfg()))
    sub = [c for c in everything if c.config["configurable"]["checkpoint_ns"]]
    assert sub
    namespaces = {c.config["configurable"]["checkpoint_ns"] for c in sub}
    [ns] = namespaces
    [(node, _task_id)] = ns_split(ns)
    assert node == "sub"
    assert [c.metadata["step"] for c in sub] == [2, 1, 0, -1]
    # parents link every subgraph checkpoint to the parent checkpoint that ran it
    root_ids = {c.checkpoint["id"] for c in root}
    for c in sub:
        assert set(c.metadata["parents"]) == {""}
        assert c.metadata["parents"][""] in root_ids


def test_interrupt_inside_subgraph_resumes() -> None:
    runs: Counter[str] = Counter()
    app = outer_graph(runs, ask=True)
    out = app.invoke({"items": []}, cfg())
    [pending] = out["__interrupt__"]
    assert pending.value == "inner question"
    state = app.get_state(cfg(), subgraphs=True)
    assert state.next == ("sub",)
    assert state.interrupts == (pending,)
    [task] = state.tasks
    assert task.state is not None
    assert not isinstance(task.state, dict)
    assert task.state.values == {"items": ["before", "inner1"]}
    assert task.state.next == ("step2",)
    # without subgraphs=True the task points at the subgraph's config
    plain = app.get_state(cfg()).tasks[0].state
    assert isinstance(plain, dict)
    assert plain["configurable"]["checkpoint_ns"].startswith("sub:")

    out = app.invoke(Command(resume="42"), cfg())
    assert "__interrupt__" not in out
    assert out["items"] == ["before", "before", "inner1", "inner2:42", "after"]
    assert runs == {"before": 1, "inner1": 1, "inner2": 2, "after": 1}


async def test_async_interrupt_inside_subgraph_resumes() -> None:
    runs: Counter[str] = Counter()
    app = outer_graph(runs, ask=True)
    out = await app.ainvoke({"items": []}, cfg())
    assert out["__interrupt__"][0].value == "inner question"
    state = await app.aget_state(cfg(), subgraphs=True)
    assert state.tasks[0].state.next == ("step2",)  # type: ignore[union-attr]
    out = await app.ainvoke(Command(resume="7"), cfg())
    assert out["items"][-2:] == ["inner2:7", "after"]
    assert runs == {"before": 1, "inner1": 1, "inner2": 2, "after": 1}


def test_subgraph_called_from_a_node_function() -> None:
    runs: Counter[str] = Counter()
    inner = inner_graph(runs)

    def call(state: Outer) -> dict[str, Any]:
        result = inner.invoke({"items": []})
        return {"items": result["items"]}

    g = StateGraph(Outer)
    g.add_node("call", call)
    g.add_edge(START, "call")
    saver = tether.InMemorySaver()
    out = g.compile(checkpointer=saver).invoke({"items": []}, cfg())
    assert out["items"] == ["inner1", "inner2:none"]
    assert any(c.config["configurable"]["checkpoint_ns"] for c in saver.list(cfg()))


def test_subgraph_without_parent_checkpointer_runs_in_memory() -> None:
    g = StateGraph(Outer)
    g.add_node("sub", inner_graph(Counter()))
    g.add_edge(START, "sub")
    assert g.compile().invoke({"items": []})["items"] == ["inner1", "inner2:none"]


# --- allowlist ---------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Item:
    name: str
    color: Color


class Shop(TypedDict):
    items: Annotated[list[Item], operator.add]


def shop_graph(saver: tether.BaseCheckpointSaver) -> Any:
    g = StateGraph(Shop)
    g.add_node("add", lambda s: {"items": [Item("pen", Color.BLUE)]})
    g.add_edge(START, "add")
    return g.compile(checkpointer=saver)


def test_compile_allowlists_the_state_types() -> None:
    saver = tether.InMemorySaver()
    app = shop_graph(saver)
    app.invoke({"items": [Item("cup", Color.RED)]}, cfg())
    assert app.get_state(cfg()).values == {
        "items": [Item("cup", Color.RED), Item("pen", Color.BLUE)]
    }
    # the caller's saver is left strict: the allowlist lives on the graph's copy
    with pytest.raises(DecodeError, match="not in the allowlist"):
        saver.get_tuple(cfg())


def test_subgraph_state_types_are_allowlisted_by_the_parent() -> None:
    g = StateGraph(Outer)
    inner = StateGraph(Shop)
    inner.add_node("add", lambda s: {"items": [Item("pen", Color.BLUE)]})
    inner.add_edge(START, "add")
    g.add_node("sub", inner.compile())
    g.add_edge(START, "sub")
    app = g.compile(checkpointer=tether.InMemorySaver())
    app.invoke({"items": []}, cfg())
    subs = [
        c
        for c in app.checkpointer.list(cfg())  # type: ignore[union-attr]
        if c.config["configurable"]["checkpoint_ns"]
    ]
    assert subs[0].checkpoint["channel_values"]["items"] == [Item("pen", Color.BLUE)]


def test_rerun_from_before_a_subgraph_runs_the_subgraph_again() -> None:
    runs: Counter[str] = Counter()
    app = outer_graph(runs)
    app.invoke({"items": []}, cfg())
    [before_sub] = [s for s in app.get_state_history(cfg()) if s.next == ("sub",)]
    out = app.invoke(None, before_sub.config)
    assert out["items"] == ["before", "before", "inner1", "inner2:none", "after"]
    assert runs == {"before": 1, "inner1": 2, "inner2": 2, "after": 2}


def test_get_state_and_history_of_a_subgraph_namespace() -> None:
    app = outer_graph(Counter(), ask=True)
    app.invoke({"items": []}, cfg())
    sub_config = app.get_state(cfg()).tasks[0].state
    assert isinstance(sub_config, dict)
    inner = app.get_state(sub_config)
    assert inner.next == ("step2",)
    assert inner.values == {"items": ["before", "inner1"]}
    steps = [s.metadata["step"] for s in app.get_state_history(sub_config)]
    assert steps == [1, 0, -1]


def _langgraph_outer(ask: bool) -> Any:
    """The outer/inner graphs above, built on LangGraph itself with its InMemorySaver."""
    from langgraph.checkpoint.memory import InMemorySaver as LangGraphMemory
    from langgraph.graph import START as LG_START
    from langgraph.graph import StateGraph as LangGraphStateGraph
    from langgraph.types import interrupt as lg_interrupt

    def step1(state: Inner) -> dict[str, Any]:
        return {"items": ["inner1"]}

    def step2(state: Inner) -> dict[str, Any]:
        answer = lg_interrupt("inner question") if ask else "none"
        return {"items": [f"inner2:{answer}"], "answer": answer}

    inner = LangGraphStateGraph(Inner)
    inner.add_node("step1", step1)
    inner.add_node("step2", step2)
    inner.add_edge(LG_START, "step1")
    inner.add_edge("step1", "step2")
    outer = LangGraphStateGraph(Outer)
    outer.add_node("before", lambda state: {"items": ["before"]})
    outer.add_node("sub", inner.compile())
    outer.add_node("after", lambda state: {"items": ["after"]})
    outer.add_edge(LG_START, "before")
    outer.add_edge("before", "sub")
    outer.add_edge("sub", "after")
    return outer.compile(checkpointer=LangGraphMemory())


def _history_shape(snapshots: Any) -> list[tuple[Any, ...]]:
    return [
        (
            s.metadata["step"],
            s.metadata["source"],
            s.next,
            s.config["configurable"]["checkpoint_ns"],
        )
        for s in snapshots
    ]


@pytest.mark.parametrize("ask", [True, False])
async def test_history_of_a_graph_holds_its_own_namespace_only_as_in_langgraph(ask: bool) -> None:
    """#13.5: get_state_history(config) listed the subgraph's checkpoints (namespace
    sub:<task>) among the parent's, each decoded as the parent's state."""
    ours, theirs = outer_graph(Counter(), ask=ask), _langgraph_outer(ask)
    for app in (ours, theirs):
        app.invoke({"items": []}, cfg())
    want = _history_shape(theirs.get_state_history(cfg()))
    assert {ns for *_, ns in want} == {""}
    assert _history_shape(ours.get_state_history(cfg())) == want
    assert _history_shape([s async for s in ours.aget_state_history(cfg())]) == want
    if ask:  # the subgraph's own history, by its namespace
        sub_ours = ours.get_state(cfg()).tasks[0].state
        sub_theirs = theirs.get_state(cfg()).tasks[0].state
        shape = [s[:3] for s in _history_shape(theirs.get_state_history(sub_theirs))]
        assert [s[:3] for s in _history_shape(ours.get_state_history(sub_ours))] == shape

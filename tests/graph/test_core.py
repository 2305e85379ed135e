"""The graph API and the loop: schemas, reducers, edges, streams, versions, checkpoints."""

from __future__ import annotations

import asyncio
import itertools
import operator
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import pydantic
import pytest

import tether
from tether.checkpoint import CHECKPOINT_VERSION
from tether.errors import ConfigError, TetherError
from tether.graph import (
    END,
    START,
    Command,
    GraphRecursionError,
    StateGraph,
    add_messages,
)


class ListState(TypedDict):
    items: Annotated[list[str], operator.add]
    last: str


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def chain(saver: tether.BaseCheckpointSaver | None = None) -> Any:
    g = StateGraph(ListState)
    g.add_node("a", lambda s: {"items": ["a"], "last": "a"})
    g.add_node("b", lambda s: {"items": ["b"], "last": "b"})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=saver)


def test_invoke_without_checkpointer() -> None:
    assert chain().invoke({"items": ["in"]}) == {"items": ["in", "a", "b"], "last": "b"}


def test_checkpoints_have_langgraph_shape() -> None:
    saver = tether.InMemorySaver()
    app = chain(saver)
    app.invoke({"items": []}, cfg())
    history = list(saver.list(cfg()))
    assert [(h.metadata["source"], h.metadata["step"]) for h in history] == [
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    for h in history:
        cp = h.checkpoint
        assert cp["v"] == CHECKPOINT_VERSION
        assert h.metadata["parents"] == {}
        # versions come from the saver: padded "major.random" strings
        assert all(isinstance(v, str) and "." in v for v in cp["channel_versions"].values())
    # each checkpoint's parent is the one before it
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert newer.parent_config["configurable"]["checkpoint_id"] == older.checkpoint["id"]
    assert history[-1].checkpoint["channel_values"] == {"__start__": {"items": []}}
    last = history[0].checkpoint
    assert last["channel_values"] == {"items": ["a", "b"], "last": "b"}
    # versions_seen: every node saw its trigger's version
    assert set(last["versions_seen"]) == {"__start__", "a", "b"}
    assert last["updated_channels"] == ["items", "last"]
    assert history[1].checkpoint["updated_channels"] == ["branch:to:b", "items", "last"]


def test_second_invoke_continues_thread() -> None:
    app = chain(tether.InMemorySaver())
    app.invoke({"items": ["x"]}, cfg())
    out = app.invoke({"items": ["y"]}, cfg())
    assert out["items"] == ["x", "a", "b", "y", "a", "b"]


@dataclass
class DataState:
    count: int = 0
    log: Annotated[list[str], operator.add] = field(default_factory=list)


class ModelState(pydantic.BaseModel):
    count: int = 0
    log: Annotated[list[str], operator.add] = []


@pytest.mark.parametrize("schema", [DataState, ModelState])
def test_dataclass_and_pydantic_state(schema: Any) -> None:
    seen: list[Any] = []

    def inc(state: Any) -> dict[str, Any]:
        seen.append(state)
        return {"count": state.count + 1, "log": [f"inc{state.count}"]}

    g = StateGraph(schema)
    g.add_node("inc", inc)
    g.add_edge(START, "inc")
    g.add_conditional_edges("inc", lambda s: "inc" if s.count < 3 else END)
    app = g.compile(checkpointer=tether.InMemorySaver())
    out = app.invoke({"count": 0}, cfg())
    assert out == {"count": 3, "log": ["inc0", "inc1", "inc2"]}
    assert all(isinstance(s, schema) for s in seen)
    # the state schema survives the strict serializer without configuration
    assert app.get_state(cfg()).values == out


def test_add_messages_appends_and_replaces_by_id() -> None:
    assert add_messages([{"id": "1", "content": "a"}], [{"id": "2", "content": "b"}]) == [
        {"id": "1", "content": "a"},
        {"id": "2", "content": "b"},
    ]
    merged = add_messages(
        [{"id": "1", "content": "a"}, {"id": "2", "content": "b"}],
        {"id": "1", "content": "A"},
    )
    assert merged == [{"id": "1", "content": "A"}, {"id": "2", "content": "b"}]
    fresh = add_messages([], ["hello", ("assistant", "hi")])
    assert [m["content"] for m in fresh] == ["hello", "hi"]
    assert all(m["id"] for m in fresh)

    class Chat(TypedDict):
        messages: Annotated[list[Any], add_messages]

    g = StateGraph(Chat)
    g.add_node("bot", lambda s: {"messages": [{"role": "ai", "content": "pong", "id": "r"}]})
    g.add_node("edit", lambda s: {"messages": [{"role": "ai", "content": "PONG", "id": "r"}]})
    g.add_edge(START, "bot")
    g.add_edge("bot", "edit")
    app = g.compile(checkpointer=tether.InMemorySaver())
    out = app.invoke({"messages": ["ping"]}, cfg())
    assert [m["content"] for m in out["messages"]] == ["ping", "PONG"]


def test_conditional_edges_with_path_map() -> None:
    g = StateGraph(ListState)
    g.add_node("router", lambda s: {"last": "router"})
    g.add_node("left", lambda s: {"items": ["left"]})
    g.add_node("right", lambda s: {"items": ["right"]})
    g.add_edge(START, "router")
    g.add_conditional_edges(
        "router",
        lambda s: "go_right" if "r" in s["items"] else "go_left",
        {"go_left": "left", "go_right": "right"},
    )
    app = g.compile()
    assert app.invoke({"items": ["r"]})["items"] == ["r", "right"]
    assert app.invoke({"items": []})["items"] == ["left"]


def test_command_goto_and_update() -> None:
    g = StateGraph(ListState)
    g.add_node("a", lambda s: Command(update={"items": ["a"]}, goto="c"))
    g.add_node("b", lambda s: {"items": ["b"]})
    g.add_node("c", lambda s: {"items": ["c"]})
    g.add_edge(START, "a")
    assert g.compile().invoke({"items": []})["items"] == ["a", "c"]


def test_parallel_writes_applied_in_path_order_not_finish_order() -> None:
    threads: set[int] = set()
    barrier = threading.Barrier(3, timeout=10)

    def node(name: str) -> Any:
        def run(state: ListState) -> dict[str, Any]:
            threads.add(threading.get_ident())
            barrier.wait()  # all three run at once, on three threads
            time.sleep(random.random() / 100)
            return {"items": [name]}

        return run

    g = StateGraph(ListState)
    for name in ("c", "a", "b"):
        g.add_node(name, node(name))
        g.add_edge(START, name)
    app = g.compile()
    for _ in range(5):
        barrier.reset()
        assert app.invoke({"items": []})["items"] == ["a", "b", "c"]
    assert len(threads) >= 3


async def test_async_parallel_nodes_run_concurrently() -> None:
    started: list[str] = []
    gate = asyncio.Event()

    def node(name: str) -> Any:
        async def run(state: ListState) -> dict[str, Any]:
            started.append(name)
            if len(started) == 3:
                gate.set()
            await asyncio.wait_for(gate.wait(), 10)  # deadlocks unless all run at once
            return {"items": [name]}

        return run

    g = StateGraph(ListState)
    for name in ("b", "c", "a"):
        g.add_node(name, node(name))
        g.add_edge(START, name)
    app = g.compile(checkpointer=tether.InMemorySaver())
    out = await app.ainvoke({"items": []}, cfg())
    assert out["items"] == ["a", "b", "c"]
    assert (await app.aget_state(cfg())).values == out


def test_two_writes_to_a_plain_key_in_one_step_is_an_error() -> None:
    g = StateGraph(ListState)
    g.add_node("a", lambda s: {"last": "a"})
    g.add_node("b", lambda s: {"last": "b"})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    with pytest.raises(ConfigError, match="'last' received 2 writes"):
        g.compile().invoke({"items": []})


def test_stream_values_and_updates() -> None:
    app = chain(tether.InMemorySaver())
    values = list(app.stream({"items": []}, cfg("v"), stream_mode="values"))
    assert values == [
        {"items": []},
        {"items": ["a"], "last": "a"},
        {"items": ["a", "b"], "last": "b"},
    ]
    updates = list(app.stream({"items": []}, cfg("u"), stream_mode="updates"))
    assert updates == [{"a": {"items": ["a"], "last": "a"}}, {"b": {"items": ["b"], "last": "b"}}]
    both = list(app.stream({"items": []}, cfg("b"), stream_mode=["updates", "values"]))
    assert [m for m, _ in both] == ["values", "updates", "values", "updates", "values"]


async def test_astream_matches_stream() -> None:
    app = chain(tether.InMemorySaver())
    chunks = [c async for c in app.astream({"items": []}, cfg(), stream_mode="updates")]
    assert chunks == list(app.stream({"items": []}, cfg("sync"), stream_mode="updates"))


def test_recursion_limit_raises_a_tether_error() -> None:
    g = StateGraph(ListState)
    g.add_node("loop", lambda s: {"items": ["x"]})
    g.add_edge(START, "loop")
    g.add_edge("loop", "loop")
    app = g.compile(checkpointer=tether.InMemorySaver())
    with pytest.raises(GraphRecursionError, match="recursion limit of 5") as info:
        app.invoke({"items": []}, {**cfg(), "recursion_limit": 5})
    assert isinstance(info.value, TetherError)
    # 5 supersteps: the START step and four runs of "loop" (as in LangGraph)
    assert len(app.get_state(cfg()).values["items"]) == 4


def test_checkpointer_needs_a_thread_id() -> None:
    with pytest.raises(ConfigError, match="thread_id"):
        chain(tether.InMemorySaver()).invoke({"items": []})


def test_unknown_state_key_is_reported() -> None:
    g = StateGraph(ListState)
    g.add_node("a", lambda s: {"nope": 1})
    g.add_edge(START, "a")
    with pytest.raises(ConfigError, match="unknown state key 'nope'"):
        g.compile().invoke({"items": []})


def test_only_triggered_nodes_run() -> None:
    runs: list[str] = []

    def node(name: str) -> Any:
        def run(state: ListState) -> dict[str, Any]:
            runs.append(name)
            return {"items": [name]}

        return run

    g = StateGraph(ListState)
    for name in "abc":
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.compile().invoke({"items": []})
    assert runs == ["a", "b"]  # c has no edge: its trigger never gets a version


def test_waiting_edge_runs_the_target_once_after_all_sources() -> None:
    runs: list[str] = []

    def node(name: str) -> Any:
        def run(state: ListState) -> dict[str, Any]:
            runs.append(name)
            return {"items": [name]}

        return run

    g = StateGraph(ListState)
    for name in ("a", "b", "b2", "join"):
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("b", "b2")  # one branch is a step longer than the other
    g.add_edge(["a", "b2"], "join")
    app = g.compile(checkpointer=tether.InMemorySaver())
    out = app.invoke({"items": []}, cfg())
    assert out["items"] == ["a", "b", "b2", "join"]
    assert runs.count("join") == 1
    # the half-full barrier is stored in the checkpoint between the two steps
    step1 = next(s for s in app.get_state_history(cfg()) if s.metadata["step"] == 1)
    tup = app.checkpointer.get_tuple(step1.config)  # type: ignore[union-attr]
    assert tup.checkpoint["channel_values"]["join:a+b2:join"] == ["a"]


async def test_node_may_take_the_config() -> None:
    seen: list[dict[str, Any]] = []

    def node(state: ListState, config: dict[str, Any]) -> dict[str, Any]:
        seen.append(config["configurable"])
        return {"items": [config["configurable"]["user"]]}

    g = StateGraph(ListState)
    g.add_node("a", node)
    g.add_edge(START, "a")
    app = g.compile(checkpointer=tether.InMemorySaver())
    conf = {"configurable": {"thread_id": "c", "user": "ann"}}
    assert app.invoke({"items": []}, conf)["items"] == ["ann"]
    assert (await app.ainvoke({"items": []}, conf))["items"] == ["ann", "ann"]
    assert seen[0]["thread_id"] == "c"
    assert seen[0]["node"] == "a"
    assert seen[0]["checkpoint_ns"].startswith("a:")


def test_routing_to_an_unknown_node_is_reported() -> None:
    g = StateGraph(ListState)
    g.add_node("a", lambda s: {"items": ["a"]})
    g.add_edge(START, "a")
    g.add_conditional_edges("a", lambda s: "nowhere")
    with pytest.raises(ConfigError, match="routed to unknown node 'nowhere'"):
        g.compile().invoke({"items": []})

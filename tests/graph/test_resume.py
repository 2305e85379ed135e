"""Resume (S6.1) and human in the loop (S6.2): ERROR writes, retries, interrupts."""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

import tether
from tether.checkpoint import ERROR, INTERRUPT, RESUME
from tether.errors import ConfigError
from tether.graph import (
    END,
    START,
    Command,
    Interrupt,
    RetryPolicy,
    StateGraph,
    interrupt,
)


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture(params=["sync", "async"])
def durability(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def parallel(runs: Counter[str], fail: set[str]) -> StateGraph:
    def node(name: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            runs[name] += 1
            if name in fail:
                raise RuntimeError(f"{name} failed")
            return {"items": [name]}

        return run

    g = StateGraph(State)
    for name in ("a", "b", "c"):
        g.add_node(name, node(name))
        g.add_edge(START, name)
    g.add_node("after", node("after"))
    g.add_edge("a", "after")
    return g


def test_error_is_stored_and_only_the_failed_task_runs_again(durability: str) -> None:
    runs: Counter[str] = Counter()
    fail = {"b"}
    saver = tether.InMemorySaver()
    app = parallel(runs, fail).compile(checkpointer=saver)
    with pytest.raises(RuntimeError, match="b failed"):
        app.invoke({"items": []}, cfg(), durability=durability)
    tup = saver.get_tuple(cfg())
    assert tup is not None
    errors = [(ch, v) for _, ch, v in tup.pending_writes or [] if ch == ERROR]
    assert errors == [(ERROR, {"type": "RuntimeError", "message": "b failed"})]
    state = app.get_state(cfg())
    assert state.next == ("b",)
    assert [t.error for t in state.tasks if t.name == "b"] == ["b failed"]

    fail.clear()
    out = app.invoke(None, cfg(), durability=durability)
    assert out["items"] == ["a", "b", "c", "after"]
    assert runs == {"a": 1, "b": 2, "c": 1, "after": 1}


async def test_async_error_then_retry_only_failed() -> None:
    runs: Counter[str] = Counter()
    fail = {"c"}
    app = parallel(runs, fail).compile(checkpointer=tether.InMemorySaver())
    with pytest.raises(RuntimeError, match="c failed"):
        await app.ainvoke({"items": []}, cfg())
    fail.clear()
    assert (await app.ainvoke(None, cfg()))["items"] == ["a", "b", "c", "after"]
    assert runs == {"a": 1, "b": 1, "c": 2, "after": 1}


def test_first_error_in_path_order_is_raised() -> None:
    runs: Counter[str] = Counter()
    app = parallel(runs, {"c", "b"}).compile(checkpointer=tether.InMemorySaver())
    with pytest.raises(RuntimeError, match="b failed"):
        app.invoke({"items": []}, cfg())


def test_retry_policy_reruns_within_the_step() -> None:
    attempts: list[int] = []

    def flaky(state: State) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("flaky")
        return {"items": ["ok"]}

    g = StateGraph(State)
    g.add_node("a", flaky, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0))
    g.add_edge(START, "a")
    app = g.compile(checkpointer=tether.InMemorySaver())
    assert app.invoke({"items": []}, cfg())["items"] == ["ok"]
    assert len(attempts) == 3


def test_retry_policy_gives_up_and_respects_retry_on() -> None:
    attempts: list[str] = []

    def bad(state: State) -> dict[str, Any]:
        attempts.append("x")
        raise ValueError("not retryable")

    g = StateGraph(State)
    g.add_node("a", bad, retry_policy=RetryPolicy(initial_interval=0, retry_on=ConnectionError))
    g.add_edge(START, "a")
    with pytest.raises(ValueError, match="not retryable"):
        g.compile().invoke({"items": []})
    assert attempts == ["x"]


# --- interrupts --------------------------------------------------------------------


def approval_graph(runs: Counter[str]) -> StateGraph:
    def draft(state: State) -> dict[str, Any]:
        runs["draft"] += 1
        return {"items": ["draft"]}

    def approve(state: State) -> dict[str, Any]:
        runs["approve"] += 1
        answer = interrupt({"question": "ship it?"})
        return {"items": [f"approved:{answer}"]}

    g = StateGraph(State)
    g.add_node("draft", draft)
    g.add_node("approve", approve)
    g.add_edge(START, "draft")
    g.add_edge("draft", "approve")
    g.add_edge("approve", END)
    return g


def test_interrupt_stops_and_command_resumes(durability: str) -> None:
    runs: Counter[str] = Counter()
    saver = tether.InMemorySaver()
    app = approval_graph(runs).compile(checkpointer=saver)
    out = app.invoke({"items": []}, cfg(), durability=durability)
    assert out["items"] == ["draft"]
    [pending] = out["__interrupt__"]
    assert isinstance(pending, Interrupt)
    assert pending.value == {"question": "ship it?"}
    state = app.get_state(cfg())
    assert state.next == ("approve",)
    assert state.interrupts == (pending,)
    stored = [ch for _, ch, _ in saver.get_tuple(cfg()).pending_writes or []]
    assert stored == [INTERRUPT]

    out = app.invoke(Command(resume="yes"), cfg(), durability=durability)
    assert out == {"items": ["draft", "approved:yes"]}
    assert runs == {"draft": 1, "approve": 2}
    assert app.get_state(cfg()).next == ()


async def test_async_interrupt_and_resume() -> None:
    runs: Counter[str] = Counter()
    app = approval_graph(runs).compile(checkpointer=tether.InMemorySaver())
    out = await app.ainvoke({"items": []}, cfg())
    assert out["__interrupt__"][0].value == {"question": "ship it?"}
    out = await app.ainvoke(Command(resume="ok"), cfg())
    assert out == {"items": ["draft", "approved:ok"]}


def test_two_interrupts_in_one_node_resume_in_order() -> None:
    def ask(state: State) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"items": [first, second]}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    app = g.compile(checkpointer=tether.InMemorySaver())
    assert app.invoke({"items": []}, cfg())["__interrupt__"][0].value == "first?"
    assert app.invoke(Command(resume="1"), cfg())["__interrupt__"][0].value == "second?"
    assert app.invoke(Command(resume="2"), cfg()) == {"items": ["1", "2"]}


def test_parallel_interrupts_resumed_by_id() -> None:
    runs: Counter[str] = Counter()

    def asker(name: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            runs[name] += 1
            return {"items": [f"{name}={interrupt(name)}"]}

        return run

    def plain(state: State) -> dict[str, Any]:
        runs["plain"] += 1
        return {"items": ["plain"]}

    g = StateGraph(State)
    g.add_node("x", asker("x"))
    g.add_node("y", asker("y"))
    g.add_node("plain", plain)
    for name in ("x", "y", "plain"):
        g.add_edge(START, name)
    saver = tether.InMemorySaver()
    app = g.compile(checkpointer=saver)
    out = app.invoke({"items": []}, cfg())
    by_value = {i.value: i.id for i in out["__interrupt__"]}
    assert set(by_value) == {"x", "y"}
    assert out["items"] == []

    with pytest.raises(ConfigError, match="2 pending interrupts"):
        app.invoke(Command(resume="ambiguous"), cfg())

    # answer only y: x stays pending, nothing else re-runs
    out = app.invoke(Command(resume={by_value["y"]: "Y"}), cfg())
    assert [i.value for i in out["__interrupt__"]] == ["x"]
    resumes = [v for _, ch, v in saver.get_tuple(cfg()).pending_writes or [] if ch == RESUME]
    assert resumes == [{by_value["y"]: ["Y"]}]

    out = app.invoke(Command(resume={by_value["x"]: "X"}), cfg())
    assert out == {"items": ["plain", "x=X", "y=Y"]}
    assert runs == {"plain": 1, "x": 3, "y": 2}


def test_resume_without_pending_interrupt_is_an_error() -> None:
    app = approval_graph(Counter()).compile(checkpointer=tether.InMemorySaver())
    app.invoke({"items": []}, cfg())
    app.invoke(Command(resume="yes"), cfg())
    with pytest.raises(ConfigError, match="no pending interrupt"):
        app.invoke(Command(resume="again"), cfg())


def chain3(runs: Counter[str]) -> StateGraph:
    g = StateGraph(State)
    prev = START
    for name in ("a", "b", "c"):

        def run(state: State, name: str = name) -> dict[str, Any]:
            runs[name] += 1
            return {"items": [name]}

        g.add_node(name, run)
        g.add_edge(prev, name)
        prev = name
    return g


def test_interrupt_before(durability: str) -> None:
    runs: Counter[str] = Counter()
    app = chain3(runs).compile(checkpointer=tether.InMemorySaver(), interrupt_before=["b"])
    out = app.invoke({"items": []}, cfg(), durability=durability)
    assert out == {"items": ["a"]}
    assert app.get_state(cfg()).next == ("b",)
    out = app.invoke(None, cfg(), durability=durability)
    assert out == {"items": ["a", "b", "c"]}
    assert runs == {"a": 1, "b": 1, "c": 1}


def test_interrupt_after(durability: str) -> None:
    runs: Counter[str] = Counter()
    app = chain3(runs).compile(checkpointer=tether.InMemorySaver(), interrupt_after="a")
    assert app.invoke({"items": []}, cfg(), durability=durability) == {"items": ["a"]}
    assert app.get_state(cfg()).next == ("b",)
    assert app.invoke(None, cfg(), durability=durability) == {"items": ["a", "b", "c"]}
    assert runs == {"a": 1, "b": 1, "c": 1}


def test_stream_updates_reports_the_interrupt() -> None:
    app = approval_graph(Counter()).compile(checkpointer=tether.InMemorySaver())
    chunks = list(app.stream({"items": []}, cfg(), stream_mode="updates"))
    assert chunks[0] == {"draft": {"items": ["draft"]}}
    assert chunks[-1]["__interrupt__"][0].value == {"question": "ship it?"}


def test_interrupt_outside_a_node() -> None:
    with pytest.raises(RuntimeError, match="outside a graph node"):
        interrupt("x")


def test_exit_mode_interrupt_is_stored_at_exit_and_resumes() -> None:
    runs: Counter[str] = Counter()
    saver = tether.InMemorySaver()
    app = approval_graph(runs).compile(checkpointer=saver)
    out = app.invoke({"items": []}, cfg(), durability="exit")
    assert out["__interrupt__"][0].value == {"question": "ship it?"}
    history = list(saver.list(cfg()))
    assert len(history) == 1  # the one put at exit
    assert [ch for _, ch, _ in history[0].pending_writes or []] == [INTERRUPT]
    out = app.invoke(Command(resume="late"), cfg(), durability="exit")
    assert out == {"items": ["draft", "approved:late"]}
    assert runs == {"draft": 1, "approve": 2}
    assert len(list(saver.list(cfg()))) == 2

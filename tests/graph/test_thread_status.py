"""The thread index's status (#15) after real runs, on every backend.

After each step of a run (tether's runtime, and real LangGraph graphs through
the drop-ins) ``threads()`` must say what scanning says: the latest root
checkpoint of each thread read back and judged by ``tether.history.status``
(:func:`tether.testing._threads.check_index`).
"""

from __future__ import annotations

import operator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

import tether
from tether.checkpoint import make_config
from tether.graph import START, Command, Send, StateGraph, interrupt
from tether.testing._driver import RECORD_TYPE, ContractRecord, Driver, new_checkpoint
from tether.testing._threads import check_index

from .test_savers import saver as saver


class Crash(BaseException):
    """A process dying mid-step: nothing is caught or stored for it."""


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    answer: str


class Inner(TypedDict):
    log: Annotated[list[str], operator.add]


def _cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _ask(state: State) -> dict[str, Any]:
    return {"answer": str(interrupt("approve?")), "log": ["asked"]}


def _fan(state: State) -> list[Send]:
    return [Send("part", {"log": [f"p{i}"], "answer": ""}) for i in range(2)]


def build(crash: set[str] | None = None, fail: set[str] | None = None) -> StateGraph:
    crash = crash if crash is not None else set()
    fail = fail if fail is not None else set()

    def step(name: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            if name in crash:
                raise Crash(name)
            if name in fail:
                raise ValueError(f"{name} failed")
            return {"log": [name]}

        return run

    inner = StateGraph(Inner)
    inner.add_node("inner_ask", lambda s: {"log": [str(interrupt("inner?"))]})
    inner.add_edge(START, "inner_ask")
    b = StateGraph(State)
    b.add_node("a", step("a"))
    b.add_node("ask", _ask)
    b.add_node("part", step("part"))
    b.add_node("sub", inner.compile())
    b.add_node("z", step("z"))
    b.add_edge(START, "a")
    b.add_edge("a", "ask")
    b.add_conditional_edges("ask", _fan, ["part"])
    b.add_edge("part", "sub")
    b.add_edge("sub", "z")
    return b


@pytest.fixture
def driver(saver: tether.BaseCheckpointSaver) -> Driver:
    return Driver(saver.with_allowlist([("tether.graph._types", "Send")]), "sync")


def test_status_through_interrupts_resumes_forks_and_updates(driver: Driver) -> None:
    saver = driver.saver
    graph = build().compile(checkpointer=saver)
    one = _cfg("one")
    threads = ["one"]

    def check(where: str, want: str) -> None:
        check_index_sync(driver, threads, where)
        [row] = [r for r in saver.threads(limit=100) if r.thread_id == threads[-1]]
        assert row.status == want, where

    graph.invoke({"log": [], "answer": ""}, one)
    check("interrupted at ask", "interrupted")
    graph.invoke(Command(resume="yes"), one)
    check("interrupted in the subgraph", "interrupted")
    [row] = saver.threads()
    assert row.namespaces == 2  # the subgraph's namespace is the same thread
    graph.invoke(Command(resume="inner yes"), one)
    check("finished", "idle")
    history = list(graph.get_state_history(one))
    graph.update_state(history[3].config, {"answer": "changed"})
    check("update_state on an old checkpoint: its next nodes wait", "pending")
    graph.update_state(history[-2].config, None, as_node="__copy__")
    check("a __copy__ fork of the input checkpoint", "pending")
    graph.update_state(history[0].config, None, as_node="__copy__")
    check("a __copy__ fork of the final checkpoint", "idle")
    graph.invoke(None, one)  # runs the fork's pending nodes, up to the interrupt
    check("the fork ran up to its interrupt", "idle")
    saver.copy_thread("one", "two")
    threads.append("two")
    check("copied", "idle")


def test_status_after_a_crash_and_a_failure(driver: Driver) -> None:
    saver = driver.saver
    crashing = build(crash={"a"}).compile(checkpointer=saver)
    with pytest.raises(Crash):
        crashing.invoke({"log": [], "answer": ""}, _cfg("crash"))
    check_index_sync(driver, ["crash"], "crashed in a")
    [row] = saver.threads(status="pending")
    assert row.thread_id == "crash"  # a is still to run
    failing = build(fail={"a"}).compile(checkpointer=saver)
    with pytest.raises(ValueError, match="a failed"):
        failing.invoke({"log": [], "answer": ""}, _cfg("fail"))
    check_index_sync(driver, ["crash", "fail"], "failed in a")
    assert [r.thread_id for r in saver.threads(status="error")] == ["fail"]
    # The crashed run goes on with a graph that does not crash.
    build().compile(checkpointer=saver).invoke(None, _cfg("crash"))
    check_index_sync(driver, ["crash", "fail"], "resumed after the crash")
    assert [r.thread_id for r in saver.threads(status="interrupted")] == ["crash"]


def test_status_of_a_real_langgraph_graph(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    from langgraph.types import Command as LGCommand

    from tether.langgraph import SqliteSaver

    from ..cli.graphs import THREADS, config, run_scenario
    from ..cli.graphs import build as lg_build

    with SqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as checkpointer:
        run_scenario(checkpointer)
        inner = Driver(checkpointer.saver, "sync")
        check_index_sync(inner, list(THREADS), "the scenario")
        statuses = {r.thread_id: r.status for r in checkpointer.threads()}
        assert statuses == {"chat-1": "pending", "chat-2": "interrupted"}
        lg_build(checkpointer).invoke(LGCommand(resume="ok"), config("chat-2"))
        check_index_sync(inner, list(THREADS), "chat-2 resumed")


def test_status_as_a_checkpoints_writes_arrive_batch_by_batch(driver: Driver) -> None:
    """Each put_writes moves the status as a scan of all the writes would (Postgres
    decides from the batch's channels when it can, #19: see ``_threads.write_hint``)."""
    saver = driver.saver
    config = saver.put(make_config("w"), new_checkpoint({}, {}), {"step": 0}, {})
    steps = [
        ("a", [("__interrupt__", "approve?")], "interrupted"),
        ("b", [("log", "b")], "interrupted"),  # another task's writes: a still waits
        ("a", [("__resume__", "yes")], "interrupted"),  # control writes only
        ("a", [("log", "a")], "idle"),  # the interrupted task wrote: it waits no more
        ("c", [("log", "c"), ("__scheduled__", "x")], "idle"),
        ("d", [("__error__", "boom")], "error"),
        ("e", [("log", "e")], "error"),
        ("f", [("__interrupt__", "again?")], "error"),
    ]
    for task, writes, want in steps:
        saver.put_writes(config, writes, task)
        check_index_sync(driver, ["w"], f"{task} wrote {writes}")
        [row] = saver.threads()
        assert row.status == want, (task, writes)


def check_index_sync(driver: Driver, threads: list[str], where: str) -> None:
    import asyncio

    asyncio.run(check_index(driver, threads, where))


def test_a_latest_checkpoint_this_saver_cannot_decode_has_status_none(
    saver: tether.BaseCheckpointSaver,
) -> None:
    """The new latest root checkpoint of a delete_for_runs is decoded; a refused type in it
    leaves the status unknown (None) rather than a guess."""
    wide = saver.with_allowlist([RECORD_TYPE])
    record = ContractRecord("x", datetime.now(UTC), frozenset())
    first = wide.put(
        make_config("t"), new_checkpoint({"r": record}, {"r": "1"}), {"step": 0}, {"r": "1"}
    )
    wide.put(first, new_checkpoint({}, {"r": "1"}), {"step": 1, "run_id": "gone"}, {})
    assert [r.status for r in saver.threads()] == ["idle"]
    saver.delete_for_runs(["gone"])
    [row] = saver.threads()
    assert (row.status, row.latest_step, row.checkpoints) == (None, 0, 1)

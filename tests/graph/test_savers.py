"""The runtime on every tether backend: memory, a SQLite file, Postgres (when reachable).

Each test drives a run through the features that depend most on storage:
pending writes (errors, interrupts), parents (forks), namespaces (subgraphs),
and the strict serializer with the schema's types allowlisted at compile.
"""

from __future__ import annotations

import operator
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

import tether
from tether.graph import START, Command, StateGraph, interrupt


@dataclass
class Note:
    text: str
    votes: int = 0


class State(TypedDict):
    notes: Annotated[list[Note], operator.add]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tether.BaseCheckpointSaver]:
    kind = request.param
    if kind == "memory":
        yield tether.InMemorySaver()
    elif kind == "sqlite":
        with tether.SqliteSaver(tmp_path / "graph.db") as s:
            yield s
    else:
        psycopg = pytest.importorskip("psycopg")
        dsn = os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
        except psycopg.OperationalError as exc:
            if os.environ.get("TETHER_REQUIRE_PG") == "1":
                pytest.fail(f"Postgres at {dsn!r} is not reachable: {exc}")
            pytest.skip(f"Postgres at {dsn!r} is not reachable: {exc}")
        schema = f"g_{uuid.uuid4().hex[:12]}"
        with tether.PostgresSaver.from_conn_string(dsn, schema=schema, pool_size=4) as s:
            s.setup()
            try:
                yield s
            finally:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def review_graph(runs: Counter[str], fail: set[str]) -> StateGraph:
    def writer(name: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            runs[name] += 1
            if name in fail:
                raise RuntimeError(f"{name} failed")
            return {"notes": [Note(name)]}

        return run

    def review(state: State) -> dict[str, Any]:
        runs["review"] += 1
        verdict = interrupt({"notes": [n.text for n in state["notes"]]})
        return {"notes": [Note(f"review:{verdict}", votes=len(state["notes"]))]}

    g = StateGraph(State)
    for name in ("x", "y", "z"):
        g.add_node(name, writer(name))
        g.add_edge(START, name)
    g.add_node("review", review)
    g.add_edge(["x", "y", "z"], "review")
    return g


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_error_retry_interrupt_resume(saver: tether.BaseCheckpointSaver, durability: str) -> None:
    runs: Counter[str] = Counter()
    fail = {"y"}
    app = review_graph(runs, fail).compile(checkpointer=saver)
    with pytest.raises(RuntimeError, match="y failed"):
        app.invoke({"notes": []}, cfg(), durability=durability)
    fail.clear()
    out = app.invoke(None, cfg(), durability=durability)
    assert out["__interrupt__"][0].value == {"notes": ["x", "y", "z"]}
    out = app.invoke(Command(resume="ok"), cfg(), durability=durability)
    assert out == {"notes": [Note("x"), Note("y"), Note("z"), Note("review:ok", votes=3)]}
    assert runs == {"x": 1, "y": 2, "z": 1, "review": 2}


async def test_async_run_and_fork(saver: tether.BaseCheckpointSaver) -> None:
    runs: Counter[str] = Counter()
    app = review_graph(runs, set()).compile(checkpointer=saver)
    await app.ainvoke({"notes": [Note("seed")]}, cfg())
    await app.ainvoke(Command(resume="first"), cfg())
    history = [s async for s in app.aget_state_history(cfg())]
    [before_review] = [s for s in history if s.next == ("review",)]
    fork = await app.aupdate_state(before_review.config, {"notes": [Note("extra")]}, as_node="x")
    out = await app.ainvoke(None, fork)
    assert out["__interrupt__"][0].value == {"notes": ["seed", "x", "y", "z", "extra"]}
    out = await app.ainvoke(Command(resume="second"), cfg())
    assert out["notes"][-1] == Note("review:second", votes=5)
    # the first branch still ends with the first review
    assert history[0].values["notes"][-1] == Note("review:first", votes=4)
    again = await app.aget_state(history[0].config)
    assert again.values == history[0].values


def test_subgraph_namespaces(saver: tether.BaseCheckpointSaver) -> None:
    inner = StateGraph(State)
    inner.add_node("ask", lambda s: {"notes": [Note(f"inner:{interrupt('?')}")]})
    inner.add_edge(START, "ask")
    outer = StateGraph(State)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    app = outer.compile(checkpointer=saver)
    app.invoke({"notes": []}, cfg())
    state = app.get_state(cfg(), subgraphs=True)
    sub_state = state.tasks[0].state
    assert isinstance(sub_state, tether.graph.StateSnapshot)
    assert sub_state.next == ("ask",)
    assert app.invoke(Command(resume="yes"), cfg()) == {"notes": [Note("inner:yes")]}

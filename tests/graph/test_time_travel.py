"""Time travel and forks (S6.3, S6.4): history, update_state, __copy__, branches."""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

import tether
from tether.errors import CheckpointNotFound, ConfigError
from tether.graph import START, StateGraph, StateSnapshot


class State(TypedDict):
    items: Annotated[list[str], operator.add]
    note: str


def cfg(thread: str = "t", checkpoint_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def chain(runs: Counter[str], names: str = "abcd", saver: Any = None) -> Any:
    g = StateGraph(State)
    prev = START
    for name in names:

        def run(state: State, name: str = name) -> dict[str, Any]:
            runs[name] += 1
            return {"items": [name]}

        g.add_node(name, run)
        g.add_edge(prev, name)
        prev = name
    return g.compile(checkpointer=saver or tether.InMemorySaver())


def by_step(app: Any, thread: str = "t") -> dict[int, StateSnapshot]:
    return {s.metadata["step"]: s for s in app.get_state_history(cfg(thread))}


def test_get_state_and_history() -> None:
    app = chain(Counter())
    app.invoke({"items": []}, cfg())
    state = app.get_state(cfg())
    assert state.values == {"items": ["a", "b", "c", "d"]}
    assert state.next == ()
    assert state.metadata is not None
    assert state.metadata["source"] == "loop"
    assert state.created_at is not None
    history = list(app.get_state_history(cfg()))
    assert [s.metadata["step"] for s in history] == [4, 3, 2, 1, 0, -1]
    assert [s.next for s in history] == [(), ("d",), ("c",), ("b",), ("a",), ("__start__",)]
    assert history[0].config == state.config
    # a past checkpoint's tasks carry what they wrote
    assert history[1].tasks[0].result == {"items": ["d"]}

    assert len(list(app.get_state_history(cfg(), limit=2))) == 2
    before = list(app.get_state_history(cfg(), before=history[2].config))
    assert [s.metadata["step"] for s in before] == [1, 0, -1]
    inputs = list(app.get_state_history(cfg(), filter={"source": "input"}))
    assert [s.metadata["step"] for s in inputs] == [-1]
    assert app.get_state(history[3].config).values == {"items": ["a"]}


def test_get_state_of_unknown_thread_is_empty() -> None:
    state = chain(Counter()).get_state(cfg("nobody"))
    assert state.values == {}
    assert state.next == ()


def test_rerun_from_a_past_checkpoint_forks_and_keeps_the_old_branch() -> None:
    runs: Counter[str] = Counter()
    app = chain(runs)
    app.invoke({"items": []}, cfg())
    old = list(app.get_state_history(cfg()))
    old_snapshot = [(s.config, s.values, s.metadata) for s in old]
    at_b = by_step(app)[2]  # after "b", before "c"
    assert at_b.next == ("c",)

    out = app.invoke(None, at_b.config)
    assert out == {"items": ["a", "b", "c", "d"]}
    assert runs["c"] == 2  # re-run on the new branch, not replayed
    # the new branch's first checkpoint is a child of the checkpoint forked from
    old_configs = [c for c, _, _ in old_snapshot]
    new = [s for s in app.get_state_history(cfg()) if s.config not in old_configs]
    assert [s.metadata["step"] for s in new] == [4, 3]
    assert new[-1].parent_config == at_b.config
    # the old branch is untouched
    for config, values, metadata in old_snapshot:
        again = app.get_state(config)
        assert (again.values, again.metadata) == (values, metadata)


def test_update_state_as_node_creates_update_checkpoint_and_branch() -> None:
    runs: Counter[str] = Counter()
    app = chain(runs)
    app.invoke({"items": []}, cfg())
    old_ids = [s.config["configurable"]["checkpoint_id"] for s in app.get_state_history(cfg())]
    at_b = by_step(app)[2]

    new_config = app.update_state(at_b.config, {"items": ["B!"], "note": "edited"}, as_node="b")
    fork = app.get_state(new_config)
    assert fork.metadata is not None
    assert fork.metadata["source"] == "update"
    assert fork.metadata["step"] == 3
    assert fork.parent_config == at_b.config
    assert fork.values == {"items": ["a", "b", "B!"], "note": "edited"}
    assert fork.next == ("c",)  # as if "b" had returned the values: its edge fires

    # continue the new branch for several steps
    out = app.invoke(None, new_config)
    assert out == {"items": ["a", "b", "B!", "c", "d"], "note": "edited"}
    # the old branch is unchanged: same checkpoints, same values
    for cid in old_ids:
        snap = app.get_state(cfg(checkpoint_id=cid))
        assert "B!" not in snap.values["items"]
    assert app.get_state(cfg(checkpoint_id=old_ids[0])).values == {"items": ["a", "b", "c", "d"]}
    # the thread's latest is now the end of the new branch
    assert app.get_state(cfg()).values == out


def test_update_state_infers_the_last_node() -> None:
    app = chain(Counter(), "ab")
    app.invoke({"items": []}, cfg())
    config = app.update_state(cfg(), {"note": "hi"})
    state = app.get_state(config)
    assert state.values == {"items": ["a", "b"], "note": "hi"}
    assert state.next == ()  # "b" has no outgoing edge


def test_update_state_on_a_new_thread_acts_as_input() -> None:
    app = chain(Counter(), "ab")
    config = app.update_state(cfg("new"), {"items": ["seed"]})
    assert app.get_state(config).next == ("a",)
    assert app.invoke(None, cfg("new"))["items"] == ["seed", "a", "b"]


def test_copy_creates_a_fork_checkpoint() -> None:
    runs: Counter[str] = Counter()
    app = chain(runs)
    app.invoke({"items": []}, cfg())
    at_a = by_step(app)[1]
    copy_config = app.update_state(at_a.config, None, as_node="__copy__")
    copy = app.get_state(copy_config)
    assert copy.metadata is not None
    assert copy.metadata["source"] == "fork"
    assert copy.metadata["step"] == 2
    assert copy.values == at_a.values
    assert copy.next == ("b",)
    assert copy.parent_config == at_a.parent_config  # a sibling of the copied checkpoint
    assert copy_config != at_a.config
    out = app.invoke(None, copy_config)
    assert out["items"] == ["a", "b", "c", "d"]
    assert runs["b"] == 2


def test_copy_needs_an_existing_checkpoint() -> None:
    with pytest.raises(CheckpointNotFound):
        chain(Counter()).update_state(cfg("none"), None, as_node="__copy__")


def test_update_state_unknown_node() -> None:
    app = chain(Counter())
    app.invoke({"items": []}, cfg())
    with pytest.raises(ConfigError, match="no node 'zz'"):
        app.update_state(cfg(), {"note": "x"}, as_node="zz")


def test_unknown_checkpoint_id_is_reported() -> None:
    app = chain(Counter())
    app.invoke({"items": []}, cfg())
    with pytest.raises(CheckpointNotFound, match="no checkpoint"):
        app.invoke(None, cfg(checkpoint_id="1f000000-0000-6000-8000-000000000000"))


async def test_async_state_api() -> None:
    app = chain(Counter(), "ab")
    await app.ainvoke({"items": []}, cfg())
    history = [s async for s in app.aget_state_history(cfg())]
    assert [s.metadata["step"] for s in history] == [2, 1, 0, -1]
    config = await app.aupdate_state(history[1].config, {"note": "n"}, as_node="a")
    assert (await app.aget_state(config)).next == ("b",)
    out = await app.ainvoke(None, config)
    assert out == {"items": ["a", "b"], "note": "n"}


def test_update_state_replaces_the_pending_step() -> None:
    """As in LangGraph: the update is the superstep the pending tasks would have been."""
    app = chain(Counter())
    app.invoke({"items": []}, cfg())
    at_b = by_step(app)[2]
    assert at_b.next == ("c",)
    config = app.update_state(at_b.config, {"note": "x"}, as_node="a")
    assert app.get_state(config).next == ("b",)  # "a"'s edge; the pending "c" is dropped

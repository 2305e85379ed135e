"""Durability modes (S4): sync, async (ordered background puts), exit (one put at the end)."""

from __future__ import annotations

import operator
import random
import threading
import time
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest

import tether
from tether.checkpoint import ChannelVersions, Checkpoint, CheckpointMetadata, Config
from tether.errors import StorageUnavailable
from tether.graph import START, StateGraph


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class RecordingSaver(tether.InMemorySaver):
    """Records every put / put_writes in the order the storage saw them.

    ``sleep`` makes each put sleep a random time first (as a slow disk would);
    ``fail_at`` makes the n-th put raise a storage error.
    """

    def __init__(self, *, sleep: float = 0.0, fail_at: int | None = None) -> None:
        super().__init__()
        self.sleep = sleep
        self.fail_at = fail_at
        self.events: list[tuple[str, Any]] = []
        self.lock = threading.Lock()
        self.busy = 0
        self.overlap = False

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        with self.lock:
            self.busy += 1
            self.overlap |= self.busy > 1
            n = sum(1 for kind, _ in self.events if kind == "put")
        try:
            if self.sleep:
                time.sleep(random.random() * self.sleep)
            if self.fail_at is not None and n == self.fail_at:
                raise StorageUnavailable("disk went away (test)")
            out = super().put(config, checkpoint, metadata, new_versions)
            with self.lock:
                self.events.append(("put", (metadata["step"], checkpoint["id"])))
            return out
        finally:
            with self.lock:
                self.busy -= 1

    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if self.sleep:
            time.sleep(random.random() * self.sleep)
        super().put_writes(config, writes, task_id, task_path)
        with self.lock:
            self.events.append(("writes", (config["configurable"]["checkpoint_id"], task_id)))

    def puts(self) -> list[tuple[int, str]]:
        return [e for kind, e in self.events if kind == "put"]


def graph(saver: tether.BaseCheckpointSaver, steps: int = 5, fan: int = 1) -> Any:
    g = StateGraph(State)
    prev = START
    for i in range(steps):
        for j in range(fan):
            name = f"n{i}_{j}"
            g.add_node(name, lambda s, name=name: {"items": [name]})
            g.add_edge(prev, name)
        prev = f"n{i}_0"
    return g.compile(checkpointer=saver)


def check_stored_in_order(saver: RecordingSaver, steps: int) -> None:
    puts = saver.puts()
    assert [step for step, _ in puts] == list(range(-1, steps + 1))
    ids = [cid for _, cid in puts]
    assert ids == sorted(ids)
    # every task's writes reached storage after the checkpoint they belong to
    seen: set[str] = set()
    for kind, event in saver.events:
        if kind == "put":
            seen.add(event[1])
        else:
            assert event[0] in seen


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sync_and_async_store_every_step_in_order(durability: str) -> None:
    saver = RecordingSaver(sleep=0.01)
    app = graph(saver, steps=6, fan=2)
    out = app.invoke({"items": []}, cfg(), durability=durability)
    assert len(out["items"]) == 12
    check_stored_in_order(saver, 6)
    assert not saver.overlap  # each put waited for the previous one
    # task writes are stored as each task finishes (S4.4): START's, then two per step
    assert sum(1 for kind, _ in saver.events if kind == "writes") == 13


async def test_async_graph_background_puts_are_ordered() -> None:
    saver = RecordingSaver(sleep=0.01)
    app = graph(saver, steps=6, fan=2)
    out = await app.ainvoke({"items": []}, cfg(), durability="async")
    assert len(out["items"]) == 12
    check_stored_in_order(saver, 6)
    assert not saver.overlap


def test_async_is_the_default_and_state_is_complete_after_invoke() -> None:
    saver = RecordingSaver(sleep=0.005)
    app = graph(saver)
    out = app.invoke({"items": []}, cfg())
    # invoke returns only after the background lane drained
    assert app.get_state(cfg()).values == out
    assert len(saver.puts()) == 7


def test_async_background_puts_do_not_block_the_steps() -> None:
    """The loop runs ahead of storage: a step starts while earlier puts are still queued."""
    release = threading.Event()
    order: list[str] = []

    class SlowSaver(RecordingSaver):
        def put(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            release.wait(10)
            order.append("put")
            return super().put(*args, **kwargs)

    def last(state: State) -> dict[str, Any]:
        order.append("last-node")
        release.set()
        return {"items": ["z"]}

    g = StateGraph(State)
    g.add_node("a", lambda s: {"items": ["a"]})
    g.add_node("b", last)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    saver = SlowSaver()
    g.compile(checkpointer=saver).invoke({"items": []}, cfg(), durability="async")
    assert order[0] == "last-node"  # all steps ran before the first put finished
    assert [s for s, _ in saver.puts()] == [-1, 0, 1, 2]


@pytest.mark.parametrize("is_async", [False, True])
async def test_failed_background_write_fails_the_run(is_async: bool) -> None:
    saver = RecordingSaver(fail_at=2)
    app = graph(saver, steps=4)

    async def run() -> Any:
        if is_async:
            return await app.ainvoke({"items": []}, cfg(), durability="async")
        return app.invoke({"items": []}, cfg(), durability="async")

    with pytest.raises(StorageUnavailable, match="disk went away"):
        await run()
    # nothing after the failed put reached storage
    assert [s for s, _ in saver.puts()] == [-1, 0]


@pytest.mark.parametrize("is_async", [False, True])
async def test_exit_mode_puts_once_at_the_end(is_async: bool) -> None:
    saver = RecordingSaver()
    app = graph(saver, steps=4, fan=2)
    if is_async:
        out = await app.ainvoke({"items": []}, cfg(), durability="exit")
    else:
        out = app.invoke({"items": []}, cfg(), durability="exit")
    assert saver.events == [("put", (4, saver.puts()[0][1]))]
    state = app.get_state(cfg())
    assert state.values == out
    assert state.metadata is not None
    assert state.metadata["step"] == 4
    assert state.parent_config is None  # the first stored checkpoint of the thread
    # a second run stores one more checkpoint, child of the first
    app.invoke({"items": []}, cfg(), durability="exit")
    puts = saver.puts()
    assert len(puts) == 2
    assert app.get_state(cfg()).parent_config["configurable"]["checkpoint_id"] == puts[0][1]


def test_exit_mode_keeps_the_last_checkpoint_id() -> None:
    """The checkpoint put at exit has the id it had in memory when the run ended."""
    ids: list[str] = []

    class Spy(RecordingSaver):
        def put(self, config: Config, checkpoint: Checkpoint, *a: Any) -> dict[str, Any]:
            ids.append(checkpoint["id"])
            return super().put(config, checkpoint, *a)

    saver = Spy()
    app = graph(saver, steps=2)
    seen: list[str] = []
    for _ in app.stream({"items": []}, cfg(), durability="exit"):
        pass
    seen = [s.checkpoint["id"] for s in saver.list(cfg())]
    assert ids == seen
    assert len(ids) == 1


def test_exit_mode_saves_on_error_so_the_run_can_resume() -> None:
    calls = {"n": 0}

    def flaky(state: State) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return {"items": ["ok"]}

    g = StateGraph(State)
    g.add_node("a", lambda s: {"items": ["a"]})
    g.add_node("b", flaky)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    saver = RecordingSaver()
    app = g.compile(checkpointer=saver)
    with pytest.raises(RuntimeError, match="boom"):
        app.invoke({"items": []}, cfg(), durability="exit")
    assert [s for s, _ in saver.puts()] == [1]  # the checkpoint before the failing step
    assert app.get_state(cfg()).tasks[0].error == "boom"
    assert app.invoke(None, cfg(), durability="exit")["items"] == ["a", "ok"]


def test_unknown_durability_is_a_config_error() -> None:
    with pytest.raises(tether.ConfigError, match="durability"):
        graph(tether.InMemorySaver()).invoke({"items": []}, cfg(), durability="later")


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_task_writes_are_stored_while_the_step_still_runs(durability: str) -> None:
    saver = tether.InMemorySaver()

    def slow(state: State) -> dict[str, Any]:
        # "fast" finished in this same superstep; its writes must reach storage now
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            tup = saver.get_tuple(cfg())
            if tup and any(v == ["fast"] for _, _, v in tup.pending_writes or []):
                return {"items": ["slow"]}
            time.sleep(0.005)
        raise AssertionError("the writes of 'fast' were not stored during the step")

    g = StateGraph(State)
    g.add_node("fast", lambda s: {"items": ["fast"]})
    g.add_node("slow", slow)
    g.add_edge(START, "fast")
    g.add_edge(START, "slow")
    out = g.compile(checkpointer=saver).invoke({"items": []}, cfg(), durability=durability)
    assert out["items"] == ["fast", "slow"]

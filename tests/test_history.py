"""tether.history: what a thread's history looks like to a person (pure functions).

``next_nodes`` and ``status`` are checked against what LangGraph's own runtime
(``StateSnapshot.next``, ``tasks``, ``interrupts``) and tether's runtime say
about the same checkpoints of real graphs: joins, deferred nodes, ``Send``
fan-outs, interrupts in subgraphs, forks, failures.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

import tether
from tether import history as h
from tether.checkpoint import CheckpointTuple
from tether.errors import ConfigError
from tether.graph import END as T_END
from tether.graph import START as T_START
from tether.graph import Command as TCommand
from tether.graph import Send as TSend
from tether.graph import StateGraph as TStateGraph
from tether.graph import interrupt as t_interrupt
from tether.langgraph import InMemorySaver


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# --- is_internal -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "channel",
    [
        "__start__",
        "__pregel_tasks",
        "__interrupt__",
        "__resume__",
        "__error__",
        "__scheduled__",
        "__previous__",
        "__no_writes__",
        "branch:to:reply",
        "join:a+b:c",
        "start:agent",
        "branch:agent:should_continue:tools",
    ],
)
def test_runtime_channels_are_internal(channel: str) -> None:
    assert h.is_internal(channel)


@pytest.mark.parametrize("channel", ["messages", "approved", "__root__", "__end__", "to:x", "_x"])
def test_state_channels_are_not_internal(channel: str) -> None:
    assert not h.is_internal(channel)


# --- graphs -------------------------------------------------------------------------------


class ChatState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str
    parts: Annotated[list[str], operator.add]
    log: Annotated[list[str], operator.add]


class SubState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str


def _lg_graph(saver: Any, *, fail: bool = False) -> Any:
    """Joins, a deferred node, a subgraph that interrupts, a Send fan-out."""

    def ask(state: SubState) -> dict[str, Any]:
        return {"approved": str(interrupt({"question": "approve?"}))}

    sub = StateGraph(SubState)
    sub.add_node("ask", ask)
    sub.add_edge(START, "ask")

    def reply(state: ChatState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(content=f"reply {n}", id=f"ai-{n}")]}

    def left(state: ChatState) -> dict[str, Any]:
        return {"log": ["left"]}

    def right(state: ChatState) -> dict[str, Any]:
        if fail:
            raise ValueError("right failed")
        return {"log": ["right"]}

    def joined(state: ChatState) -> dict[str, Any]:
        return {"log": ["joined"]}

    def late(state: ChatState) -> dict[str, Any]:
        return {"log": ["late"]}

    def fan_out(state: ChatState) -> list[Send]:
        return [Send("part", {"item": f"p{i}"}) for i in range(2)]

    def part(arg: dict[str, Any]) -> dict[str, Any]:
        return {"parts": [arg["item"]]}

    g = StateGraph(ChatState)
    g.add_node("reply", reply)
    g.add_node("left", left)
    g.add_node("right", right)
    g.add_node("joined", joined)
    g.add_node("late", late, defer=True)
    g.add_node("review", sub.compile())
    g.add_node("part", part)
    g.add_edge(START, "reply")
    g.add_edge("reply", "left")
    g.add_edge("reply", "right")
    g.add_edge("reply", "late")
    g.add_edge(["left", "right"], "joined")
    g.add_edge("joined", "review")
    g.add_conditional_edges("review", fan_out, ["part"])
    g.add_edge("part", END)
    g.add_edge("late", END)
    return g.compile(checkpointer=saver)


def _lg_run() -> tuple[Any, InMemorySaver]:
    saver = InMemorySaver()
    graph = _lg_graph(saver)
    one = cfg("one")
    graph.invoke({"messages": [HumanMessage(content="hi", id="h1")]}, one)
    graph.invoke(Command(resume="yes"), one)
    graph.invoke({"messages": [HumanMessage(content="again", id="h2")]}, one)
    history = list(graph.get_state_history(one))
    graph.update_state(history[-4].config, {"approved": "forked"}, as_node="reply")
    graph.invoke({"messages": [HumanMessage(content="hello", id="h3")]}, cfg("two"))
    return graph, saver


def _tuples(saver: Any, thread: str) -> dict[str, CheckpointTuple]:
    out = {}
    for tup in saver.saver.list(cfg(thread)):
        out[tup.checkpoint["id"]] = tup
    return out


def test_next_nodes_is_langgraphs_next_for_every_checkpoint() -> None:
    graph, saver = _lg_run()
    checked = 0
    for thread in ("one", "two"):
        tuples = _tuples(saver, thread)
        for snap in graph.get_state_history(cfg(thread)):
            tup = tuples[snap.config["configurable"]["checkpoint_id"]]
            if tup.checkpoint.get("updated_channels") is None:
                # an update: LangGraph lists its nodes in the graph's order, unknown here
                assert sorted(h.next_nodes(tup.checkpoint)) == sorted(snap.next)
            else:
                assert h.next_nodes(tup.checkpoint) == snap.next, snap.metadata
            checked += 1
    assert checked > 15
    # every kind of trigger was seen: a join, a deferred node, Sends, the input node
    seen = {n for tup in _tuples(saver, "one").values() for n in h.next_nodes(tup.checkpoint)}
    assert {"__start__", "joined", "late", "part", "review"} <= seen


def test_next_nodes_of_subgraph_checkpoints_is_langgraphs() -> None:
    graph, saver = _lg_run()
    state = graph.get_state(cfg("two"), subgraphs=True)
    (task,) = state.tasks
    sub = task.state
    tup = saver.saver.get_tuple(sub.config)
    assert tup is not None
    assert tup.config["configurable"]["checkpoint_ns"]
    assert h.next_nodes(tup.checkpoint) == sub.next == ("ask",)


def test_status_follows_langgraph_state() -> None:
    graph, saver = _lg_run()
    two = saver.saver.get_tuple(cfg("two"))
    assert two is not None
    st = h.status(two)
    state = graph.get_state(cfg("two"))
    assert st.state == "interrupted"
    assert st.next == state.next == ("review",)
    assert st.interrupts == tuple(i.value for i in state.interrupts) == ({"question": "approve?"},)
    assert st.to_json() == {
        "state": "interrupted",
        "next": ["review"],
        "interrupts": [{"question": "approve?"}],
        "errors": [],
    }
    # thread one ended on the fork: an update with `review` still to run
    one = saver.saver.get_tuple(cfg("one"))
    assert one is not None
    assert one.metadata["source"] == "update"
    assert h.status(one).state == "pending"
    assert h.status(one).next == tuple(sorted(graph.get_state(cfg("one")).next)) != ()
    # every checkpoint with an interrupt write: interrupted while a task waits
    # (LangGraph: a task with interrupts and no result), pending once answered
    states = []
    for thread in ("one", "two"):
        tuples = _tuples(saver, thread)
        for snap in graph.get_state_history(cfg(thread)):
            tup = tuples[snap.config["configurable"]["checkpoint_id"]]
            if any(w[1] == "__interrupt__" for w in tup.pending_writes or ()):
                waits = any(t.interrupts and t.result is None for t in snap.tasks)
                assert h.status(tup).state == ("interrupted" if waits else "pending")
                states.append(h.status(tup).state)
    assert sorted(set(states)) == ["interrupted", "pending"]


def test_status_of_a_finished_thread_is_idle() -> None:
    saver = InMemorySaver()
    g = StateGraph(ChatState)
    g.add_node("reply", lambda s: {"approved": "y"})
    g.add_edge(START, "reply")
    graph = g.compile(checkpointer=saver)
    graph.invoke({"messages": []}, cfg())
    tup = saver.saver.get_tuple(cfg())
    assert tup is not None
    assert graph.get_state(cfg()).next == ()
    assert h.status(tup) == h.Status("idle")


def test_status_error_names_the_saved_error() -> None:
    saver = InMemorySaver()
    graph = _lg_graph(saver, fail=True)
    with pytest.raises(ValueError, match="right failed"):
        graph.invoke({"messages": [HumanMessage(content="hi", id="h1")]}, cfg())
    tup = saver.saver.get_tuple(cfg())
    assert tup is not None
    st = h.status(tup)
    assert st.state == "error"
    # history's next: get_state leaves out `left`, whose writes are saved
    assert st.next == next(graph.get_state_history(cfg())).next == ("left", "right")
    assert graph.get_state(cfg()).next == ("right",)
    assert [h.error_text(e) for e in st.errors] == ["ValueError: right failed"]
    assert st.to_json()["errors"] == ["ValueError: right failed"]


# --- tether's own runtime -------------------------------------------------------------------


class TState(TypedDict, total=False):
    order: str
    checks: Annotated[list[str], operator.add]
    decision: str
    parts: Annotated[list[str], operator.add]


def _tether_graph(saver: Any) -> Any:
    def approve(state: TState) -> TState:
        return {"decision": str(t_interrupt({"question": f"ship {state['order']}?"}))}

    def fan(state: TState) -> list[TSend]:
        return [TSend("part", {"i": i}) for i in range(2)]

    g = TStateGraph(TState)
    g.add_node("receive", lambda s: {"checks": ["received"]})
    g.add_node("price", lambda s: {"checks": ["price"]})
    g.add_node("stock", lambda s: {"checks": ["stock"]})
    g.add_node("approve", approve)
    g.add_node("part", lambda arg: {"parts": [str(arg["i"])]})
    g.add_edge(T_START, "receive")
    g.add_edge("receive", "price")
    g.add_edge("receive", "stock")
    g.add_edge(["price", "stock"], "approve")
    g.add_conditional_edges("approve", fan)
    g.add_edge("part", T_END)
    return g.compile(checkpointer=saver)


def test_next_nodes_and_status_agree_with_tethers_runtime() -> None:
    graph = _tether_graph(tether.InMemorySaver())
    saver = graph.checkpointer  # with the graph's allowlist (its Send type)
    graph.invoke({"order": "o1", "checks": []}, cfg())
    latest = saver.get_tuple(cfg())
    assert latest is not None
    st = h.status(latest)
    assert st.state == "interrupted"
    assert st.interrupts == ({"question": "ship o1?"},)
    assert st.next == graph.get_state(cfg()).next == ("approve",)
    graph.invoke(TCommand(resume="yes"), cfg())
    tuples = {t.checkpoint["id"]: t for t in saver.list(cfg())}
    seen = set()
    for snap in graph.get_state_history(cfg()):
        tup = tuples[snap.config["configurable"]["checkpoint_id"]]
        # tether's runtime orders pull tasks before pushes; LangGraph pushes first
        assert sorted(h.next_nodes(tup.checkpoint)) == sorted(snap.next), snap.metadata
        seen.update(snap.next)
    assert {"__start__", "approve", "part", "price", "stock"} <= seen
    final = saver.get_tuple(cfg())
    assert final is not None
    assert h.status(final) == h.Status("idle")


def test_tether_runtime_error_is_status_error() -> None:
    saver = tether.InMemorySaver()
    g = TStateGraph(TState)

    def boom(state: TState) -> TState:
        raise KeyError("no stock")

    g.add_node("stock", boom)
    g.add_edge(T_START, "stock")
    graph = g.compile(checkpointer=saver)
    with pytest.raises(KeyError):
        graph.invoke({"order": "o"}, cfg())
    tup = saver.get_tuple(cfg())
    assert tup is not None
    st = h.status(tup)
    assert st.state == "error"
    assert st.next == ("stock",)
    assert h.error_text(st.errors[0]) == "KeyError: 'no stock'"


def test_error_text_forms() -> None:
    assert h.error_text(ValueError("x")) == "ValueError: x"
    assert h.error_text("ValueError('it\\'s')") == "ValueError: it's"
    assert h.error_text('pkg.Err("a(b)")') == "pkg.Err: a(b)"
    assert h.error_text("Err(1, 2)") == "Err(1, 2)"
    assert h.error_text({"message": "m"}) == "m"
    assert h.error_text("plain") == "plain"


def test_next_nodes_reads_trigger_values_without_a_graph() -> None:
    cp: dict[str, Any] = {
        "channel_values": {
            "branch:to:a": None,
            "join:x+y:b": ["x"],  # half full: b does not run yet
            "join:x+y:c": {"x", "y"},
            "branch:to:d": (None, False),  # deferred, not finished
            "branch:to:e": (None, True),
            "__pregel_tasks": [{"node": "f", "arg": 1}],
        },
        "channel_versions": {
            "branch:to:a": 3,
            "join:x+y:b": 3,
            "join:x+y:c": 3,
            "branch:to:d": 3,
            "branch:to:e": 3,
            "branch:to:g": 3,  # consumed: no value
            "__pregel_tasks": 3,
        },
        "versions_seen": {"a": {"branch:to:a": 2}, "e": {"branch:to:e": 3}},
    }
    assert h.next_nodes(cp) == ("f", "a", "c")
    assert h.next_nodes({}) == ()


# --- diff ------------------------------------------------------------------------------------


def test_diff_reports_an_appended_tail_once() -> None:
    a = {"messages": [HumanMessage(content="hi", id="1")], "n": 1}
    b = {
        "messages": [
            HumanMessage(content="hi", id="1"),
            AIMessage(content="hello", id="2"),
            HumanMessage(content="more", id="3"),
        ],
        "n": 1,
    }
    (change,) = h.diff(a, b)
    assert change.kind == "appended"
    assert change.path == "messages"
    assert change.index == 1
    assert change.count == 2
    assert change.describe() == "messages: appended 2 items, last human: more"
    assert h.summarize([change]) == "messages +2 human: more"


def test_diff_nested_paths() -> None:
    a = {
        "messages": [HumanMessage(content="hi", id="1"), AIMessage(content="old", id="2")],
        "cfg": {"a": {"b": 1, "gone": 2}, "weird key": 1},
        "x": 1,
    }
    b = {
        "messages": [HumanMessage(content="hi", id="1"), AIMessage(content="new", id="2")],
        "cfg": {"a": {"b": 2, "new": 3}, "weird key": 1},
        "y": [],
    }
    changes = h.diff(a, b)
    assert [(c.kind, c.path, c.old, c.new) for c in changes] == [
        ("changed", "cfg.a.b", 1, 2),
        ("removed", "cfg.a.gone", 2, None),
        ("added", "cfg.a.new", None, 3),
        ("changed", "messages[1].content", "old", "new"),
        ("removed", "x", 1, None),
        ("added", "y", None, []),
    ]
    assert changes[3].channel == "messages"


def test_diff_types_lists_and_internal_channels() -> None:
    assert h.diff({"a": 1}, {"a": True})[0].kind == "changed"
    assert h.diff({"a": 1}, {"a": 1.0})[0].kind == "changed"
    assert h.diff({"a": [1, 2, 3]}, {"a": [1]}) == [
        h.Change("truncated", "a", "a", old=[2, 3], index=1)
    ]
    assert [c.path for c in h.diff({"a": [1, 2]}, {"a": [1, 5, 6]})] == ["a[1]", "a"]
    assert h.diff({"k": {1: "a"}}, {"k": {1: "b"}})[0].path == "k[1]"
    assert h.diff({"k": {"x-y": 1}}, {"k": {"x-y": 2}})[0].path == "k['x-y']"
    # the runtime's channels are left out unless asked for; the input is kept
    a = {"branch:to:x": None, "__pregel_tasks": [1]}
    b = {"__start__": {"messages": []}, "branch:to:y": None}
    assert [c.path for c in h.diff(a, b)] == ["__start__"]
    assert [c.path for c in h.diff(a, b, internal=True)] == [
        "__pregel_tasks",
        "__start__",
        "branch:to:x",
        "branch:to:y",
    ]
    assert h.summarize(h.diff({}, b)) == "input {messages: []}"
    assert h.diff({"a": [1]}, {"a": [1]}) == []


@dataclass
class Point:
    x: int
    y: int


class Pair(NamedTuple):
    left: int
    right: int


def test_diff_of_dataclasses_and_arrays() -> None:
    assert [c.path for c in h.diff({"p": Point(1, 2)}, {"p": Point(1, 3)})] == ["p.y"]
    assert [c.path for c in h.diff({"p": Pair(1, 2)}, {"p": Pair(1, 3)})] == ["p.right"]

    class NoBoolEq:
        def __eq__(self, other: object) -> bool:
            raise ValueError("ambiguous")

    (c,) = h.diff({"a": NoBoolEq()}, {"a": NoBoolEq()})
    assert c.kind == "changed"


def test_change_json_shape_is_stable() -> None:
    changes = h.diff(
        {"messages": [HumanMessage(content="hi", id="1")], "gone": b"xy"},
        {"messages": [HumanMessage(content="hi", id="1"), AIMessage(content="yo", id="2")]},
    )
    shapes = [c.to_json() for c in changes]
    assert json.loads(json.dumps(shapes)) == shapes
    for shape in shapes:
        assert list(shape) == ["kind", "channel", "path", "old", "new", "index", "count"]
    gone, appended = shapes
    assert gone == {
        "kind": "removed",
        "channel": "gone",
        "path": "gone",
        "old": {"bytes": 2},
        "new": None,
        "index": None,
        "count": None,
    }
    assert appended["kind"] == "appended"
    assert appended["index"] == 1
    assert appended["count"] == 1
    (msg,) = appended["new"]
    assert msg["type"] == "ai"
    assert msg["content"] == "yo"
    assert msg["id"] == "2"


# --- preview and jsonable -------------------------------------------------------------------------


def test_preview_messages_alike() -> None:
    lc = HumanMessage(content="hello   there\nfriend")
    assert h.preview(lc) == "human: hello there friend"
    assert h.preview({"role": "user", "content": "hello"}) == "user: hello"
    blocks = [{"type": "text", "text": "a"}, {"type": "image"}]
    assert h.preview({"type": "ai", "content": blocks}) == "ai: a [image]"
    call = AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": 1}, "id": "c1"}])
    assert h.preview(call) == "ai: -> search()"
    assert h.preview(ToolMessage(content="42", name="calc", tool_call_id="c1")) == "tool calc: 42"
    long = HumanMessage(content="x" * 500)
    text = h.preview(long, 20)
    assert len(text) == 20
    assert text.endswith("…")
    assert text.startswith("human: xxx")


def test_preview_values() -> None:
    assert h.preview("yes") == "'yes'"
    assert h.preview(None) == "None"
    assert h.preview([1, 2, 3]) == "[1, 2, 3]"
    assert h.preview({"a": 1, "b": [HumanMessage(content="hi")]}) == "{a: 1, b: [human: hi]}"
    assert h.preview(Point(1, 2)) == "Point(x=1, y=2)"
    assert h.preview(b"abc") == "<3 bytes>"
    big = list(range(100_000))
    text = h.preview(big, 30)
    assert len(text) == 30
    assert text.startswith("[0, 1, 2")
    assert h.preview("a" * 10_000, 10) == "'aaaaaaaa…"


def test_jsonable() -> None:
    import datetime
    import enum
    import uuid

    class Color(enum.Enum):
        RED = "red"

    value = {
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "id": uuid.UUID(int=1),
        "color": Color.RED,
        "nan": float("nan"),
        "set": {3, 1},
        "tuple": (1, "a"),
        "point": Point(1, 2),
        "pair": Pair(1, 2),
        "exc": ValueError("bad"),
        "send": Send("node", {"a": 1}),
        1: "int key",
        "obj": object,
    }
    out = h.jsonable(value)
    assert json.loads(json.dumps(out)) == out
    assert out["when"] == "2026-01-02T03:04:05+00:00"
    assert out["id"] == str(uuid.UUID(int=1))
    assert out["color"] == "red"
    assert out["nan"] == "nan"
    assert out["set"] == [1, 3]
    assert out["tuple"] == [1, "a"]
    assert out["point"] == {"type": "Point", "x": 1, "y": 2}
    assert out["pair"] == {"type": "Pair", "left": 1, "right": 2}
    assert out["exc"] == {"type": "ValueError", "message": "bad"}
    assert out["send"] == {"type": "Send", "node": "node", "arg": {"a": 1}}
    assert out["1"] == "int key"
    assert out["obj"] == repr(object)
    deep: list[Any] = []
    cur = deep
    for _ in range(200):
        cur.append([])
        cur = cur[0]
    json.dumps(h.jsonable(deep))


# --- tree ----------------------------------------------------------------------------------------


def test_tree_draws_forks_and_keeps_chains_flat() -> None:
    # a -> b -> c -> d ; b -> e -> f ; b -> g ; e -> h (ids sort in creation order)
    rows = [
        ("h", "e"),
        ("g", "b"),
        ("f", "e"),
        ("e", "b"),
        ("d", "c"),
        ("c", "b"),
        ("b", "a"),
        ("a", None),
    ]
    out = h.tree(rows)
    drawn = [r.prefix + r.checkpoint_id for r in out]
    assert drawn == [
        "a",
        "b",
        "├─ c",
        "│  d",
        "├─ e",
        "│  ├─ f",
        "│  └─ h",
        "└─ g",
    ]
    assert [r.index for r in out] == [7, 6, 5, 4, 3, 2, 0, 1]
    b = out[1]
    assert b.children == 3
    assert b.depth == 0
    f = out[5]
    assert (f.depth, f.guides, f.branch, f.last) == (2, (True, True), True, False)


def test_tree_roots_and_missing_parents() -> None:
    out = h.tree([("b", "gone"), ("a", None), ("c", "b")])
    assert [(r.checkpoint_id, r.depth, r.parent_id) for r in out] == [
        ("a", 0, None),
        ("b", 0, None),
        ("c", 0, "b"),
    ]


def test_tree_of_a_long_chain_is_iterative() -> None:
    rows = [(f"{i:06d}", f"{i - 1:06d}" if i else None) for i in range(5000)]
    out = h.tree(rows)
    assert len(out) == 5000
    assert {r.depth for r in out} == {0}


# --- references ---------------------------------------------------------------------------

REFS = [
    h.Ref("1f1f01d0-2ef1-6bdc-8006-9374fa327a78", 3),
    h.Ref("1f1f01d0-2ee9-6db9-8005-b8eb2903f8af", 2),
    h.Ref("1f1f01d0-2ee4-6c63-8004-cdbca208dc00", 2, "review:abc"),
    h.Ref("1f1f01d0-2e95-609e-bfff-64ca76ae1966", -1),
]


def test_resolve_rows_steps_and_prefixes() -> None:
    assert h.resolve(REFS, "#1") == REFS[0].checkpoint_id
    assert h.resolve(REFS, "#4") == REFS[3].checkpoint_id
    assert h.resolve(REFS, "step:3") == REFS[0].checkpoint_id
    assert h.resolve(REFS, "step:-1") == REFS[3].checkpoint_id
    assert h.resolve(REFS, "1F1F01D0-2EF") == REFS[0].checkpoint_id
    assert h.resolve(REFS, REFS[2].checkpoint_id) == REFS[2].checkpoint_id


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("#0", "no row #0 in thread 't': it has 4 checkpoint"),
        ("#5", "no row #5"),
        ("#x", "not a row number"),
        ("step:9", "no checkpoint of step 9 in thread 't' (steps -1 to 3)"),
        ("step:x", "not a step"),
        (
            "step:2",
            "2 checkpoints of thread 't' are at step 2 (forks or subgraphs): "
            "#2 1f1f01d0-2ee9-6db9-8005-b8eb2903f8af step 2, "
            "#3 1f1f01d0-2ee4-6c63-8004-cdbca208dc00 step 2 in review",
        ),
        ("1f2", "no checkpoint of thread 't' has an id starting with '1f2'"),
        ("1f1f01d0-2e", "'1f1f01d0-2e' is the start of 4 checkpoint ids of thread 't': #1 "),
        ("", "empty checkpoint reference"),
    ],
)
def test_resolve_errors_name_the_candidates(ref: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        h.resolve(REFS, ref, where="thread 't'")
    assert message in str(info.value)


def test_short_ids_are_unique_prefixes() -> None:
    ids = [r.checkpoint_id for r in REFS]
    short = h.short_ids(ids)
    assert short == {
        ids[0]: "1f1f01d0-2ef",
        ids[1]: "1f1f01d0-2ee9",
        ids[2]: "1f1f01d0-2ee4",
        ids[3]: "1f1f01d0-2e9",
    }
    for cid, prefix in short.items():
        assert h.resolve(REFS, prefix) == cid
    assert h.short_ids(["abcdefghij"]) == {"abcdefghij": "abcdefgh"}


def test_resolve_a_step_in_one_namespace() -> None:
    assert h.resolve(REFS, "step:2", step_ns="") == REFS[1].checkpoint_id
    assert h.resolve(REFS, "step:2", step_ns="review:abc") == REFS[2].checkpoint_id
    with pytest.raises(ConfigError, match="no checkpoint of step 3"):
        h.resolve(REFS, "step:3", step_ns="review:abc")

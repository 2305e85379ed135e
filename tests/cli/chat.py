"""A long chat run by real LangGraph graphs, for the CLI's reading commands.

``run_chat`` leaves four threads in a checkpointer:

* ``chat``: a conversation of ``turns`` turns; every third turn goes
  through a ``review`` subgraph that interrupts and is resumed, then a
  ``Send`` fan-out; a fork (``update_state`` on an early checkpoint) that
  runs on, so the thread has two branches; the profile (a nested dict) and
  an edited message change along the way;
* ``waiting``: stopped at the review's interrupt;
* ``broken``: a node failed (its error is a pending write);
* ``done``: one finished turn;
* ``paused``: stopped before its first node (``interrupt_before``), nodes
  left to run and no interrupt saved, as a crashed run leaves a thread.

Everything is deterministic except checkpoint ids, task ids and times;
:func:`normalize` replaces those in a command's output, so golden texts
compare across runs and backends.
"""

from __future__ import annotations

import contextlib
import operator
import re
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

THREADS = ("broken", "chat", "done", "paused", "waiting")


class Review(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str
    parts: Annotated[list[str], operator.add]
    profile: dict[str, Any]
    fail: bool


def _reply(state: Chat) -> dict[str, Any]:
    if state.get("fail"):
        raise ValueError("the model is unreachable")
    n = len(state["messages"])
    last = state["messages"][-1].content
    out: dict[str, Any] = {
        "messages": [
            AIMessage(content=f"answer {n} to {last!r}: " + "lorem ipsum " * 6, id=f"a{n}")
        ]
    }
    if n % 4 == 1:
        out["profile"] = {"name": "Ada", "prefs": {"tone": "dry", "turns": n}}
    return out


def _ask(state: Review) -> dict[str, Any]:
    answer = interrupt({"question": "send this answer?", "messages": len(state["messages"])})
    return {"approved": str(answer)}


def _route(state: Chat) -> str:
    return "review" if len(state["messages"]) % 6 == 0 else END


def _fan_out(state: Chat) -> list[Send]:
    return [Send("part", {"item": f"part {i}"}) for i in range(2)]


def _part(arg: dict[str, Any]) -> dict[str, Any]:
    return {"parts": [arg["item"]]}


def build(checkpointer: Any) -> Any:
    review = StateGraph(Review)
    review.add_node("ask", _ask)
    review.add_edge(START, "ask")
    g = StateGraph(Chat)
    g.add_node("reply", _reply)
    g.add_node("review", review.compile())
    g.add_node("part", _part)
    g.add_edge(START, "reply")
    g.add_conditional_edges("reply", _route, ["review", END])
    g.add_conditional_edges("review", _fan_out, ["part"])
    g.add_edge("part", END)
    return g.compile(checkpointer=checkpointer)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _say(graph: Any, thread: str, n: int) -> None:
    cfg = config(thread)
    graph.invoke({"messages": [HumanMessage(content=f"question {n}", id=f"h{n}")]}, cfg)
    while graph.get_state(cfg).interrupts:
        graph.invoke(Command(resume="yes"), cfg)


def run_chat(checkpointer: Any, turns: int = 6) -> None:
    """Leave the four threads of the module docstring in ``checkpointer``."""
    graph = build(checkpointer)
    chat = config("chat")
    for n in range(1, turns + 1):
        _say(graph, "chat", n)
    # An edit of an earlier message (same id: add_messages replaces it).
    first = graph.get_state(chat).values["messages"][1]
    graph.update_state(
        chat, {"messages": [AIMessage(content="an edited answer", id=first.id)]}, as_node="reply"
    )
    # A fork from the second turn's answer, run on for one more turn.
    early = [s for s in graph.get_state_history(chat) if s.metadata["step"] == 4][-1]
    forked = graph.update_state(early.config, {"approved": "forked"}, as_node="reply")
    graph.invoke({"messages": [HumanMessage(content="a question on the fork", id="hf")]}, forked)
    while graph.get_state(chat).interrupts:
        graph.invoke(Command(resume="no"), chat)
    graph.invoke(
        {"messages": [HumanMessage(content="<script>alert(1)</script>", id="x")]},
        config("waiting"),
    )
    for n in range(1, 5):
        graph.invoke({"messages": [HumanMessage(content=f"w{n}", id=f"w{n}")]}, config("waiting"))
        if graph.get_state(config("waiting")).interrupts:
            break
    with contextlib.suppress(ValueError):
        graph.invoke(
            {"messages": [HumanMessage(content="hi", id="b1")], "fail": True}, config("broken")
        )
    graph.invoke({"messages": [HumanMessage(content="hi", id="d1")]}, config("done"))
    # Stopped before a node (interrupt_before): nodes left to run, no interrupt
    # saved, as after a crash.
    graph.invoke(
        {"messages": [HumanMessage(content="hi", id="p1")]},
        config("paused"),
        interrupt_before=["reply"],
    )


_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TS = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")
_VERSION = re.compile(r"\b\d{32}\.\d+\.\d+\b")
_HEX = re.compile(r"\b[0-9a-f]{32}\b")


def normalize(text: str, ids: list[str]) -> str:
    """``text`` with checkpoint ids as ``<#N>`` (N: the id's place in ``ids``, newest
    first, as ``tether history`` numbers rows), other UUIDs as ``<uuid>``, times as
    ``<ts>``, channel versions as ``<v>``, interrupt ids as ``<hex>``, rules as
    ``───``, and every run of spaces as one space (column widths follow the ids'
    lengths), trailing spaces kept visible as ``␠``."""
    from tether.history import short_ids

    short = short_ids(ids)
    for n, cid in enumerate(ids, 1):
        text = text.replace(cid, f"<#{n}>")
    for n, cid in enumerate(ids, 1):
        text = re.sub(re.escape(short[cid]) + r"(?![0-9a-f-])", f"<#{n}>", text)
    text = _UUID.sub("<uuid>", text)
    text = _TS.sub("<ts>", text)
    text = _VERSION.sub("<v>", text)
    text = _HEX.sub("<hex>", text)
    text = re.sub("─{3,}", "───", text)
    lines = []
    for line in text.split("\n"):
        stripped = line.rstrip(" ")
        line = stripped + "␠" * (len(line) - len(stripped))
        lines.append(re.sub(r"(?<=\S) {2,}(?=\S)", " ", line))
    return "\n".join(lines)

"""A real LangGraph program for the tests that put tether beside LangGraph's official saver.

``run_chat`` drives a checkpointer through a chat with ``add_messages`` long
enough for tether to store the history as an append-delta snapshot plus
tails, a ``Send`` fan-out, and a last turn that stops at an ``interrupt``
(pending writes left on the latest checkpoint). ``history`` is what a user
of the store sees: every thread's ``get_state_history`` and the raw tuples.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from psycopg.conninfo import make_conninfo

THREADS = ("chat-a", "chat-b")
TURNS = 12  # 24 messages of ~300 bytes: over the 4 KiB delta threshold


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    parts: Annotated[list[str], operator.add]
    approved: str


def _reply(state: State) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(content=f"reply {n} " + "x" * 300, id=f"ai-{n}")]}


def _fan_out(state: State) -> list[Send]:
    return [Send("part", {"item": f"p{len(state['messages'])}-{i}"}) for i in range(2)]


def _part(arg: dict[str, Any]) -> dict[str, Any]:
    return {"parts": [arg["item"]]}


def _approve(state: State) -> dict[str, Any]:
    if len(state["messages"]) < 2 * TURNS:
        return {}
    return {"approved": str(interrupt({"question": "approve?"}))}


def build(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(State)
    builder.add_node("reply", _reply)
    builder.add_node("part", _part)
    builder.add_node("approve", _approve)
    builder.add_edge(START, "reply")
    builder.add_conditional_edges("reply", _fan_out, ["part"])
    builder.add_edge("reply", "approve")
    return builder.compile(checkpointer=checkpointer)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _turn(thread: str, i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=f"{thread} turn {i} " + "y" * 300, id=f"h-{i}")]}


def run_chat(checkpointer: BaseCheckpointSaver[Any], threads: tuple[str, ...] = THREADS) -> None:
    """Leave finished turns and a pending interrupt on each thread."""
    graph = build(checkpointer)
    for thread in threads:
        for i in range(TURNS):
            graph.invoke({**_turn(thread, i), "parts": []}, config(thread))


async def arun_chat(
    checkpointer: BaseCheckpointSaver[Any], threads: tuple[str, ...] = THREADS
) -> None:
    graph = build(checkpointer)
    for thread in threads:
        for i in range(TURNS):
            await graph.ainvoke({**_turn(thread, i), "parts": []}, config(thread))


def resume(checkpointer: BaseCheckpointSaver[Any], thread: str, answer: str) -> Any:
    return build(checkpointer).invoke(Command(resume=answer), config(thread))


def history(checkpointer: BaseCheckpointSaver[Any], threads: tuple[str, ...] = THREADS) -> Any:
    graph = build(checkpointer)
    out: dict[str, Any] = {}
    for thread in threads:
        out[thread] = [
            (s.config, s.values, s.next, s.metadata, s.parent_config)
            for s in graph.get_state_history(config(thread))
        ]
    out["tuples"] = [
        (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
        for t in checkpointer.list(None)
    ]
    return out


def in_schema(dsn: str, schema: str) -> str:
    """A DSN whose connections use ``schema`` (LangGraph's saver names its tables unqualified)."""
    return make_conninfo(dsn, options=f"-c search_path={schema}")

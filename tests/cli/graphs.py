"""A small real LangGraph program for the import tests, and how to compare its stores.

``run_scenario`` drives one checkpointer through: a chat turn with
``add_messages``, a subgraph that interrupts and is resumed with
``Command(resume=...)``, a ``Send`` fan-out, an ``update_state`` fork, and a
second thread. ``histories`` reads back everything a user of the store sees:
``get_state_history`` of every thread, ``get_state(subgraphs=True)``, and the
raw tuples of ``list(None)``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict
from urllib.parse import quote

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from psycopg.conninfo import conninfo_to_dict

THREADS = ("chat-1", "chat-2")


@dataclass
class Order:
    """A user's own state type: outside every built-in allowlist."""

    item: str
    qty: int


class OrderState(TypedDict):
    order: Order


def order_graph(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """A one-node graph whose state holds an :class:`Order`."""
    builder = StateGraph(OrderState)
    builder.add_node("n", lambda s: {"order": Order(s["order"].item, s["order"].qty + 1)})
    builder.add_edge(START, "n")
    return builder.compile(checkpointer=checkpointer)


class SubState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    approved: str
    parts: Annotated[list[str], operator.add]


def _reply(state: State) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(content=f"reply {n}", id=f"ai-{n}")]}


def _ask(state: SubState) -> dict[str, Any]:
    answer = interrupt({"question": "approve?", "seen": len(state["messages"])})
    return {"approved": str(answer)}


def _note(state: SubState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"approved={state['approved']}", id="note")]}


def _fan_out(state: State) -> list[Send]:
    return [Send("part", {"item": f"p{i}"}) for i in range(3)]


def _part(arg: dict[str, Any]) -> dict[str, Any]:
    return {"parts": [arg["item"]]}


def build(checkpointer: BaseCheckpointSaver[Any]) -> Any:
    sub = StateGraph(SubState)
    sub.add_node("ask", _ask)
    sub.add_node("note", _note)
    sub.add_edge(START, "ask")
    sub.add_edge("ask", "note")
    builder = StateGraph(State)
    builder.add_node("reply", _reply)
    builder.add_node("review", sub.compile())
    builder.add_node("part", _part)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", "review")
    builder.add_conditional_edges("review", _fan_out, ["part"])
    return builder.compile(checkpointer=checkpointer)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def run_scenario(checkpointer: BaseCheckpointSaver[Any]) -> None:
    """Leave interrupted, resumed, forked and finished threads in ``checkpointer``."""
    graph = build(checkpointer)
    one, two = config(THREADS[0]), config(THREADS[1])
    graph.invoke({"messages": [HumanMessage(content="hi", id="h1")], "parts": []}, one)
    graph.invoke(Command(resume="yes"), one)
    graph.invoke({"messages": [HumanMessage(content="again", id="h2")]}, one)
    # A fork from an early checkpoint of thread one.
    history = list(graph.get_state_history(one))
    graph.update_state(history[-3].config, {"approved": "forked"})
    # Thread two stays interrupted inside the subgraph.
    graph.invoke({"messages": [HumanMessage(content="hello", id="h3")], "parts": []}, two)


async def arun_scenario(checkpointer: BaseCheckpointSaver[Any]) -> None:
    """:func:`run_scenario` through the async graph methods (for the official async savers)."""
    graph = build(checkpointer)
    one, two = config(THREADS[0]), config(THREADS[1])
    await graph.ainvoke({"messages": [HumanMessage(content="hi", id="h1")], "parts": []}, one)
    await graph.ainvoke(Command(resume="yes"), one)
    await graph.ainvoke({"messages": [HumanMessage(content="again", id="h2")]}, one)
    history = [s async for s in graph.aget_state_history(one)]
    await graph.aupdate_state(history[-3].config, {"approved": "forked"})
    await graph.ainvoke({"messages": [HumanMessage(content="hello", id="h3")], "parts": []}, two)


def histories(checkpointer: BaseCheckpointSaver[Any]) -> dict[str, Any]:
    """Everything the store answers, in comparable form (ids are kept: imports keep them)."""
    graph = build(checkpointer)
    out: dict[str, Any] = {}
    for thread in THREADS:
        out[thread] = [
            (s.config, s.values, s.next, s.metadata, s.parent_config, _tasks(s.tasks))
            for s in graph.get_state_history(config(thread))
        ]
        state = graph.get_state(config(thread), subgraphs=True)
        out[thread + "/state"] = _state(state)
    out["tuples"] = [
        (
            t.config,
            t.checkpoint,
            t.metadata,
            t.parent_config,
            t.pending_writes,  # in (task_path, task_id, idx) order in every saver
        )
        for t in checkpointer.list(None)
    ]
    return out


def _tasks(tasks: Any) -> list[Any]:
    return [(t.id, t.name, t.path, t.error, t.interrupts, t.result) for t in tasks]


def _clean(config: Any) -> Any:
    """A config without the runtime's private entries (the checkpointer object itself)."""
    if not config:
        return config
    conf = {k: v for k, v in config["configurable"].items() if not k.startswith("__")}
    return {**config, "configurable": conf}


def _state(state: Any) -> Any:
    return (
        _clean(state.config),
        state.values,
        state.next,
        state.metadata,
        state.parent_config,
        [
            (t.id, t.name, t.interrupts, _state(t.state) if t.state is not None else None)
            for t in state.tasks
        ],
    )


def as_url(dsn: str) -> str:
    """A DSN in URL form (what the CLI and the importer take)."""
    params = conninfo_to_dict(dsn)
    user = params.get("user", "postgres")
    auth = quote(user, safe="")
    if params.get("password"):
        auth += ":" + quote(params["password"], safe="")
    host = params.get("host", "127.0.0.1")
    port = params.get("port", "5432")
    return f"postgresql://{auth}@{host}:{port}/{params['dbname']}"

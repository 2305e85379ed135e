"""What the export tests compare: a store as LangGraph's own savers read it, through a graph.

``continue_on_tether`` carries the conversations of ``graphs.run_scenario``
on (a resume inside the subgraph, a new turn that interrupts again, a new
thread). ``answers`` reads back everything a user of a store sees:
``get_state_history`` of every thread and of every subgraph namespace (through
the graph, so LangGraph rebuilds tasks, interrupts and results from the pending
writes), ``get_state(subgraphs=True)``, and every raw checkpoint tuple.

The one normalization, in ``as_official``: a value tether read is passed once
through LangGraph's own serializer (``JsonPlusSerializer``), because that
serializer stores a tuple as a MessagePack array and reads it back as a list
(an ``__interrupt__`` write holds a tuple of ``Interrupt``): a graph that ran on
the official saver from the start reads the same list. Nothing else is
normalized; ``created_at`` (the checkpoint's ``ts``) and ids are compared as
they are.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from langgraph.types import Command
from psycopg.rows import dict_row

from .graphs import _clean, _state, build, config

ALL_THREADS = ("chat-1", "chat-2", "chat-3")

_OFFICIAL_SERDE = JsonPlusSerializer()


def continue_on_tether(checkpointer: Any) -> None:
    """Go on with the scenario's threads on another saver, and start a third."""
    graph = build(checkpointer)
    graph.invoke(Command(resume="ok"), config("chat-2"))  # resumed inside the subgraph
    graph.invoke({"messages": [HumanMessage(content="more", id="h4")]}, config("chat-1"))
    graph.invoke(
        {"messages": [HumanMessage(content="new", id="h5")], "parts": []}, config("chat-3")
    )


def as_official(value: Any) -> Any:
    """``value`` as LangGraph's serializer gives it back (see the module docstring)."""
    return _OFFICIAL_SERDE.loads_typed(_OFFICIAL_SERDE.dumps_typed(value))


def _snapshot(s: Any) -> tuple[Any, ...]:
    return (
        _clean(s.config),
        s.values,
        s.next,
        s.metadata,
        s.created_at,
        _clean(s.parent_config),
        [(t.id, t.name, t.path, t.error, t.interrupts, t.result) for t in s.tasks],
        s.interrupts,
    )


def namespaces(checkpointer: Any, thread: str) -> list[str]:
    return sorted(
        {t.config["configurable"]["checkpoint_ns"] for t in checkpointer.list(config(thread))}
    )


def answers(
    checkpointer: Any, threads: Sequence[str] = ALL_THREADS, *, tether_side: bool = False
) -> dict[str, Any]:
    """Everything the store answers through the graph and the saver (see the module docstring).

    ``tether_side``: the tuples are passed through :func:`as_official`.
    """
    graph = build(checkpointer)
    out: dict[str, Any] = {}
    for thread in threads:
        for ns in namespaces(checkpointer, thread):
            conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
            out[f"{thread}/{ns}"] = [_snapshot(s) for s in graph.get_state_history(conf)]
        out[f"{thread}/state"] = _state(graph.get_state(config(thread), subgraphs=True))
    tuples = []
    for t in checkpointer.list(None):
        checkpoint, writes = t.checkpoint, t.pending_writes
        if tether_side:
            checkpoint = as_official(checkpoint)
            writes = [(task, channel, as_official(v)) for task, channel, v in writes or ()]
        tuples.append((t.config, checkpoint, t.metadata, t.parent_config, writes))
    out["tuples"] = tuples
    return out


# --- the official stores, read as their savers read them --------------------------------


@contextlib.contextmanager
def official_reader(target: str) -> Iterator[Any]:
    """LangGraph's own saver on an export target (a file path, or ``url?schema=NAME``)."""
    if not target.startswith("postgresql://"):
        with OfficialSqliteSaver.from_conn_string(target) as saver:
            yield saver
        return
    url, _, schema = target.partition("?schema=")
    # The official saver names its tables without a schema: they are found
    # through the connection's search_path.
    with psycopg.connect(
        url,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema or 'public'}",
    ) as conn:
        yield OfficialPostgresSaver(conn)


_WRITE_KEYS = "thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel"
_CHECKPOINT_KEYS = "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id"


def official_rows(target: str) -> dict[str, list[tuple[Any, ...]]]:
    """The keys of every row of an official store: checkpoints and writes, sorted."""
    if not target.startswith("postgresql://"):
        with contextlib.closing(sqlite3.connect(Path(target))) as conn:
            return {
                "checkpoints": sorted(conn.execute(f"SELECT {_CHECKPOINT_KEYS} FROM checkpoints")),
                "writes": sorted(conn.execute(f"SELECT {_WRITE_KEYS} FROM writes")),
            }
    url, _, schema = target.partition("?schema=")
    schema = schema or "public"
    with psycopg.connect(url) as conn:
        return {
            "checkpoints": sorted(
                conn.execute(f"SELECT {_CHECKPOINT_KEYS} FROM {schema}.checkpoints").fetchall()
            ),
            "writes": sorted(
                conn.execute(f"SELECT {_WRITE_KEYS} FROM {schema}.checkpoint_writes").fetchall()
            ),
        }


def official_dump(target: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of an official store, values included, sorted (for idempotence)."""
    if not target.startswith("postgresql://"):
        with contextlib.closing(sqlite3.connect(Path(target))) as conn:
            return {
                table: sorted(conn.execute(f"SELECT * FROM {table}"))
                for table in ("checkpoints", "writes")
            }
    url, _, schema = target.partition("?schema=")
    schema = schema or "public"
    with psycopg.connect(url) as conn:
        return {
            table: sorted(
                (tuple(map(repr, row)) for row in conn.execute(f"SELECT * FROM {schema}.{table}")),
            )
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        }


def tether_rows(saver: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The same keys as :func:`official_rows`, read through a tether saver's API."""
    checkpoints, writes = [], []
    for t in saver.list(None):
        conf = t.config["configurable"]
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        key = (conf["thread_id"], conf["checkpoint_ns"], conf["checkpoint_id"])
        checkpoints.append((*key, parent))
        for w in saver.get_writes(t.config):
            writes.append((*key, w.task_id, w.task_path, w.idx, w.channel))
    return {"checkpoints": sorted(checkpoints), "writes": sorted(writes)}

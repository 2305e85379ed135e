"""tether's graph runtime: a compact Pregel loop whose runs are durable.

A :class:`StateGraph` is compiled into channels and nodes; the loop runs
*supersteps*: the nodes whose trigger channels changed run in parallel, their
writes are applied in a fixed order, and the result is saved as a checkpoint
through any tether saver. Because every step is a checkpoint, a run can be
resumed after a crash (finished tasks are not run again), stopped for a human
(:func:`interrupt`, :class:`Command`), rewound and forked
(``get_state_history``, ``update_state``). The API follows LangGraph's.

Modules, in reading order: ``_types`` (public markers), ``_channels``,
``_state`` (schemas and reducers), ``_graph`` (the builder), ``_algo`` (one
superstep without I/O), ``_persist`` (durability modes), ``_loop`` (the run
loop), ``_pregel`` (the compiled graph and its state API). The I/O of the last
three is in ``_persist_async``, ``_loop_async`` and ``_pregel_async``; their
``_sync`` twins are generated from them by ``tools/gen_sync.py``.
"""

from __future__ import annotations

from tether.graph._graph import StateGraph
from tether.graph._persist import Durability
from tether.graph._pregel import CompiledStateGraph
from tether.graph._state import add_messages
from tether.graph._types import (
    END,
    START,
    Command,
    GraphInterrupt,
    GraphRecursionError,
    Interrupt,
    RetryPolicy,
    Send,
    StateSnapshot,
    TaskInfo,
    interrupt,
)

__all__ = [
    "END",
    "START",
    "Command",
    "CompiledStateGraph",
    "Durability",
    "GraphInterrupt",
    "GraphRecursionError",
    "Interrupt",
    "RetryPolicy",
    "Send",
    "StateGraph",
    "StateSnapshot",
    "TaskInfo",
    "add_messages",
    "interrupt",
]

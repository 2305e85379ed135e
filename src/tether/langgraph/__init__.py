"""LangGraph drop-in checkpointers backed by tether (needs the ``langgraph`` extra).

Change one import and keep the rest of the program::

    # from langgraph.checkpoint.sqlite import SqliteSaver
    from tether.langgraph import SqliteSaver

    with SqliteSaver.from_conn_string("chat.db") as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke(inputs, {"configurable": {"thread_id": "1"}})
        await graph.ainvoke(inputs, {"configurable": {"thread_id": "2"}})  # same instance

Every class has the official saver's constructors, is a subclass of LangGraph's
``BaseCheckpointSaver`` and serves sync and async graphs alike (there is no
separate "async-only" half: ``AsyncSqliteSaver`` and ``AsyncPostgresSaver``
differ from their sync twins only in their async ``from_conn_string`` and
``setup``). Values are stored with tether's strict serializer, which allows
LangGraph's own value types (:data:`LANGGRAPH_ALLOWLIST`).

Types of your own in the state (a pydantic model, a dataclass) are read back
only when allowed, never constructed from whatever a stored row names. With
``LANGGRAPH_STRICT_MSGPACK=true`` LangGraph collects them from the graph's
schema and hands them to the saver (``with_allowlist``); otherwise list them
once, ``SqliteSaver.from_conn_string(path, allowlist=[("app.models",
"Order")])``. A type that is not allowed fails the read with a
:class:`~tether.errors.DecodeError` naming it, the thread and the channel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import langgraph.checkpoint.base  # noqa: F401 -- the drop-ins subclass its saver
except ImportError as exc:  # pragma: no cover -- exercised in a venv without the extra
    raise ImportError(
        "tether.langgraph needs LangGraph: pip install 'tether[langgraph]' (from a checkout: "
        f"pip install '.[langgraph]'; see README, Install) -- {exc}"
    ) from exc

from tether.langgraph._adapter import TetherLangGraphSaver
from tether.langgraph._memory import InMemorySaver
from tether.langgraph._serde import LANGGRAPH_ALLOWLIST, langgraph_serializer

if TYPE_CHECKING:
    from tether.langgraph._postgres import AsyncPostgresSaver, PostgresSaver
    from tether.langgraph._sqlite import AsyncSqliteSaver, SqliteSaver

__all__ = [
    "LANGGRAPH_ALLOWLIST",
    "AsyncPostgresSaver",
    "AsyncSqliteSaver",
    "InMemorySaver",
    "PostgresSaver",
    "SqliteSaver",
    "TetherLangGraphSaver",
    "langgraph_serializer",
]

_LAZY = {
    # Imported on first use: the Postgres one needs the `postgres` extra, and
    # a user of one backend should not pay the import of the other.
    "SqliteSaver": "tether.langgraph._sqlite",
    "AsyncSqliteSaver": "tether.langgraph._sqlite",
    "PostgresSaver": "tether.langgraph._postgres",
    "AsyncPostgresSaver": "tether.langgraph._postgres",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether.langgraph' has no attribute {name!r}")
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        hint = " `pip install 'tether[postgres]'`" if "Postgres" in name else ""
        raise ImportError(f"tether.langgraph.{name} is not available: {exc}{hint}") from exc
    value = getattr(mod, name)
    globals()[name] = value
    return value

"""tether's strict serializer with the types LangGraph itself stores built in (SPEC S3.4).

A LangGraph run puts its own value types into channels and task writes:
langchain-core messages (``add_messages`` state), ``Send`` packets (fan-out),
``Interrupt`` (human in the loop), ``Command``/``Overwrite`` pieces and, for
the functional API, store items. tether's serializer constructs nothing that
is not allowlisted, so these have to be listed here once, or every graph with
a message list would fail on its first read.

The list mirrors the non-stdlib part of LangGraph's own
``SAFE_MSGPACK_TYPES`` (``langgraph/checkpoint/serde/_msgpack.py``); the stdlib
types there (datetime, UUID, Decimal, sets, paths, ...) are safe built-ins of
tether's serializer already. The graph's schema types (a user's pydantic
state model, say) reach the serializer through ``with_allowlist`` when
LangGraph compiles a graph in strict mode, or through ``allowlist=`` here.
"""

from __future__ import annotations

from collections.abc import Collection

from tether.serde import MsgpackSerializer
from tether.serde.base import SerializerProtocol

__all__ = ["LANGGRAPH_ALLOWLIST", "langgraph_serializer"]

_MESSAGES = {
    "base": ("BaseMessage", "BaseMessageChunk"),
    "human": ("HumanMessage", "HumanMessageChunk"),
    "ai": ("AIMessage", "AIMessageChunk"),
    "system": ("SystemMessage", "SystemMessageChunk"),
    "chat": ("ChatMessage", "ChatMessageChunk"),
    "tool": ("ToolMessage", "ToolMessageChunk"),
    "function": ("FunctionMessage", "FunctionMessageChunk"),
    "modifier": ("RemoveMessage",),
}

#: (module, name) pairs every tether LangGraph saver may construct on read.
LANGGRAPH_ALLOWLIST: frozenset[tuple[str, str]] = frozenset(
    {
        *(
            (f"langchain_core.messages.{module}", name)
            for module, names in _MESSAGES.items()
            for name in names
        ),
        ("langchain_core.documents.base", "Document"),
        ("langgraph.types", "Send"),
        ("langgraph.types", "TimeoutPolicy"),
        ("langgraph.types", "Interrupt"),
        ("langgraph.types", "Command"),
        ("langgraph.types", "StateSnapshot"),
        ("langgraph.types", "PregelTask"),
        ("langgraph.types", "Overwrite"),
        ("langgraph.store.base", "Item"),
        ("langgraph.store.base", "GetOp"),
    }
)


def langgraph_serializer(
    allowlist: Collection[tuple[str, ...]] = (),
) -> SerializerProtocol:
    """tether's strict :class:`~tether.serde.MsgpackSerializer` with LangGraph's types allowed.

    Args:
        allowlist: extra ``(module, name)`` types the graph stores (its schema
            classes), on top of :data:`LANGGRAPH_ALLOWLIST`.
    """
    return MsgpackSerializer(allowlist=LANGGRAPH_ALLOWLIST | {tuple(x) for x in allowlist})

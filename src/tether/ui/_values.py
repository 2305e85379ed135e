"""Decoded values as the viewer shows them: a tree of :class:`Node`, with no I/O and no HTML.

A stored value can be anything the serializer builds: plain JSON-like data,
LangChain messages, pydantic models, dataclasses, enums, datetimes, bytes.
:func:`to_node` turns one into a bounded tree the templates walk (every text
in it is escaped by Jinja2's autoescape, never marked safe): a dict or object
is a list of keyed children, a scalar a line of text, a list of chat messages
a conversation. Big values are cut (``MAX_ITEMS`` children per container,
``MAX_DEPTH`` levels) with a note of what was left out, so one huge channel
cannot make a page of megabytes.

A value the store's serializer refuses (a class not allowlisted, damaged
bytes) is read as an :class:`Undecodable` placeholder by
:class:`LenientSerializer`, so the page shows its class and how to allow it
instead of failing.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.errors import DecodeError
from tether.history import _content_text as content_text
from tether.history import _fields as fields_of
from tether.history import is_message
from tether.serde.base import SerializerProtocol

__all__ = [
    "LenientSerializer",
    "Message",
    "Node",
    "Undecodable",
    "as_plain_json",
    "to_node",
]

#: Children shown per dict, list or object; the rest are counted, not shown.
MAX_ITEMS = 500
#: Levels shown; deeper values are summarized by their type.
MAX_DEPTH = 24
#: A string longer than this is folded (its start shown, the whole on demand).
FOLD_CHARS = 400

_ROLES = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
    "chat": "other",
    "remove": "other",
}


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A stored value the serializer would not build, in place of the value.

    ``type_name`` is the refused class (``module.Name``) when the serializer
    named one; ``reason`` its message.
    """

    type_name: str | None
    reason: str

    @property
    def hint(self) -> str:
        """What to do about it, for the page."""
        if self.type_name:
            module, _, name = self.type_name.rpartition(".")
            allow = f"{module}:{name}" if module else name
            return (
                f"this class is not in the allowlist; if you trust this store, restart with "
                f"`tether ui STORE --allow {allow}` (or TETHER_ALLOWLIST={allow})"
            )
        return "the stored bytes could not be read; `tether show` prints the same error"


class LenientSerializer:
    """The store's serializer for reading only: a value it refuses becomes :class:`Undecodable`.

    Only ``loads_typed`` differs; what is written (a fork's edited values) goes
    through the store's own serializer, untouched by this class.
    """

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        try:
            return self.inner.loads_typed(data)
        except DecodeError as exc:
            return Undecodable(exc.type_name, str(exc))


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message of a conversation view."""

    role: str  # user, assistant, system, tool, other: the CSS class of its bubble
    label: str  # as stored: "human", "ai", "tool (search)", ...
    text: str  # the content as text (non-text content blocks as ``[type]``)
    parts: Node | None  # content that is not one string (content blocks), as a tree
    tool_calls: Node | None
    details: Node  # every field of the message


@dataclass(frozen=True, slots=True)
class Node:
    """One value in the tree the templates render.

    Attributes:
        kind: ``dict``, ``list``, ``object`` (children keyed by field), ``str``,
            ``num``, ``bool``, ``null``, ``text`` (another scalar shown as
            text: a datetime, an enum member, bytes), ``messages`` (a
            conversation), ``undecodable``, ``cut`` (too deep to show).
        label: the type as shown (``dict · 3 keys``, ``AIMessage``).
        text: a scalar's text (a string as it is, the rest as the view shows it).
        items: the children, each with its key (list indexes as ``[0]``).
        more: children left out beyond :data:`MAX_ITEMS`.
        messages: the conversation of a ``messages`` node.
        hint: what to do about an ``undecodable`` one.
    """

    kind: str
    label: str = ""
    text: str = ""
    items: tuple[tuple[str, Node], ...] = ()
    more: int = 0
    messages: tuple[Message, ...] = ()
    hint: str = ""
    folded: bool = field(default=False)


def _class_name(value: Any) -> str:
    return type(value).__qualname__


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _children(
    pairs: Sequence[tuple[str, Any]], depth: int
) -> tuple[tuple[tuple[str, Node], ...], int]:
    shown = pairs[:MAX_ITEMS]
    return tuple((k, to_node(v, depth + 1)) for k, v in shown), len(pairs) - len(shown)


def to_node(value: Any, depth: int = 0) -> Node:
    """The tree of ``value`` (see :class:`Node`)."""
    if depth > MAX_DEPTH:
        return Node("cut", label=_class_name(value), text="nested too deep to show here")
    if value is None:
        return Node("null", text="null")
    if isinstance(value, bool):
        return Node("bool", text="true" if value else "false")
    if isinstance(value, int | float) and not isinstance(value, enum.Enum):
        return Node("num", text=repr(value) if isinstance(value, float) else str(value))
    if isinstance(value, str) and not isinstance(value, enum.Enum):
        return Node("str", text=value, folded=len(value) > FOLD_CHARS)
    if isinstance(value, Undecodable):
        return Node(
            "undecodable", label=value.type_name or "value", text=value.reason, hint=value.hint
        )
    if isinstance(value, enum.Enum):
        return Node("text", label=_class_name(value), text=f"{_class_name(value)}.{value.name}")
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta):
        return Node(
            "text",
            label=_class_name(value),
            text=value.isoformat() if not isinstance(value, datetime.timedelta) else str(value),
        )
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return Node("text", label=_class_name(value), text=str(value))
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        text = raw[:64].hex(" ") + (" ..." if len(raw) > 64 else "")
        return Node(
            "text", label=f"{_class_name(value)} · {_count(len(raw), 'byte', 'bytes')}", text=text
        )
    if isinstance(value, Mapping):
        items, more = _children([(str(k), v) for k, v in value.items()], depth)
        return Node(
            "dict", label=f"dict · {_count(len(value), 'key', 'keys')}", items=items, more=more
        )
    if isinstance(value, list | tuple | set | frozenset) and fields_of(value) is None:
        seq = list(value) if not isinstance(value, set | frozenset) else sorted(value, key=repr)
        conversation = _conversation(seq, depth)
        if conversation is not None:
            return conversation
        items, more = _children([(f"[{i}]", v) for i, v in enumerate(seq)], depth)
        label = f"{_class_name(value)} · {_count(len(seq), 'item', 'items')}"
        return Node("list", label=label, items=items, more=more)
    fields = fields_of(value)
    if fields is not None:
        items, more = _children(list(fields.items()), depth)
        return Node("object", label=_class_name(value), items=items, more=more)
    return Node("text", label=_class_name(value), text=repr(value))


# --- conversations ------------------------------------------------------------------


def _conversation(seq: list[Any], depth: int) -> Node | None:
    """A ``messages`` node when every element of a non-empty list is a chat message.

    A long conversation shows its last :data:`MAX_ITEMS` messages (``more``
    counts the earlier ones): the end is where a thread stands.
    """
    shown = seq[-MAX_ITEMS:]
    if not seq or not all(is_message(v) for v in shown):
        return None
    messages = []
    for value in shown:
        fields = dict(value) if isinstance(value, Mapping) else (fields_of(value) or {})
        kind = str(fields.get("role") or fields.get("type") or "message")
        name = fields.get("name")
        content = fields.get("content")
        calls = fields.get("tool_calls")
        messages.append(
            Message(
                role=_ROLES.get(kind, "other"),
                label=f"{kind} ({name})" if isinstance(name, str) and name else kind,
                text=content_text(content),
                parts=None if isinstance(content, str) else to_node(content, depth + 2),
                tool_calls=to_node(calls, depth + 2) if calls else None,
                details=to_node(value, depth + 1),
            )
        )
    return Node(
        "messages",
        label=_count(len(seq), "message", "messages"),
        messages=tuple(messages),
        more=len(seq) - len(messages),
    )


# --- editing ------------------------------------------------------------------------


def as_plain_json(value: Any) -> str | None:
    """``value`` as indented JSON when JSON holds it exactly, else ``None``.

    A fork edits channels as JSON text; only a value that reads back equal
    and of the same types (dicts with string keys, lists, strings, finite
    numbers, booleans, null) can be edited that way. A message list, a model
    or a tuple would come back as plain dicts and lists, so it is not offered.
    """
    if not _plain(value):
        return None
    return json.dumps(value, indent=2, ensure_ascii=False)


def _plain(value: Any, depth: int = 0) -> bool:
    if depth > MAX_DEPTH:
        return False
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False

"""What a thread's history looks like to a person: pure functions, no I/O.

The ``tether`` CLI (``history``, ``show``, ``diff``, ``threads``) and the
``tether ui`` web viewer read a thread through the savers and then ask this
module what to show, so both say the same thing about the same checkpoint:

* :func:`is_internal`: channels the runtime keeps for itself (``branch:to:*``,
  ``__start__``, ``__pregel_tasks``, ...), hidden from a person by default;
* :func:`next_nodes`: the nodes the next superstep would run, derived from a
  checkpoint's versions as LangGraph derives them;
* :func:`status`: ``idle``, ``interrupted``, ``pending`` or ``error``, from a
  thread's latest checkpoint and its pending writes;
* :func:`diff`: what changed between two checkpoints' values, per channel,
  element-wise in lists and by path in mappings (:class:`Change`);
* :func:`preview` and :func:`summarize`: one-line texts of a value and of a
  list of changes (messages as ``role: text``);
* :func:`tree`: the fork tree of a thread's checkpoints by parent id
  (:class:`TreeRow`), for text and HTML alike;
* :func:`resolve` and :func:`short_ids`: checkpoint references as a person
  types them (a unique id prefix, ``#N``, ``step:S``);
* :func:`jsonable`: a JSON-ready view of any stored value.

Nothing here imports LangGraph or LangChain: messages, ``Send`` packets and
``Interrupt`` objects are recognised by their attributes, so values read by
tether's own runtime and by the LangGraph drop-ins are shown alike.

Why one long module: it is the one vocabulary two front ends share (the
CLI's text and JSON, the web viewer's HTML); each function is short and
they lean on each other (a diff's summary is previews, a status is next
nodes and interrupt values), so one import gives a front end all of it.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import enum
import math
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from tether._status import CONTROL_WRITES, START, State, next_nodes, state_of
from tether._status import _field as _field
from tether.checkpoint import ERROR, INTERRUPT, CheckpointTuple
from tether.errors import ConfigError

__all__ = [
    "Change",
    "Ref",
    "State",
    "Status",
    "TreeRow",
    "diff",
    "error_text",
    "is_internal",
    "is_message",
    "jsonable",
    "next_nodes",
    "preview",
    "resolve",
    "short_ids",
    "status",
    "summarize",
    "tree",
]

#: Dunder channels that hold the user's own state: a graph whose state is one
#: value (``StateGraph(int)``) keeps it in ``__root__``; an ``@entrypoint``'s
#: return value is ``__end__``.
_USER_DUNDERS = frozenset({"__root__", "__end__"})
#: Channel-name prefixes of the runtime's trigger channels: LangGraph 1.x and
#: tether's runtime write ``branch:to:NODE`` and ``join:A+B:NODE``; LangGraph
#: before 0.3 wrote ``start:NODE`` and ``branch:NODE:COND:TARGET``.
_INTERNAL_PREFIXES = ("branch:", "join:", "start:")


# --- channels -----------------------------------------------------------------------


def is_internal(channel: str) -> bool:
    """Whether ``channel`` is one the runtime keeps for itself, not part of the user's state.

    Internal: the trigger channels (``branch:to:NODE``, ``join:A+B:NODE``,
    and LangGraph 0.2's ``start:NODE``, ``branch:...``) and every name that
    starts with ``__`` (``__start__``, ``__pregel_tasks``, ``__interrupt__``,
    ``__resume__``, ``__error__``, ``__previous__``, ...), except
    ``__root__`` and ``__end__``, which hold the user's state in a graph whose
    state is a single value and the return value of a functional
    ``@entrypoint``.
    """
    if channel.startswith("__"):
        return channel not in _USER_DUNDERS
    return channel.startswith(_INTERNAL_PREFIXES)


# --- status ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Status:
    """Where a thread stands, read from its latest checkpoint (see :func:`status`).

    Attributes:
        state: ``idle`` (finished: nothing to run), ``interrupted`` (a task
            waits for ``Command(resume=...)``), ``pending`` (nodes left to
            run: a run in progress, or one that crashed), ``error`` (a task
            failed; its error is saved).
        next: the nodes the next superstep would run (:func:`next_nodes`).
        interrupts: the values the waiting ``interrupt()`` calls passed.
        errors: the saved errors of failed tasks (:func:`error_text` reads one).
    """

    state: State
    next: tuple[str, ...] = ()
    interrupts: tuple[Any, ...] = ()
    errors: tuple[Any, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"state": ..., "next": [...], "interrupts": [...], "errors": [...]}``.

        Interrupts as their values (:func:`jsonable`), errors as text.
        """
        return {
            "state": self.state,
            "next": list(self.next),
            "interrupts": [jsonable(v) for v in self.interrupts],
            "errors": [error_text(e) for e in self.errors],
        }


def status(tup: CheckpointTuple) -> Status:
    """The :class:`Status` of a thread whose latest checkpoint (with its writes) is ``tup``.

    ``error`` when a pending write to ``__error__`` is saved; ``interrupted``
    when a task's ``__interrupt__`` write is saved and that task has written
    nothing else since (a resumed task that finished writes its values beside
    the interrupt); otherwise ``pending`` when :func:`next_nodes` names nodes,
    ``idle`` when it names none. Works for any checkpoint, not only the
    latest: an older one is ``pending`` (its next step ran later).
    """
    writes = tup.pending_writes or ()
    errors = tuple(value for _, channel, value in writes if channel == ERROR)
    wrote = {task for task, channel, _ in writes if channel not in CONTROL_WRITES}
    interrupts = tuple(
        _interrupt_value(item)
        for task, channel, value in writes
        if channel == INTERRUPT and task not in wrote
        for item in (value if isinstance(value, list | tuple) else (value,))
    )
    nxt = next_nodes(tup.checkpoint)
    state = state_of(((task, channel) for task, channel, _ in writes), bool(nxt))
    if state == "error":
        return Status("error", nxt, interrupts, errors)
    if state == "interrupted":
        return Status("interrupted", nxt, interrupts)
    return Status(state, nxt)


def _interrupt_value(item: Any) -> Any:
    """The value an ``interrupt()`` call passed (LangGraph's and tether's ``Interrupt``)."""
    if isinstance(item, Mapping) and "value" in item:
        return item["value"]
    return getattr(item, "value", item)


def error_text(value: Any) -> str:
    """A saved ``__error__`` write as one line: ``ValueError: no price for item 3``.

    tether's runtime saves ``{"type": ..., "message": ...}``, LangGraph the
    exception's ``repr`` (``"ValueError('no price')"``) or the exception.
    """
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    if isinstance(value, Mapping) and "message" in value:
        kind = value.get("type")
        return f"{kind}: {value['message']}" if kind else str(value["message"])
    text = str(value)
    match = _EXC_REPR.fullmatch(text)
    if match:
        try:
            message = ast.literal_eval(match[2])
        except (ValueError, SyntaxError):
            return text
        if isinstance(message, str):
            return f"{match[1]}: {message}"
    return text


#: ``ValueError('text')``: an exception's repr with one string argument.
_EXC_REPR = re.compile(r"([A-Za-z_][\w.]*)\((\'.*\'|\".*\")\)", re.DOTALL)


# --- JSON view --------------------------------------------------------------------------

_MAX_DEPTH = 64


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of a stored value (``json.dumps`` takes it as it is).

    Mappings keep their keys as text, sequences and sets become lists;
    pydantic models (LangChain messages) become their ``model_dump`` with a
    ``type`` key (a message's own ``type``: ``human``, ``ai``, ...), dataclasses
    and named tuples their fields with ``type`` their class name, exceptions
    ``{"type", "message"}``, bytes ``{"bytes": size}``; dates, UUIDs and
    decimals their text; a non-finite float its ``repr``; anything else its
    ``repr``. Nesting deeper than 64 levels is cut with its ``repr``.
    """
    return _jsonable(value, 0)


def _jsonable(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value if type(value) in (bool, int, str) or value is None else _plain(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth > _MAX_DEPTH:
        return repr(value)
    if isinstance(value, enum.Enum):
        return _jsonable(value.value, depth + 1)
    if isinstance(value, Mapping):
        return {_key(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"bytes": len(value)}
    if isinstance(value, datetime.date | datetime.time | uuid.UUID | Decimal):
        return value.isoformat() if hasattr(value, "isoformat") else str(value)
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": str(value)}
    fields = _fields(value)
    if fields is not None:
        out = {k: _jsonable(v, depth + 1) for k, v in fields.items()}
        if "type" not in out:
            out = {"type": type(value).__name__, **out}
        return out
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        items = [_jsonable(v, depth + 1) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    return repr(value)


def _plain(value: Any) -> Any:
    """A subclass of bool, int or str (an IntEnum, a str label type) as the base value."""
    for base in (bool, int, str):
        if isinstance(value, base):
            return base(value)
    return value  # pragma: no cover - only called for those three


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(_jsonable(key, _MAX_DEPTH))


def _fields(value: Any) -> dict[str, Any] | None:
    """The fields of a model-like value (pydantic, dataclass, named tuple, ``Send``), or None."""
    if isinstance(value, type):
        return None
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, Mapping):  # pydantic v2: shallow, so nested values stay objects
        return {name: getattr(value, name, None) for name in fields}
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
    asdict = getattr(value, "_asdict", None)
    if isinstance(value, tuple) and callable(asdict):
        return dict(asdict())
    if type(value).__name__ == "Send" and hasattr(value, "node") and hasattr(value, "arg"):
        return {"node": value.node, "arg": value.arg}
    dump = getattr(value, "dict", None) if hasattr(value, "__fields__") else None
    if callable(dump):  # pydantic v1
        try:
            result = dump()
        except Exception:
            return None
        return dict(result) if isinstance(result, Mapping) else None
    return None


# --- diff -----------------------------------------------------------------------------

ChangeKind = Literal["added", "removed", "changed", "appended", "truncated"]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two checkpoints' values (see :func:`diff`).

    Attributes:
        kind: ``added`` / ``removed`` (a channel or a key of a mapping),
            ``changed`` (a value replaced), ``appended`` (items added at the
            end of a list whose earlier items are the same), ``truncated``
            (items removed from the end of a list).
        channel: the channel the change is in.
        path: where: the channel, then ``.key`` for a mapping key or a
            model's field (``["key"]`` when the key is not an identifier)
            and ``[i]`` for a list item: ``messages[3].content``, ``a.b``.
            For ``appended`` and ``truncated``, the list itself.
        old: the value before (``removed``, ``changed``) or the items
            removed (``truncated``); ``None`` otherwise.
        new: the value after (``added``, ``changed``) or the items appended
            (``appended``); ``None`` otherwise.
        index: ``appended``/``truncated``: the index of the first item
            added or removed; ``None`` otherwise.
    """

    kind: ChangeKind
    channel: str
    path: str
    old: Any = None
    new: Any = None
    index: int | None = None

    @property
    def count(self) -> int | None:
        """``appended``/``truncated``: how many items; ``None`` otherwise."""
        if self.kind == "appended":
            return len(self.new)
        if self.kind == "truncated":
            return len(self.old)
        return None

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape: every key always present, ``null`` where not applicable.

        ``{"kind", "channel", "path", "old", "new", "index", "count"}``, values
        as :func:`jsonable` gives them.
        """
        return {
            "kind": self.kind,
            "channel": self.channel,
            "path": self.path,
            "old": jsonable(self.old),
            "new": jsonable(self.new),
            "index": self.index,
            "count": self.count,
        }

    def describe(self, width: int = 60) -> str:
        """One line of about ``width`` characters.

        ``messages: appended 1 item: ai: reply 2``, ``approved: 'no' -> 'yes'``.
        """
        room = max(width - len(self.path) - 2, 20)
        if self.kind == "appended":
            n = len(self.new)
            head = f"appended {_items(n)}" + (": " if n == 1 else ", last ")
            return f"{self.path}: {head}{preview(self.new[-1], room - len(head))}"
        if self.kind == "truncated":
            return f"{self.path}: removed the last {_items(len(self.old))}"
        if self.kind == "added":
            return f"{self.path}: added {preview(self.new, room - 6)}"
        if self.kind == "removed":
            return f"{self.path}: removed (was {preview(self.old, room - 13)})"
        old = preview(self.old, max(room // 3, 12))
        return f"{self.path}: {old} -> {preview(self.new, max(room - len(old) - 4, 12))}"


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def diff(
    a_values: Mapping[str, Any],
    b_values: Mapping[str, Any],
    *,
    internal: bool = False,
) -> list[Change]:
    """What changed from ``a_values`` to ``b_values`` (two checkpoints' ``channel_values``).

    Channels are compared in name order: one only in ``b`` is ``added``,
    one only in ``a`` is ``removed``. Values of a channel in both are
    compared as a person reads them: lists item by item (a tail appended to
    an unchanged list is one ``appended`` change, not one change per item;
    a shortened list one ``truncated``), mappings, pydantic models (LangChain
    messages), dataclasses and named tuples key by key, so a message whose
    text was edited is ``messages[3].content``. Values of different types,
    and anything else unequal, are ``changed`` whole (``1`` and ``True``
    differ; so do ``1`` and ``1.0``).

    The runtime's own channels (:func:`is_internal`) are left out, except
    ``__start__`` when ``b`` has it and ``a`` had not the same: the input a
    run was given, held by an ``input`` checkpoint.

    Args:
        internal: also compare the runtime's channels.
    """
    out: list[Change] = []
    for channel in sorted(set(a_values) | set(b_values)):
        if not internal and is_internal(channel) and not (channel == START and channel in b_values):
            continue
        if channel not in a_values:
            out.append(Change("added", channel, channel, new=b_values[channel]))
        elif channel not in b_values:
            out.append(Change("removed", channel, channel, old=a_values[channel]))
        else:
            _diff_value(out, channel, channel, a_values[channel], b_values[channel], 0)
    return out


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _diff_value(out: list[Change], channel: str, path: str, a: Any, b: Any, depth: int) -> None:
    if _same(a, b):
        return
    if depth < _MAX_DEPTH and type(a) is type(b):
        if isinstance(a, list | tuple) and not hasattr(a, "_asdict"):
            _diff_list(out, channel, path, a, b, depth)
            return
        fa = dict(a) if isinstance(a, Mapping) else _fields(a)
        fb = dict(b) if isinstance(b, Mapping) else _fields(b)
        if fa is not None and fb is not None:
            for key in _ordered_keys(fa, fb):
                sub = _subpath(path, key)
                if key not in fa:
                    out.append(Change("added", channel, sub, new=fb[key]))
                elif key not in fb:
                    out.append(Change("removed", channel, sub, old=fa[key]))
                else:
                    _diff_value(out, channel, sub, fa[key], fb[key], depth + 1)
            return
    out.append(Change("changed", channel, path, old=a, new=b))


def _ordered_keys(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> list[Any]:
    keys = list(a)
    keys += [k for k in b if k not in a]
    return keys


def _diff_list(
    out: list[Change], channel: str, path: str, a: Sequence[Any], b: Sequence[Any], depth: int
) -> None:
    common = min(len(a), len(b))
    # The common case, a list that only grew: one comparison of the prefix
    # (at C speed, identical items by identity) instead of a path per item,
    # which made a 1,000-message thread's tree quadratic in Python.
    if not _same(list(a[:common]), list(b[:common])):
        for i in range(common):
            _diff_value(out, channel, f"{path}[{i}]", a[i], b[i], depth + 1)
    if len(b) > common:
        out.append(Change("appended", channel, path, new=list(b[common:]), index=common))
    elif len(a) > common:
        out.append(Change("truncated", channel, path, old=list(a[common:]), index=common))


def _subpath(path: str, key: Any) -> str:
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{key!r}]"


def summarize(changes: Sequence[Change], width: int = 80) -> str:
    """The changes as one line of at most ``width`` characters, for a history row.

    ``messages +1 ai: reply 2; approved 'yes'``: an appended list as ``+N``
    and its last new item, anything else as its path and new value (``-path``
    when removed). An input checkpoint's ``__start__`` (the input the run was
    given) reads ``input {...}``.
    """
    parts = []
    for ch in changes:
        if ch.kind == "appended":
            parts.append(f"{ch.path} +{len(ch.new)} {preview(ch.new[-1], width)}")
        elif ch.kind == "truncated":
            parts.append(f"{ch.path} -{len(ch.old)}")
        elif ch.kind == "removed":
            parts.append(f"-{ch.path}")
        elif ch.path == START:
            parts.append(f"input {preview(ch.new, width)}")
        else:
            parts.append(f"{ch.path} {preview(ch.new, width)}")
    return _cut("; ".join(parts), width)


# --- previews --------------------------------------------------------------------------


def is_message(value: Any) -> bool:
    """Whether ``value`` is a chat message: a LangChain message, or a mapping with
    ``role`` (or ``type``) and ``content``."""
    if isinstance(value, Mapping):
        return "content" in value and isinstance(value.get("role", value.get("type")), str)
    return isinstance(getattr(value, "type", None), str) and hasattr(value, "content")


def _message_text(value: Any, width: int) -> str:
    role = _field(value, "role") if isinstance(value, Mapping) else None
    role = role or _field(value, "type") or "message"
    if role == "tool" and _field(value, "name"):
        role = f"tool {_field(value, 'name')}"
    text = _content_text(_field(value, "content"))
    calls = _field(value, "tool_calls") or ()
    if calls and isinstance(calls, list | tuple):
        names = ", ".join(str(_field(c, "name") or "?") + "()" for c in calls)
        text = f"{text} -> {names}" if text else f"-> {names}"
    return _cut(f"{role}: {_flat(text)}", width)


def _content_text(content: Any) -> str:
    """A message's content as text: content blocks joined, non-text blocks as ``[type]``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                text = block.get("text")
                parts.append(text if isinstance(text, str) else f"[{block.get('type', '?')}]")
            else:
                parts.append(f"[{type(block).__name__}]")
        return " ".join(parts)
    return "" if content is None else str(content)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, width: int) -> str:
    width = max(width, 1)
    return text if len(text) <= width else text[: width - 1] + "…"


def preview(value: Any, width: int = 60) -> str:
    """``value`` as one line of at most ``width`` characters (``…`` marks a cut).

    Messages read ``role: text`` (LangChain messages and ``{"role", "content"}``
    mappings alike; a tool call as ``-> name()``); strings are quoted; lists
    ``[a, b, …]``; mappings, models and dataclasses ``{key: value, …}`` (a
    model with its class name first); whitespace runs become one space.
    Rendering stops once ``width`` is reached, so a long list costs little.
    """
    return _cut(_render(value, width + 1, 0), width)


def _render(value: Any, budget: int, depth: int) -> str:
    """Text of ``value``, stopping a little past ``budget`` characters."""
    if isinstance(value, str):
        return _flat(repr(value[: budget + 2]))
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if depth > 8:
        return "…"
    if is_message(value):
        return _message_text(value, budget)
    if isinstance(value, Mapping):
        return "{" + _join(((f"{_key(k)}: ", v) for k, v in value.items()), budget, depth) + "}"
    fields = _fields(value)
    if fields is not None:
        inner = _join(((f"{k}=", v) for k, v in fields.items()), budget, depth)
        return f"{type(value).__name__}({inner})"
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + _join((("", v) for v in value), budget, depth) + "]"
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return _flat(repr(value))[: budget + 2]


def _join(items: Iterable[tuple[str, Any]], budget: int, depth: int) -> str:
    parts: list[str] = []
    used = 0
    for label, value in items:
        if used > budget:
            parts.append("…")
            break
        text = label + _render(value, budget - used, depth + 1)
        parts.append(text)
        used += len(text) + 2
    return ", ".join(parts)


# --- the fork tree ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One checkpoint's place in a thread's fork tree (see :func:`tree`).

    Attributes:
        index: the position of the checkpoint in the rows given to :func:`tree`.
        checkpoint_id: its id.
        parent_id: its parent's id (``None`` for a root, or when the parent is
            not among the rows).
        depth: how many forks it is below a root's line (0: on a root's line).
        guides: for each level ``0 .. depth-1``, whether the branch at that
            level has later siblings (a text drawing continues its ``│``).
        branch: the first checkpoint of a branch (a child of a fork: its
            parent has more than one child).
        last: for ``branch`` rows, the parent's last child.
        children: how many children it has (more than one: a fork).
    """

    index: int
    checkpoint_id: str
    parent_id: str | None
    depth: int
    guides: tuple[bool, ...] = field(default=())
    branch: bool = False
    last: bool = False
    children: int = 0

    @property
    def prefix(self) -> str:
        """The text drawing in front of the row (``│  ├─ ``), three characters per level."""
        if self.depth == 0:
            return ""
        head = "".join("│  " if g else "   " for g in self.guides[:-1])
        if self.branch:
            return head + ("└─ " if self.last else "├─ ")
        return head + ("│  " if self.guides[-1] else "   ")


def tree(rows: Iterable[tuple[str, str | None]]) -> list[TreeRow]:
    """Lay out checkpoints ``(id, parent_id)`` as a fork tree, oldest first.

    Depth-first from the roots (checkpoints whose parent is ``None`` or not
    among the rows: a pruned or paged history, each namespace's first
    checkpoint), children in id order, which is creation order. A checkpoint
    with one child continues on its line at the same depth, so a history
    without forks is a flat list; the children of a fork each start a branch
    one level deeper. Rows can be drawn as text with :attr:`TreeRow.prefix`
    or as nested HTML lists from ``depth`` and ``branch``.
    """
    items = list(rows)
    known = {cid for cid, _ in items}
    kids: dict[str | None, list[int]] = {}
    for i, (_, parent) in enumerate(items):
        kids.setdefault(parent if parent in known else None, []).append(i)
    for members in kids.values():
        members.sort(key=lambda i: items[i][0])
    out: list[TreeRow] = []
    # An explicit stack: a history is a chain thousands of checkpoints long.
    # Entries: (index, depth, guides, branch, last).
    stack: list[tuple[int, int, tuple[bool, ...], bool, bool]] = [
        (i, 0, (), False, False) for i in reversed(kids.get(None, []))
    ]
    seen: set[int] = set()
    while stack:
        i, depth, guides, branch, last = stack.pop()
        if i in seen:  # pragma: no cover - ids are unique, parents form no cycle
            continue
        seen.add(i)
        cid, parent = items[i]
        children = kids.get(cid, [])
        out.append(
            TreeRow(
                i,
                cid,
                parent if parent in known else None,
                depth,
                guides,
                branch,
                last,
                len(children),
            )
        )
        if len(children) == 1:
            stack.append((children[0], depth, guides, False, last))
        else:
            n = len(children)
            for k in reversed(range(n)):
                is_last = k == n - 1
                stack.append((children[k], depth + 1, (*guides, not is_last), True, is_last))
    return out


# --- references ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ref:
    """A checkpoint as :func:`resolve` finds it: its id, step and namespace."""

    checkpoint_id: str
    step: int | None = None
    checkpoint_ns: str = ""


def resolve(
    refs: Sequence[Ref], ref: str, *, where: str = "the thread", step_ns: str | None = None
) -> str:
    """The checkpoint id ``ref`` names among ``refs`` (a history, newest first).

    ``ref`` is what a person types: ``#N``, the N-th row of the history
    (``#1`` the newest, as ``tether history`` numbers rows); ``step:S``, the
    checkpoint of step ``S``; or a checkpoint id or a prefix of one that
    matches exactly one id (case-insensitive).

    Args:
        where: how messages name the history (``thread 'chat-1'``).
        step_ns: ``step:S`` looks only at checkpoints of this namespace
            (``""``: the root graph; a subgraph counts steps of its own);
            ``None``: at every checkpoint of ``refs``.

    Raises:
        ConfigError: an unknown ``#N``, step or prefix, or a step or prefix
            several checkpoints match; the message names the candidates.
    """
    text = ref.strip()
    if text.startswith("#"):
        try:
            n = int(text[1:])
        except ValueError:
            raise ConfigError(f"{ref!r} is not a row number; write #N, e.g. #1") from None
        if not 1 <= n <= len(refs):
            raise ConfigError(f"no row {text} in {where}: it has {len(refs)} checkpoint(s)")
        return refs[n - 1].checkpoint_id
    if text.startswith("step:"):
        try:
            step = int(text[len("step:") :])
        except ValueError:
            raise ConfigError(f"{ref!r} is not a step; write step:S, e.g. step:3") from None
        found = [
            i
            for i, r in enumerate(refs)
            if r.step == step and (step_ns is None or r.checkpoint_ns == step_ns)
        ]
        if len(found) == 1:
            return refs[found[0]].checkpoint_id
        if not found:
            steps = sorted({r.step for r in refs if r.step is not None})
            known = f"steps {steps[0]} to {steps[-1]}" if steps else "no steps"
            raise ConfigError(f"no checkpoint of step {step} in {where} ({known})")
        raise ConfigError(
            f"{len(found)} checkpoints of {where} are at step {step} (forks or subgraphs): "
            f"{_candidates(refs, found)}; name one by #N or id"
        )
    prefix = text.lower()
    if not prefix:
        raise ConfigError("an empty checkpoint reference; give an id prefix, #N or step:S")
    found = [i for i, r in enumerate(refs) if r.checkpoint_id.lower().startswith(prefix)]
    if len(found) == 1:
        return refs[found[0]].checkpoint_id
    if not found:
        raise ConfigError(
            f"no checkpoint of {where} has an id starting with {text!r}; "
            "`tether history` lists them (#N and step:S work too)"
        )
    raise ConfigError(
        f"{text!r} is the start of {len(found)} checkpoint ids of {where}: "
        f"{_candidates(refs, found)}; type more of the id, or #N"
    )


def _candidates(refs: Sequence[Ref], found: Sequence[int], limit: int = 5) -> str:
    shown = []
    for i in found[:limit]:
        r = refs[i]
        where = f" in {r.checkpoint_ns.partition(':')[0]}" if r.checkpoint_ns else ""
        step = "" if r.step is None else f" step {r.step}"
        shown.append(f"#{i + 1} {r.checkpoint_id}{step}{where}")
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    return ", ".join(shown) + more


def short_ids(ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
    """The shortest prefix of each id that no other id of ``ids`` starts with.

    At least ``minimum`` characters. Checkpoint ids are time-ordered, so the
    ids of one thread share their first ten or so characters and differ in
    the next few; what :func:`resolve` accepts back.
    """
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for k, cid in enumerate(ordered):
        need = minimum
        for other in ordered[max(k - 1, 0) : k + 2]:
            if other != cid:
                need = max(need, _common(cid, other) + 1)
        out[cid] = cid[:need]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n

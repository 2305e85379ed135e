"""State schemas: from a TypedDict, dataclass or Pydantic model to channels.

Each field of the schema becomes one channel. A field annotated
``Annotated[T, fn]`` with a two-argument callable ``fn`` gets a
:class:`~tether.graph._channels.Reducer` (``operator.add`` appends lists,
:func:`add_messages` merges chat messages by id); any other field a
:class:`~tether.graph._channels.LastValue`.

Nodes receive the state as the schema's kind (a dict for a TypedDict, an
instance for a dataclass or a model) and return a partial update as a dict.
:func:`schema_types` lists the user classes the state can hold, so ``compile``
can allowlist them in the saver's strict serializer (S3.4).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin

from tether.errors import ConfigError
from tether.graph._channels import Channel, LastValue, Reducer

__all__ = ["StateSchema", "add_messages", "as_dict", "schema_types"]


def _message_id(message: Any) -> Any:
    if isinstance(message, Mapping):
        return message.get("id")
    return getattr(message, "id", None)


def _with_id(message: Any) -> Any:
    if isinstance(message, str):
        message = {"role": "user", "content": message}
    elif isinstance(message, tuple) and len(message) == 2:
        message = {"role": message[0], "content": message[1]}
    if _message_id(message) is not None:
        return message
    new_id = str(uuid.uuid4())
    if isinstance(message, Mapping):
        return {**message, "id": new_id}
    with contextlib.suppress(AttributeError):  # no id field: appended, never replaced
        message.id = new_id
    return message


def add_messages(left: Any, right: Any) -> list[Any]:
    """Reducer for chat histories: append new messages, replace those with a known id.

    Messages may be dicts (``{"role": ..., "content": ..., "id": ...}``),
    objects with an ``id`` attribute (LangChain messages), strings (user
    messages) or ``(role, content)`` tuples. A message without an id gets a
    fresh uuid4, so a later update can replace it.
    """
    old = list(left) if isinstance(left, (list, tuple)) else ([] if left is None else [left])
    new = list(right) if isinstance(right, (list, tuple)) else [right]
    merged = [_with_id(m) for m in old]
    by_id = {_message_id(m): i for i, m in enumerate(merged)}
    for message in (_with_id(m) for m in new):
        mid = _message_id(message)
        if mid is not None and mid in by_id:
            merged[by_id[mid]] = message
        else:
            by_id[mid] = len(merged)
            merged.append(message)
    return merged


def _reducer_of(hint: Any) -> tuple[Callable[[Any, Any], Any], Any] | None:
    """``Annotated[T, fn]`` -> ``(fn, T)`` when ``fn`` takes two arguments."""
    if get_origin(hint) is not typing.Annotated:
        return None
    base, *extras = get_args(hint)
    for extra in reversed(extras):
        if callable(extra):
            try:
                params = inspect.signature(extra).parameters
            except (TypeError, ValueError):
                return (extra, base)  # builtins such as operator.add
            if len(params) >= 2:
                return (extra, base)
    return None


def _initial(base: Any) -> Callable[[], Any] | None:
    origin = get_origin(base) or base
    if origin in (list, dict, set, tuple) or (
        isinstance(origin, type) and origin.__module__ == "builtins"
    ):
        return origin  # type: ignore[no-any-return]
    return None


class StateSchema:
    """The fields of a state schema and how to build channels and node inputs from them."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        if dataclasses.is_dataclass(schema) and isinstance(schema, type):
            self.kind = "dataclass"
        elif isinstance(schema, type) and hasattr(schema, "model_fields"):
            self.kind = "pydantic"
        elif isinstance(schema, type) and issubclass(schema, dict):
            self.kind = "dict"
        else:
            raise ConfigError(
                f"state schema must be a TypedDict, dataclass or Pydantic model, got {schema!r}"
            )
        try:
            hints = typing.get_type_hints(schema, include_extras=True)
        except Exception as exc:
            raise ConfigError(f"cannot read the annotations of {schema!r}: {exc}") from exc
        if not hints:
            raise ConfigError(f"state schema {schema.__name__} declares no fields")
        self.hints: dict[str, Any] = hints
        self.reducers: dict[str, tuple[Callable[[Any, Any], Any], Any]] = {}
        for name, hint in hints.items():
            found = _reducer_of(hint)
            if found is not None:
                self.reducers[name] = found

    @property
    def keys(self) -> list[str]:
        return list(self.hints)

    def channel(self, name: str) -> Channel:
        """A new, empty channel for state key ``name``."""
        if name in self.reducers:
            fn, base = self.reducers[name]
            return Reducer(name, fn, _initial(base))
        return LastValue(name)

    def node_input(self, values: Mapping[str, Any]) -> Any:
        """The state as a node receives it."""
        if self.kind == "dict":
            return dict(values)
        try:
            return self.schema(**values)
        except Exception as exc:
            raise ConfigError(
                f"cannot build {self.schema.__name__} from the state {sorted(values)}: {exc}"
            ) from exc

    def read_update(self, node: str, update: Any) -> list[tuple[str, Any]]:
        """A node's return value as ``(key, value)`` writes."""
        if update is None:
            return []
        if isinstance(update, Mapping):
            items = list(update.items())
        elif dataclasses.is_dataclass(update) and not isinstance(update, type):
            items = [(f.name, getattr(update, f.name)) for f in dataclasses.fields(update)]
        elif hasattr(update, "model_dump") and hasattr(type(update), "model_fields"):
            items = [(k, getattr(update, k)) for k in update.model_fields_set]
        else:
            raise ConfigError(
                f"node {node!r} returned {type(update).__name__}; return a dict of state "
                f"keys ({', '.join(self.hints)}), a Command or None"
            )
        for key, _ in items:
            if key not in self.hints:
                raise ConfigError(
                    f"node {node!r} wrote unknown state key {key!r}; "
                    f"the schema {self.schema.__name__} has {', '.join(self.hints)}"
                )
        return items


def _walk_types(hint: Any, seen: set[Any], out: list[type]) -> None:
    try:
        if hint in seen:
            return
        seen.add(hint)
    except TypeError:  # an unhashable annotation argument (e.g. a Literal of lists)
        return
    for arg in get_args(hint):
        _walk_types(arg, seen, out)
    if not isinstance(hint, type) or hint.__module__ in ("builtins", "typing"):
        return
    user = (
        dataclasses.is_dataclass(hint)
        or issubclass(hint, enum.Enum)
        or hasattr(hint, "model_fields")
        or (issubclass(hint, tuple) and hasattr(hint, "_fields"))
    )
    if user:
        out.append(hint)
        try:
            inner = typing.get_type_hints(hint)
        except Exception:
            inner = {}
        for sub in inner.values():
            _walk_types(sub, seen, out)


def schema_types(schema: StateSchema) -> list[type]:
    """User classes reachable from the schema's annotations (and the schema itself)."""
    out: list[type] = []
    seen: set[Any] = set()
    if schema.kind != "dict":
        out.append(schema.schema)
    for hint in schema.hints.values():
        _walk_types(hint, seen, out)
    return out


def as_dict(state: Any) -> dict[str, Any]:
    """A state value (dict, dataclass or model instance) as a dict of its fields."""
    if isinstance(state, Mapping):
        return dict(state)
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    if hasattr(state, "model_dump"):
        return {k: getattr(state, k) for k in type(state).model_fields}
    raise ConfigError(f"cannot read {type(state).__name__} as a state; use a dict")

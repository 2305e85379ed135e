"""Where in a value an error is, and how an error message shows a value.

Encode and decode errors both carry a msgspec-style path (``$.messages[2].content``)
to the offending value: :func:`locate` finds a Python object inside the value
being written, :func:`failing_path` the innermost typed (ext) value that fails
to decode inside stored bytes. Both are second, slow passes run only after a
failure. :func:`show`, :func:`describe` and :func:`failed` put a value, its type
or a constructor's exception into a message without letting a class's own
``__repr__`` raise in its place.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec


def key_path(key: Any) -> str:
    """The path step to a map's value: ``.name`` for identifier keys, else ``[key]``."""
    if isinstance(key, str) and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"


def describe(value: Any) -> str:
    return type(value).__name__


def failed(exc: BaseException) -> str:
    """How a constructor failed: the message alone for the usual ValueError/TypeError."""
    if isinstance(exc, ValueError | TypeError):
        try:
            return str(exc)
        except Exception:  # noqa: S110 - show says so
            pass
    return show(exc)


def show(obj: object) -> str:
    """``repr(obj)`` for an error message; a class's own ``__repr__`` may raise too."""
    try:
        return repr(obj)
    except Exception:
        return f"<{type(obj).__qualname__} whose repr() failed>"


# --- encoding: the path of an object inside the value being written -------------


def locate(root: Any, target: Any) -> str:
    """The msgspec-style path of ``target`` inside ``root`` (identity), or ``$``."""
    seen: set[int] = set()

    def walk(value: Any, path: str, depth: int) -> str | None:
        if value is target:
            return path
        if depth > 200 or id(value) in seen:
            return None
        seen.add(id(value))
        children: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            children = [(key_path(k), v) for k, v in value.items()]
            children += [(f"[key {k!r}]", k) for k in value]
        elif isinstance(value, list | tuple | set | frozenset | deque):
            children = [(f"[{i}]", v) for i, v in enumerate(value)]
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            children = [(f".{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
        elif hasattr(type(value), "model_fields"):
            children = [(f".{n}", getattr(value, n, None)) for n in type(value).model_fields]
        for suffix, child in children:
            found = walk(child, path + suffix, depth + 1)
            if found is not None:
                return found
        return None

    try:
        return walk(root, "$", 0) or "$"
    except Exception:  # a container whose items cannot be read: the message still names it
        return "$"


# --- decoding: the path of the innermost typed value that fails to decode --------


class RawExt:
    """An ext value left undecoded: its code and payload bytes."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data

    def __hash__(self) -> int:
        return hash((self.code, self.data))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawExt) and (self.code, self.data) == (other.code, other.data)


def _raw_ext(code: int, data: memoryview) -> RawExt:
    return RawExt(code, bytes(data))


# the error path's decoder: ext values left as they are, to be walked one by one
raw_unpack = msgspec.msgpack.Decoder(ext_hook=_raw_ext).decode

#: an ext value's decoder: ``hook(code, payload)``, raising where it fails
Hook = Callable[[int, bytes], Any]
#: the values an ext payload holds, each with the path step to it; None when
#: nothing inside is decoded and the ext value itself is where decoding fails
Inside = Callable[[int, Any], "list[tuple[str, Any]] | None"]


def failing_path(raw: bytes, hook: Hook, inside: Inside) -> str:
    """The path of the innermost ext value in ``raw`` that ``hook`` fails on, or ``$``."""
    try:
        tree = raw_unpack(raw)
    except Exception:
        return "$"
    return _walk(tree, "$", 0, hook, inside) or "$"


def _walk(value: Any, path: str, depth: int, hook: Hook, inside: Inside) -> str | None:
    if depth > 100:
        return None
    if isinstance(value, RawExt):
        try:
            env = raw_unpack(value.data)
        except Exception:
            return path
        children = inside(value.code, env)
        if children is None:
            return path
        for suffix, child in children:
            found = _walk(child, path + suffix, depth + 1, hook, inside)
            if found is not None:
                return found
        try:
            hook(value.code, value.data)
        except Exception:
            return path
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            found = _walk(v, path + key_path(k), depth + 1, hook, inside)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = _walk(v, f"{path}[{i}]", depth + 1, hook, inside)
            if found is not None:
                return found
    return None

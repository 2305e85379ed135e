"""Reading LangGraph's legacy ``"json"`` tag (SPEC S3.3), under the same allowlist.

Before its MessagePack format, LangGraph's ``JsonPlusSerializer`` wrote JSON in
which typed values were objects::

    {"lc": 2, "type": "constructor", "id": [*module_parts, name],
     "args": [...], "kwargs": {...}, "method": ...}

and LangChain's own ``Serializable`` objects (messages) were ``"lc": 1``
constructors whose ``id`` is a LangChain namespace path mapped to a class by
``langchain_core.load.mapping``. Both are rebuilt here through the same gate and
the same construction paths as the MessagePack ext values; the ``method`` field
is honoured only for ``datetime.fromisoformat`` (and ignored where it named the
default constructor or pydantic's ``construct``), never dispatched by name.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from tether.errors import DecodeError
from tether.serde import _allowlist, _depth
from tether.serde._decode import Decoder
from tether.serde._paths import key_path, show

# the one method the old format named that is not just the constructor
_DATETIME_METHOD = ("datetime", "datetime", "fromisoformat")
_CONSTRUCT_METHODS = (None, "construct", "model_construct", "model_validate", "parse_obj")


def loads_json(decoder: Decoder, data: bytes) -> Any:
    """Decode a legacy ``"json"`` payload; every failure is a :class:`DecodeError`.

    A failure names the path of the object that failed (``$.messages[3]``):
    ``json.loads`` builds objects children first, so the count of objects
    rebuilt before the failure finds it again in a plain parse.
    """
    rebuilt = 0

    def hook(obj: dict[str, Any]) -> Any:
        nonlocal rebuilt
        if not _is_constructor(obj):
            return obj
        value = _revive(decoder, obj)
        rebuilt += 1
        return value

    try:
        # UTF-8, as LangGraph wrote it: json.loads would guess UTF-16/32 from the
        # first bytes and import a codec module for them (named by stored data)
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid legacy json payload: not UTF-8 ({exc.reason})") from exc
    if not _depth.guard_suffices() and _json_too_deep(text):
        # json.loads recurses in C with only the interpreter's recursion counter
        # as a guard: a deep enough array overflowed the stack (#18.1)
        raise DecodeError(
            f"legacy json payload is nested too deeply: its arrays and objects inside "
            f"each other go past tether's limit of {_depth.MAX_DEPTH} levels"
        )
    try:
        return json.loads(text, object_hook=hook)
    except DecodeError as exc:
        failed = exc
    except RecursionError as exc:
        raise DecodeError("legacy json payload is nested too deeply") from exc
    except (ValueError, TypeError) as exc:
        raise DecodeError(f"invalid legacy json payload: {exc}") from exc
    except Exception as exc:  # a class's own code, whatever it raised (#18.10)
        raise DecodeError(f"cannot read legacy json payload: {show(exc)}") from exc
    raise DecodeError(
        failed.reason, path=_nth_constructor_path(text, rebuilt), type_name=failed.type_name
    ) from (failed.__cause__ or failed)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _json_too_deep(text: str) -> bool:
    """Whether the JSON ``text`` nests more than :data:`_depth.MAX_DEPTH` levels."""
    if text.count("[") + text.count("{") <= _depth.MAX_DEPTH:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    steps = (1 if c in "[{" else -1 for c in brackets)
    return max(itertools.accumulate(steps), default=0) > _depth.MAX_DEPTH


def _is_constructor(obj: dict[str, Any]) -> bool:
    return obj.get("lc") in (1, 2) and "id" in obj and "type" in obj


def _nth_constructor_path(text: str, index: int) -> str:
    """The path of the ``index``-th constructor object, children before parents."""
    try:
        tree = json.loads(text)
    except Exception:
        return "$"
    seen = 0

    def walk(value: Any, path: str, depth: int) -> str | None:
        nonlocal seen
        if depth > 200:
            return None
        children: list[tuple[str, Any]] = []
        if isinstance(value, dict):
            children = [(key_path(k), v) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(f"[{i}]", v) for i, v in enumerate(value)]
        for suffix, child in children:
            found = walk(child, path + suffix, depth + 1)
            if found is not None:
                return found
        if isinstance(value, dict) and _is_constructor(value):
            if seen == index:
                return path
            seen += 1
        return None

    return walk(tree, "$", 0) or "$"


def _revive(decoder: Decoder, obj: dict[str, Any]) -> Any:
    try:
        return _rebuild(decoder, obj)
    except (DecodeError, RecursionError):
        raise
    except Exception as exc:
        ident = obj.get("id")
        name = (
            ".".join(ident)
            if isinstance(ident, list) and all(isinstance(p, str) for p in ident)
            else None
        )
        raise DecodeError(
            f"cannot rebuild legacy json object {name or show(ident)}: {show(exc)}",
            type_name=name,
        ) from exc


def _rebuild(decoder: Decoder, obj: dict[str, Any]) -> Any:
    ident = obj["id"]
    if not isinstance(ident, list) or len(ident) < 2 or not all(isinstance(p, str) for p in ident):
        raise DecodeError(f"malformed legacy json constructor id {ident!r}")
    kind = obj["type"]
    if kind != "constructor":
        raise DecodeError(
            f"legacy json object of type {kind!r} ({'.'.join(ident)}) cannot be read: "
            "tether reads only constructors (secrets are never loaded from the environment)"
        )
    if obj["lc"] == 1:
        module, name = _langchain_path(ident)
    else:
        module, name = ".".join(ident[:-1]), ident[-1]
    args = obj.get("args")
    kwargs = obj.get("kwargs")
    method = obj.get("method")
    if isinstance(method, list) and method:
        method = method[-1] if method[0] is None and len(method) > 1 else method[0]
    key = (module, name)
    if method is not None and method not in _CONSTRUCT_METHODS:
        if (module, name, method) != _DATETIME_METHOD or not isinstance(args, list):
            raise DecodeError(
                f"refusing to call {module}.{name}.{method!r}: tether calls no method named "
                "by stored data except datetime.fromisoformat",
                type_name=f"{module}.{name}",
            )
        return _safe(
            _allowlist.SAFE_BUILDERS[(3, *_DATETIME_METHOD)], args[0] if args else None, key
        )
    if kwargs is not None and not args:
        return decoder.from_fields(key, kwargs)
    build = _allowlist.SAFE_JSON_BUILDERS.get(key)
    if build is not None:
        return _safe(build, args or [], key)
    if kwargs:
        raise DecodeError(
            f"legacy json constructor {module}.{name} has both args and kwargs; tether "
            "rebuilds with one or the other",
            type_name=f"{module}.{name}",
        )
    return decoder.from_args(key, args or [])


def _safe(build: Any, arg: Any, key: tuple[str, str]) -> Any:
    try:
        return build(arg)
    except Exception as exc:
        raise DecodeError(
            f"malformed legacy json {key[0]}.{key[1]}: {show(exc)}", type_name=".".join(key)
        ) from exc


def _langchain_path(ident: list[str]) -> tuple[str, str]:
    try:
        from langchain_core.load import mapping
    except ImportError as exc:
        raise DecodeError(
            f"legacy json holds the LangChain object {'.'.join(ident)}; install "
            "langchain-core to read it"
        ) from exc
    key = tuple(ident)
    for table in (
        mapping.SERIALIZABLE_MAPPING,
        mapping._OG_SERIALIZABLE_MAPPING,
        mapping.OLD_CORE_NAMESPACES_MAPPING,
    ):
        path = table.get(key)
        if path is not None:
            return ".".join(path[:-1]), path[-1]
    if ident[0] == "langchain_core":
        return ".".join(ident[:-1]), ident[-1]
    raise DecodeError(f"unknown LangChain object {'.'.join(ident)} in legacy json payload")

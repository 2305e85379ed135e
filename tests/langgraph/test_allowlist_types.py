"""The built-in LangGraph allowlist: what it holds, and that each type round-trips (issue #13.4).

``LANGGRAPH_ALLOWLIST`` is a static list generated from the installed
packages (see ``tether.langgraph._serde``); the first test keeps it equal to
the enumeration, so a langchain-core or LangGraph upgrade that adds a data
type fails here until the list is regenerated and reviewed. Then every listed
type is built from its own fields by a generic builder and must come back
equal, written by tether and written by LangGraph's own serializer.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import enum
import importlib
import types
import typing
import uuid
from typing import Any

import pydantic
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from typing_extensions import is_typeddict

from tether.errors import EncodeError
from tether.langgraph import LANGGRAPH_ALLOWLIST
from tether.langgraph._serde import PLAIN_TYPES, enumerate_data_types, langgraph_serializer
from tether.serde import MsgpackSerializer

SERDE = langgraph_serializer()
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_the_list_is_the_enumeration_of_the_installed_packages() -> None:
    """Regenerate with ``python -m tether.langgraph._serde`` and review the difference."""
    assert enumerate_data_types() | PLAIN_TYPES == LANGGRAPH_ALLOWLIST


def test_the_list_covers_what_langgraph_itself_allows() -> None:
    from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_TYPES

    third_party = {
        (".".join(key[:-1]), key[-1])
        for key in SAFE_MSGPACK_TYPES
        if key[0].startswith(("langchain_core", "langgraph"))
    }
    assert third_party <= LANGGRAPH_ALLOWLIST


def test_behaviour_is_not_listed() -> None:
    """Policies holding callables, runnables, abstract bases and file references stay out."""
    for key in [
        ("langgraph.types", "RetryPolicy"),
        ("langgraph.types", "CachePolicy"),
        ("langgraph.types", "TracePolicy"),
        ("langgraph.types", "PregelExecutableTask"),
        ("langchain_core.prompt_values", "PromptValue"),
        ("langchain_core.documents.compressor", "BaseDocumentCompressor"),
        ("langchain_core.documents.base", "Blob"),
    ]:
        assert key not in LANGGRAPH_ALLOWLIST


# --- a sample of each type, built from its fields ------------------------------------


def sample(hint: Any, depth: int = 0) -> Any:
    """A value of the annotation ``hint``: the first option that can be built."""
    if depth > 6:
        raise TypeError(f"too deep at {hint!r}")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is typing.Any or hint is object or isinstance(hint, typing.TypeVar):
        return "any"
    if hint is type(None) or hint is None:
        return None
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Annotated:
        return sample(args[0], depth + 1)
    if origin is typing.Union or origin is types.UnionType:
        for arg in sorted(args, key=lambda a: a is type(None)):  # None last
            try:
                return sample(arg, depth + 1)
            except TypeError:
                continue
        raise TypeError(f"no buildable option in {hint!r}")
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        return [sample(args[0], depth + 1)] if args else ["item"]
    if origin in (set, frozenset):
        return origin([sample(args[0], depth + 1)])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return (sample(args[0], depth + 1),)
        return tuple(sample(a, depth + 1) for a in args)
    if origin in (dict, collections.abc.Mapping):
        return {"key": sample(args[1], depth + 1) if args else "value"}
    if origin is type or origin is collections.abc.Callable:
        raise TypeError("not data")
    if is_typeddict(hint):
        return {
            k: sample(v, depth + 1)
            for k, v in typing.get_type_hints(hint).items()
            if k in hint.__required_keys__
        }
    simple = {str: "text", int: 7, float: 1.5, bool: True, bytes: b"\x00bytes", dict: {"k": 1}}
    if hint in simple:
        return simple[hint]
    if hint in (list, tuple):
        return hint(["x"])
    if hint is dt.datetime:
        return NOW
    if hint is dt.timedelta:
        return dt.timedelta(seconds=3)
    if hint is uuid.UUID:
        return uuid.UUID(int=42)
    if isinstance(hint, type):
        return build(hint, depth + 1)
    raise TypeError(f"cannot sample {hint!r}")


# Fields whose values the class's own validators constrain beyond their annotation.
OVERRIDES: dict[str, dict[str, Any]] = {
    "ToolMessage": {"tool_call_id": "call-1"},
    "ToolMessageChunk": {"tool_call_id": "call-1"},
    "RemoveMessage": {"id": "m-1", "content": ""},
    "AIMessage": {"tool_calls": [], "invalid_tool_calls": [], "usage_metadata": None},
    "AIMessageChunk": {
        "tool_calls": [],
        "invalid_tool_calls": [],
        "tool_call_chunks": [],
        "usage_metadata": None,
        "chunk_position": None,
    },
    "ImagePromptValue": {"image_url": {"url": "https://example.com/a.png"}},
}


def build(cls: type, depth: int = 0) -> Any:
    """An instance of ``cls`` with every field it declares given a value."""
    if issubclass(cls, enum.Enum):
        return next(iter(cls))
    if cls.__name__ in ("Item", "SearchItem") and cls.__module__ == "langgraph.store.base":
        extra = {"score": 0.25} if cls.__name__ == "SearchItem" else {}
        return cls(
            namespace=("docs", "a"),
            key="k",
            value={"v": [1, 2]},
            created_at=NOW,
            updated_at=NOW,
            **extra,
        )
    if cls.__name__ == "Send" and cls.__module__ == "langgraph.types":
        return cls("node", {"arg": 1})
    overrides = OVERRIDES.get(cls.__name__, {})
    if isinstance(cls, type) and issubclass(cls, pydantic.BaseModel):
        hints = {n: f.annotation for n, f in cls.model_fields.items()}
        skip = {n for n, f in cls.model_fields.items() if f.exclude}
    elif dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        skip = {f.name for f in dataclasses.fields(cls) if not f.init}
    elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints = typing.get_type_hints(cls)
        skip = set()
    else:
        raise TypeError(f"not a data class: {cls!r}")
    fields: dict[str, Any] = {}
    for name, hint in hints.items():
        if name in skip or typing.get_origin(hint) is typing.ClassVar:
            continue
        fields[name] = overrides[name] if name in overrides else sample(hint, depth)
    return cls(**fields)


def _cls(key: tuple[str, str]) -> type:
    obj: Any = importlib.import_module(key[0])
    for part in key[1].split("."):
        obj = getattr(obj, part)
    return typing.cast(type, obj)


@pytest.mark.parametrize("key", sorted(LANGGRAPH_ALLOWLIST), ids=lambda k: f"{k[0]}:{k[1]}")
def test_each_listed_type_round_trips(key: tuple[str, str]) -> None:
    value = build(_cls(key))
    assert type(value) is _cls(key)
    state = {"value": value, "in_a_list": [value]}
    # written by tether and by LangGraph's own serializer, read by tether
    assert SERDE.loads_typed(SERDE.dumps_typed(state)) == state
    official = JsonPlusSerializer(allowed_msgpack_modules=[key])
    assert SERDE.loads_typed(official.dumps_typed(state)) == state


def test_the_core_serializer_still_refuses_them_when_not_framework_types() -> None:
    """Outside the drop-ins the list is not built in: a plain MsgpackSerializer refuses at write."""
    from langchain_core.agents import AgentAction

    action = AgentAction(tool="search", tool_input="q", log="")
    with pytest.raises(EncodeError, match=r"langchain_core\.agents:AgentAction"):
        MsgpackSerializer(env_allowlist=False).dumps_typed(action)
    assert SERDE.loads_typed(SERDE.dumps_typed(action)) == action

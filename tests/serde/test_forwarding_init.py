"""LangChain messages decode by validating straight into a new instance.

tether.serde._allowlist.FORWARDING_INIT lists framework classes whose own
``__init__`` only forwards stored fields to pydantic; the decoder skips those
frames (a third of the cost of reading a message). These tests hold that to
what it claims: for every listed class and every stored shape LangChain
writes (content as text or blocks, tool calls, usage, chunks, artifacts,
names, ids), the instance is the one ``cls(**fields)`` builds, down to the
fields-set, extras and private state; validation errors still reach the
caller as a DecodeError that names the class; a subclass with its own
``__init__`` is built through that ``__init__``.
"""

from __future__ import annotations

import importlib
from typing import Any

import ormsgpack
import pytest
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer
from tether.serde._allowlist import FORWARDING_INIT
from tether.serde._ext import EXT_PYDANTIC_V2, PACK_OPTS
from tether.serde._framework_codecs import forwards_init

TOOL_CALL = {"name": "search", "args": {"q": "tether", "n": 3}, "id": "call-1", "type": "tool_call"}
BLOCKS: list[Any] = [{"type": "text", "text": "hello"}, "plain", {"type": "image", "url": "x"}]

SAMPLES: list[Any] = [
    HumanMessage("hi"),
    HumanMessage("hi", id="h1", name="ada", additional_kwargs={"k": [1, 2]}),
    HumanMessage(BLOCKS, response_metadata={"model": "m"}),
    HumanMessage("with an extra key", id="h2", trace_id="t-1"),  # extra="allow"
    HumanMessageChunk("part", id="hc"),
    AIMessage("noted", id="a1"),
    AIMessage("", tool_calls=[TOOL_CALL]),
    AIMessage(
        BLOCKS,
        tool_calls=[TOOL_CALL],
        invalid_tool_calls=[{"name": "f", "args": "{bad", "id": "c2", "error": "json"}],
        usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        response_metadata={"finish_reason": "stop"},
    ),
    AIMessageChunk(
        "chu", id="ac", tool_call_chunks=[{"name": "f", "args": '{"a"', "id": "c3", "index": 0}]
    ),
    AIMessageChunk("", chunk_position="last"),
    SystemMessage("be brief"),
    SystemMessageChunk(BLOCKS),
    ChatMessage("x", role="critic"),
    ChatMessageChunk("x", role="critic"),
    ToolMessage("42", tool_call_id="call-1"),
    ToolMessage(BLOCKS, tool_call_id="call-1", artifact={"rows": [1, 2]}, status="error", name="t"),
    ToolMessageChunk("4", tool_call_id="call-1"),
    FunctionMessage("r", name="fn"),
    FunctionMessageChunk("r", name="fn"),
    Document("page", metadata={"source": "a.txt", "page": 2}, id="d1"),
]


def _state(obj: Any) -> tuple[Any, ...]:
    return (
        type(obj),
        obj.__dict__,
        obj.__pydantic_fields_set__,
        obj.__pydantic_extra__,
        obj.__pydantic_private__,
    )


def _listed(cls: type) -> bool:
    return (cls.__module__, cls.__name__) in FORWARDING_INIT


def test_every_listed_class_is_importable_and_takes_the_short_path() -> None:
    for module, name in sorted(FORWARDING_INIT):
        cls = getattr(importlib.import_module(module), name)
        assert forwards_init(cls, f"{module}.{name}"), (module, name)


def test_samples_cover_every_listed_concrete_class() -> None:
    covered = {(type(s).__module__, type(s).__name__) for s in SAMPLES}
    abstract = {
        ("langchain_core.messages.base", "BaseMessage"),
        ("langchain_core.messages.base", "BaseMessageChunk"),
    }
    assert FORWARDING_INIT - abstract <= covered


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_decoded_instance_is_what_its_init_builds(sample: Any) -> None:
    assert _listed(type(sample))
    serde = MsgpackSerializer()
    stored = serde.dumps_typed([sample, sample])
    for _ in range(3):  # the first read resolves the class, the later ones take the fast path
        got = serde.loads_typed(stored)
        fields = sample.model_dump()
        built = type(sample)(**fields)
        for one in got:
            assert one == sample
            assert _state(one) == _state(built)
            assert one is not sample


def _stored(cls: type, fields: dict[str, Any]) -> tuple[str, bytes]:
    envelope = ormsgpack.packb([cls.__module__, cls.__name__, fields, "model_validate_json"])
    return "msgpack", ormsgpack.packb(ormsgpack.Ext(EXT_PYDANTIC_V2, envelope))


@pytest.mark.parametrize(
    ("cls", "change", "problem"),
    [
        # AIMessage's own before-validator fails first here (AttributeError)
        (AIMessage, {"tool_calls": "not a list"}, "validating"),
        (HumanMessage, {"content": 7}, "content"),
        (ToolMessage, {"status": "maybe"}, "status"),
        (Document, {"page_content": None}, "page_content"),
    ],
)
def test_a_value_that_no_longer_validates_is_a_decode_error_naming_the_class(
    cls: Any, change: dict[str, Any], problem: str
) -> None:
    sample = next(s for s in SAMPLES if type(s) is cls)
    serde = MsgpackSerializer()
    serde.loads_typed(serde.dumps_typed(sample))  # warm: the next read takes the fast path
    with pytest.raises(DecodeError, match=cls.__name__) as info:
        serde.loads_typed(_stored(cls, {**sample.model_dump(), **change}))
    assert problem in str(info.value)
    assert info.value.__cause__ is not None  # what the class itself said


class Shouting(HumanMessage):
    """A user's subclass whose own __init__ changes the stored content."""

    def __init__(self, content: Any = None, **kwargs: Any) -> None:
        super().__init__(content=str(content).upper(), **kwargs)


def test_a_subclass_with_its_own_init_is_built_through_it() -> None:
    assert not forwards_init(Shouting, f"{__name__}.Shouting")
    serde = MsgpackSerializer(allowlist=[(__name__, "Shouting")])
    stored = serde.dumps_typed(Shouting("quiet"))
    for _ in range(2):
        assert serde.loads_typed(stored).content == "QUIET"


@pytest.mark.parametrize(
    "sample", [*SAMPLES, RemoveMessage(id="r1")], ids=lambda s: type(s).__name__
)
def test_messages_are_written_as_model_dump_writes_them(sample: Any) -> None:
    # most messages take the loose encoder (their __dict__ packed as is)
    cls = type(sample)
    envelope = ormsgpack.packb(
        [cls.__module__, cls.__name__, sample.model_dump(), "model_validate_json"],
        option=PACK_OPTS,
    )
    expected = ormsgpack.packb(ormsgpack.Ext(EXT_PYDANTIC_V2, envelope))
    serde = MsgpackSerializer()
    for _ in range(2):
        assert serde.dumps_typed(sample) == ("msgpack", expected)


def test_an_unlisted_name_for_a_listed_class_is_not_short_cut() -> None:
    assert not forwards_init(HumanMessage, "somewhere.else.HumanMessage")

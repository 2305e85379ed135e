"""Framework codecs are hooks registered by name (tether.serde._codecs, #14.5).

Core serde asks the registry; LangGraph's and LangChain's hooks are
registered by tether.serde._framework_codecs. These tests register hooks for
a class of their own and check that writing and reading go through them.
"""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest

from tether.serde import MsgpackSerializer, _codecs, _ext


class Point:
    def __init__(self, x: int, y: int, *, label: str = "") -> None:
        self.x, self.y, self.label = x, y, label

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y, self.label) == (
            other.x,
            other.y,
            other.label,
        )

    __hash__ = None  # type: ignore[assignment]


KEY = (__name__, "Point")


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Point hook pair for one test: [x, y, label] on the wire, label as a keyword."""
    monkeypatch.setattr(_codecs, "_encoders", dict(_codecs._encoders))
    monkeypatch.setattr(_ext, "_ENCODERS", {})

    def make(cls: type) -> _ext.Encoder:
        def enc(obj: Any, dflt: _ext.Default) -> ormsgpack.Ext:
            payload = ormsgpack.packb(
                [*KEY, [obj.x, obj.y, obj.label]], default=dflt, option=_ext.PACK_OPTS
            )
            return ormsgpack.Ext(_ext.EXT_CONSTRUCTOR_POS_ARGS, payload)

        return enc

    def call(cls: type, args: Any) -> Any:
        return cls(args[0], args[1], label=args[2])

    _codecs.register_encoder(KEY, make)
    table = _codecs.calls(_ext.EXT_CONSTRUCTOR_POS_ARGS)
    monkeypatch.setitem(table, KEY, call)


@pytest.mark.usefixtures("hooks")
def test_a_registered_class_is_written_and_read_through_its_hooks() -> None:
    serde = MsgpackSerializer(allowlist=[KEY])
    value = {"p": Point(1, 2, label="a")}
    tag, data = serde.dumps_typed(value)
    assert b"Point" in data
    assert serde.loads_typed((tag, data)) == value


@pytest.mark.usefixtures("hooks")
def test_a_registered_class_is_still_checked_against_the_allowlist() -> None:
    data = MsgpackSerializer(allowlist=[KEY]).dumps_typed(Point(1, 2))
    with pytest.raises(Exception, match="allowlist"):
        MsgpackSerializer().loads_typed(data)


def test_langgraph_and_langchain_hooks_are_registered_by_name() -> None:
    assert _codecs.value_ext(_ext.EXT_DELTA_SNAPSHOT) is not None
    assert ("langgraph.types", "Send") in _codecs.calls(_ext.EXT_CONSTRUCTOR_POS_ARGS)
    assert ("langchain_core.messages.human", "HumanMessage") in _codecs._validators

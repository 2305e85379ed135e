"""Wire compatibility with the real langgraph-checkpoint JsonPlusSerializer (SPEC S3.2, S3.3)."""

from __future__ import annotations

import collections
import decimal
import ipaddress
import json
import pathlib
import re
import uuid
import zoneinfo
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any

import numpy as np
import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command, Interrupt, Send

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer

from . import models as m

PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"), tags=("x",))

# values both libraries keep exactly
SHARED: list[Any] = [
    1,
    "s",
    [1, "a", None],
    {"a": {"b": 1.5}, 3: "int key"},
    {1, 2},
    frozenset({"x"}),
    collections.deque([1, 2]),
    uuid.UUID(int=99),
    decimal.Decimal("1.10"),
    datetime(2026, 1, 2, 3, 4, 5, 6),
    datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    date(2020, 2, 29),
    time(1, 2, 3),
    timedelta(days=1, seconds=2),
    timezone(timedelta(hours=5)),
    zoneinfo.ZoneInfo("Asia/Tokyo"),
    m.Color.BLUE,
    m.Level.LOW,
    m.Point(4, 5),
    pathlib.Path("/a/b"),
    re.compile("x+", re.I),
    ipaddress.IPv4Address("1.2.3.4"),
    ipaddress.IPv6Network("::/0"),
    PERSON,
    m.Legacy(name="v1", count=2),
    m.Item("k", 3),
    m.Frozen(uuid.UUID(int=1), datetime(2026, 1, 1, tzinfo=UTC), m.Color.RED),
    HumanMessage(content="hi", id="1"),
    AIMessage(content="", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "c1"}]),
    ToolMessage(content="ok", tool_call_id="c1"),
    Send("node", {"arg": 1}),
    Interrupt(value="why?", id="i1"),
    Command(goto="x", update={"a": 1}),
    {"nested": [m.Item("a", 1), {"p": PERSON, "when": date(2021, 1, 1)}]},
]

LG_ALLOW = [*m.ALL, ("builtins", "tuple"), ("builtins", "int"), ("pathlib", "PurePosixPath")]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and bool((a == b).all())
    return type(a) is type(b) and bool(a == b)


@pytest.fixture
def official() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=LG_ALLOW)


@pytest.mark.parametrize("value", SHARED, ids=lambda v: type(v).__name__)
def test_tether_reads_what_langgraph_wrote(
    serde: MsgpackSerializer, official: JsonPlusSerializer, value: Any
) -> None:
    stored = official.dumps_typed(value)
    assert _equal(serde.loads_typed(stored), value)
    assert _equal(serde.loads_typed(stored), official.loads_typed(stored))


@pytest.mark.parametrize("value", SHARED, ids=lambda v: type(v).__name__)
def test_langgraph_reads_what_tether_wrote(
    serde: MsgpackSerializer, official: JsonPlusSerializer, value: Any
) -> None:
    assert _equal(official.loads_typed(serde.dumps_typed(value)), value)


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {"t": ((1, 2), 3)},
        2**100,
        datetime(2026, 7, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
        pathlib.PurePosixPath("a/b"),
    ],
    ids=repr,
)
def test_langgraph_reads_tether_only_improvements(
    serde: MsgpackSerializer, official: JsonPlusSerializer, value: Any
) -> None:
    """Tuples, big ints, zoned datetimes: LangGraph cannot write them (or loses the type),
    but reads tether's form when the ext names are allowed, as they are by its default."""
    assert official.loads_typed(serde.dumps_typed(value)) == value


def test_langgraph_tuples_read_as_lists_like_langgraph(
    serde: MsgpackSerializer, official: JsonPlusSerializer
) -> None:
    # LangGraph has no tuple ext: its tuples are lists, and tether reads them as such,
    # except where a class says the field is a tuple
    stored = official.dumps_typed({"t": (1, 2), "s": {(1, 2)}, "p": PERSON})
    got = serde.loads_typed(stored)
    assert got["t"] == [1, 2]
    assert got["s"] == {(1, 2)}  # set items can only have been tuples
    assert got["p"].tags == ("x",)


def test_numpy_both_ways(serde: MsgpackSerializer, official: JsonPlusSerializer) -> None:
    for arr in (np.arange(10.0).reshape(2, 5), np.asfortranarray(np.ones((3, 2), np.int16))):
        assert _equal(serde.loads_typed(official.dumps_typed(arr)), arr)
        assert _equal(official.loads_typed(serde.dumps_typed(arr)), arr)


# arrays around every MessagePack size boundary the hand-written ext 6 path
# (tether.serde._ext._numpy_payload) handles: fixext 16, ext 8/16/32, bin 8/16/32
NUMPY_SIZES = [
    *(np.arange(n, dtype=np.uint8) for n in (*range(12), 200, 255, 256, 257)),
    *(np.arange(n, dtype=np.uint8) for n in (65_000, 65_535, 65_536, 70_000)),
    np.arange(131_072, dtype=">f8"),  # 1 MiB, not native byte order
    np.zeros((0, 3)),
    np.array(3.5),
    np.ones((3, 4, 5), dtype=np.float32),
    np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    np.arange(40)[::3],  # not contiguous: written from a copy
    np.array([True, False]),
]


@pytest.mark.parametrize("arr", NUMPY_SIZES, ids=lambda a: f"{a.dtype.str}{a.shape}")
def test_numpy_bytes_are_langgraphs(
    serde: MsgpackSerializer, official: JsonPlusSerializer, arr: Any
) -> None:
    """tether writes the array's buffer itself (one copy), byte for byte as LangGraph does."""
    for value in (arr, {"a": arr, "b": [arr]}):
        for _ in range(2):  # the first top-level array registers the fast path
            assert serde.dumps_typed(value) == official.dumps_typed(value)
    for data in (official.dumps_typed(arr), official.dumps_typed({"a": arr})):
        got = serde.loads_typed(data)
        got = got if isinstance(got, np.ndarray) else got["a"]
        assert _equal(got, arr)
        assert got.flags.owndata  # not a view of the stored bytes
        assert got.flags.writeable


def test_langgraph_strict_refusal_matches_tether(official: JsonPlusSerializer) -> None:
    """A type outside both allowlists: LangGraph silently returns the raw fields, tether raises."""
    stored = official.dumps_typed(m.Item("k", 1))
    with pytest.raises(DecodeError, match="not in the allowlist"):
        MsgpackSerializer().loads_typed(stored)


# --- the legacy "json" tag ------------------------------------------------------------


def _lc2(cls: type, *, args: Any = None, kwargs: Any = None, method: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lc": 2,
        "type": "constructor",
        "id": [*cls.__module__.split("."), cls.__qualname__],
    }
    if method is not None:
        out["method"] = method
    if args is not None:
        out["args"] = args
    if kwargs is not None:
        out["kwargs"] = kwargs
    return out


def _json(value: Any) -> tuple[str, bytes]:
    return "json", json.dumps(value).encode()


def test_legacy_json_safe_types(serde: MsgpackSerializer) -> None:
    u = uuid.UUID(int=5)
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    payload = {
        "u": _lc2(uuid.UUID, args=[u.hex]),
        "s": _lc2(set, args=[[1, 2]]),
        "d": _lc2(decimal.Decimal, args=["1.5"]),
        "when": _lc2(datetime, method="fromisoformat", args=[when.isoformat()]),
        "day": _lc2(date, args=[2024, 1, 2]),
        "delta": _lc2(timedelta, args=[1, 2, 3]),
        "path": {
            "lc": 2,
            "type": "constructor",
            "id": ["pathlib", "PosixPath"],
            "args": ["a", "b"],
        },
        "plain": {"x": [1, 2]},
    }
    got = serde.loads_typed(_json(payload))
    assert got == {
        "u": u,
        "s": {1, 2},
        "d": decimal.Decimal("1.5"),
        "when": when,
        "day": date(2024, 1, 2),
        "delta": timedelta(1, 2, 3),
        "path": pathlib.PosixPath("a/b"),
        "plain": {"x": [1, 2]},
    }
    # LangGraph reads the ones it still supports identically
    official = JsonPlusSerializer().loads_typed(_json({"u": payload["u"], "s": payload["s"]}))
    assert official == {"u": u, "s": {1, 2}}


def test_legacy_json_user_types_follow_the_allowlist(serde: MsgpackSerializer) -> None:
    payload = [
        _lc2(m.Item, kwargs={"k": "a", "count": 1, "note": None}),
        _lc2(m.Person, kwargs=PERSON.model_dump(mode="json"), method=[None, "model_construct"]),
        _lc2(m.Color, args=["red"]),
    ]
    got = serde.loads_typed(_json(payload))
    assert got == [m.Item("a", 1), PERSON, m.Color.RED]
    with pytest.raises(DecodeError, match="not in the allowlist") as info:
        MsgpackSerializer().loads_typed(_json(payload))
    assert "tests.serde.models.Item" in str(info.value)


def test_legacy_json_langchain_lc1_messages(serde: MsgpackSerializer) -> None:
    msg = HumanMessage(content="hello", id="m1")
    got = serde.loads_typed(_json({"messages": [msg.to_json()]}))
    assert got == {"messages": [msg]}


def test_legacy_json_refuses_dangerous_payloads(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "pwned"
    serde = MsgpackSerializer(permissive=True)
    for payload in (
        {"lc": 2, "type": "constructor", "id": ["os", "system"], "args": [f"touch {target}"]},
        {"lc": 2, "type": "constructor", "id": ["builtins", "eval"], "args": ["1"]},
        {
            "lc": 2,
            "type": "constructor",
            "id": ["tests", "serde", "models", "Item"],
            "method": "__init_subclass__",
            "args": [],
        },
        {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]},
    ):
        with pytest.raises(DecodeError):
            serde.loads_typed(_json(payload))
    assert not target.exists()


def test_legacy_json_bad_bytes(serde: MsgpackSerializer) -> None:
    with pytest.raises(DecodeError, match="invalid legacy json"):
        serde.loads_typed(("json", b"{not json"))
    with pytest.raises(DecodeError, match="malformed"):
        serde.loads_typed(_json({"lc": 2, "type": "constructor", "id": "x"}))


def test_ext_payloads_as_langgraph_lays_them_out(serde: MsgpackSerializer) -> None:
    """The byte layout itself: [module, name, arg(, method)] inside the LangGraph ext codes."""
    _tag, data = serde.dumps_typed(uuid.UUID(int=1))
    ext = ormsgpack.unpackb(data, ext_hook=lambda code, b: (code, ormsgpack.unpackb(b)))
    assert ext == (0, ["uuid", "UUID", uuid.UUID(int=1).hex])
    _tag, data = serde.dumps_typed(datetime(2026, 1, 1))
    ext = ormsgpack.unpackb(data, ext_hook=lambda code, b: (code, ormsgpack.unpackb(b)))
    assert ext == (3, ["datetime", "datetime", "2026-01-01T00:00:00", "fromisoformat"])
    _tag, data = serde.dumps_typed(PERSON)
    ext = ormsgpack.unpackb(
        data, ext_hook=lambda code, b: (code, ormsgpack.unpackb(b, ext_hook=lambda c, x: c))
    )
    assert ext[0] == 5
    assert ext[1][:2] == ["tests.serde.models", "Person"]
    assert ext[1][3] == "model_validate_json"

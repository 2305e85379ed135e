"""A plain pydantic model is packed from its __dict__ by ormsgpack: the bytes model_dump gives.

tether.serde._pydantic writes a plain model's fields without model_dump() (SPEC S3;
the wire format is LangGraph's ext 5). These tests hold it to exactly the
bytes of the model_dump() path for every plain shape, and check that what is
not plain -- per class or per instance -- takes the model_dump() path.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import ormsgpack
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from tether.serde import MsgpackSerializer, _ext, _pydantic

from . import models as m


class Kind(enum.Enum):
    A = "a"
    B = 2


class Leaf(pydantic.BaseModel):
    label: str
    weight: float = 0.0


class Inner(pydantic.BaseModel):
    leaf: Leaf
    maybe: Leaf | None = None
    n: int = 0


class Wide(pydantic.BaseModel):
    s: str
    i: int
    f: float
    b: bool
    raw: bytes
    none: None = None
    opt: str | None = None
    lit: Literal["x", "y"] = "x"
    kind: Kind = Kind.A
    when: dt.datetime | None = None
    day: dt.date | None = None
    at: dt.time | None = None
    span: dt.timedelta | None = None
    uid: uuid.UUID | None = None
    amount: decimal.Decimal | None = None
    tags: list[str] = []
    nums: tuple[int, ...] = ()
    pair: tuple[int, str] | None = None
    table: dict[str, float] = {}
    grid: list[list[int]] = []
    inner: Inner | None = None


PLAIN = (Leaf, Inner, Wide, m.Address, m.Person)


class SubLeaf(Leaf):
    secret: Any = None


class WithFieldSerializer(pydantic.BaseModel):
    x: int

    @pydantic.field_serializer("x")
    def _x(self, v: int) -> int:
        return v + 1


class WithModelSerializer(pydantic.BaseModel):
    x: int

    @pydantic.model_serializer
    def _all(self) -> dict[str, Any]:
        return {"x": self.x}


class WithAnnotatedSerializer(pydantic.BaseModel):
    x: Annotated[int, pydantic.PlainSerializer(lambda v: str(v))]


class WithExcluded(pydantic.BaseModel):
    x: int
    hidden: int = pydantic.Field(default=0, exclude=True)


class WithAny(pydantic.BaseModel):
    x: Any


class WithUnion(pydantic.BaseModel):
    x: int | str


class WithDataclass(pydantic.BaseModel):
    item: m.Item


class WithSet(pydantic.BaseModel):
    # model_dump() copies a set, and the copy may iterate in another order
    uniq: set[int]


class WithModelList(pydantic.BaseModel):
    leaves: list[Leaf]


class WithNonPlainChild(pydantic.BaseModel):
    child: WithAny


class SerializedByAlias(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(serialize_by_alias=True)
    x: int = pydantic.Field(serialization_alias="X")


NOT_PLAIN = (
    m.Open,
    m.Aliased,
    m.WithComputed,
    WithFieldSerializer,
    WithModelSerializer,
    WithAnnotatedSerializer,
    WithExcluded,
    WithAny,
    WithUnion,
    WithDataclass,
    WithSet,
    WithModelList,
    WithNonPlainChild,
    SerializedByAlias,
    pydantic.RootModel[int],
)


def dumped_bytes(value: pydantic.BaseModel) -> bytes:
    """What tether wrote for ``value`` before the plain path: model_dump(), then pack."""
    cls = type(value)
    fields = cls.__pydantic_serializer__.to_python(value)
    envelope = _ext.pack([cls.__module__, cls.__qualname__, fields, "model_validate_json"])
    return ormsgpack.packb({"v": ormsgpack.Ext(5, envelope)})


def serde() -> MsgpackSerializer:
    # every class here, so that the write-time check lets each one be written
    return MsgpackSerializer(allowlist=[*m.ALL, *PLAIN, *NOT_PLAIN, Kind])


def test_which_models_are_plain() -> None:
    for cls in PLAIN:
        assert _pydantic._plain_model(cls) is not None, cls
    for cls in NOT_PLAIN:
        assert _pydantic._plain_model(cls) is None, cls


WIDE = Wide(
    s="s",
    i=-(2**63),
    f=1.5,
    b=True,
    raw=b"\x00\xff",
    opt="o",
    lit="y",
    kind=Kind.B,
    when=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    day=dt.date(2020, 2, 29),
    at=dt.time(1, 2, 3),
    span=dt.timedelta(days=1, seconds=2),
    uid=uuid.UUID(int=7),
    amount=decimal.Decimal("1.10"),
    tags=["a", "b"],
    nums=(1, 2, 3),
    pair=(1, "x"),
    table={"k": 0.5},
    grid=[[1], [2, 3]],
    inner=Inner(leaf=Leaf(label="l", weight=2), maybe=Leaf(label="m"), n=3),
)


@pytest.mark.parametrize(
    "value",
    [
        WIDE,
        Wide(s="", i=0, f=0, b=False, raw=b""),
        Inner(leaf=Leaf(label="only")),
        m.Person(name="ada", age=36, address=m.Address(city="London"), tags=("x",)),
    ],
)
def test_plain_models_are_written_as_model_dump_writes_them(value: pydantic.BaseModel) -> None:
    s = serde()
    for _ in range(2):
        tag, data = s.dumps_typed({"v": value})
        assert (tag, data) == ("msgpack", dumped_bytes(value))
        assert s.loads_typed((tag, data)) == {"v": value}


leaves = st.builds(Leaf, label=st.text(max_size=8), weight=st.floats(allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(
    st.builds(
        Wide,
        s=st.text(max_size=8),
        i=st.integers(-(2**63), 2**63 - 1),
        f=st.floats(allow_nan=False),
        b=st.booleans(),
        raw=st.binary(max_size=8),
        opt=st.none() | st.text(max_size=4),
        kind=st.sampled_from(Kind),
        when=st.none() | st.datetimes(timezones=st.none() | st.timezones()),
        uid=st.none() | st.uuids(),
        amount=st.none() | st.decimals(allow_nan=False, allow_infinity=False),
        tags=st.lists(st.text(max_size=4), max_size=3),
        nums=st.lists(st.integers(-5, 5), max_size=3).map(tuple),
        table=st.dictionaries(st.text(max_size=4), st.floats(allow_nan=False), max_size=3),
        inner=st.none() | st.builds(Inner, leaf=leaves, maybe=st.none() | leaves),
    )
)
def test_any_plain_value_is_written_as_model_dump_writes_it(value: Wide) -> None:
    assert serde().dumps_typed({"v": value})[1] == dumped_bytes(value)


def test_a_subclass_instance_in_a_model_field_is_dumped_as_the_declared_class() -> None:
    # model_dump() writes a Leaf field's value with Leaf's fields, whatever its
    # class: the extra field (here of a type nobody allowlisted) is left out
    value = Inner(leaf=SubLeaf(label="l", secret=m.Item("a", 1)))
    data = serde().dumps_typed({"v": value})[1]
    assert data == dumped_bytes(value)
    assert b"secret" not in data
    assert serde().loads_typed(("msgpack", data)) == {"v": Inner(leaf=Leaf(label="l"))}


def test_an_attribute_set_behind_pydantics_back_is_not_written() -> None:
    value = Leaf(label="l")
    object.__setattr__(value, "cache", 1)  # e.g. a functools.cached_property
    assert serde().dumps_typed({"v": value})[1] == dumped_bytes(value)
    broken = Leaf.model_construct(weight=1.0)  # no label at all
    assert serde().dumps_typed({"v": broken})[1] == dumped_bytes(broken)
    swapped = Leaf.model_construct(weight=1.0)
    object.__setattr__(swapped, "nickname", "n")  # as many attributes as fields
    assert serde().dumps_typed({"v": swapped})[1] == dumped_bytes(swapped)
    reordered = Leaf(label="l", weight=2.0)
    del reordered.__dict__["label"]
    reordered.__dict__["label"] = "l"
    assert serde().dumps_typed({"v": reordered})[1] == dumped_bytes(reordered)


@pytest.mark.parametrize(
    "value",
    [
        WithFieldSerializer(x=1),
        WithModelSerializer(x=1),
        WithAnnotatedSerializer(x=1),
        WithExcluded(x=1, hidden=2),
        WithAny(x=m.Item("a", 1)),
        WithUnion(x="s"),
        WithSet(uniq={0, 5, -3}),
        WithModelList(leaves=[SubLeaf(label="l", secret=1)]),
        SerializedByAlias(x=1),
    ],
    ids=lambda v: type(v).__name__,
)
def test_models_that_are_not_plain_are_written_by_model_dump(value: pydantic.BaseModel) -> None:
    assert serde().dumps_typed({"v": value})[1] == dumped_bytes(value)


# --- models that are not plain for their field types only ("loose") -------------------


class Shape(TypedDict):
    name: str
    sides: NotRequired[int]


class Loose(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    u: int | str
    d: dict[str, Any] = {}
    items: list[Any] = []
    shape: Shape | None = None
    shapes: list[Shape] = []
    leaf: Leaf | None = None
    when: dt.datetime | str | None = None


class LooseWithValidator(pydantic.BaseModel):
    u: int | str

    @pydantic.model_validator(mode="before")
    @classmethod
    def _keep(cls, data: Any) -> Any:
        return data


def loose_serde() -> MsgpackSerializer:
    return MsgpackSerializer(
        allowlist=[*m.ALL, *((__name__, c.__name__) for c in (*PLAIN, Kind, Loose, WithUnion))]
    )


def test_which_models_are_loose() -> None:
    assert _pydantic._loose_model(Loose) == (
        ("u", "d", "items", "shape", "shapes", "leaf", "when"),
        True,
        ("shape", "shapes", "leaf"),
    )
    assert _pydantic._loose_model(LooseWithValidator) is not None
    assert _pydantic._loose_model(WithUnion) is not None
    for cls in (
        WithFieldSerializer,
        WithModelSerializer,
        WithAnnotatedSerializer,
        WithExcluded,
        SerializedByAlias,
        m.Aliased,
        m.WithComputed,
        pydantic.RootModel[int],
    ):
        assert _pydantic._loose_model(cls) is None, cls


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=6)
    | st.binary(max_size=4)
)
# what a loose field may hold: plain values and the values model_dump() changes
odd = (
    st.builds(Leaf, label=st.text(max_size=4))
    | st.sampled_from(Kind)
    | st.tuples(st.integers())
    | st.datetimes()
    | st.uuids()
    | st.integers(min_value=2**64)
    | st.sets(st.integers(), max_size=2)
)
anything = st.recursive(
    json_leaves | odd,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
shapes = st.builds(Shape, name=st.text(max_size=4))


@settings(max_examples=300, deadline=None)
@given(
    u=st.integers(-5, 5) | st.text(max_size=4),
    d=st.dictionaries(st.text(max_size=4), anything, max_size=3),
    items=st.lists(anything, max_size=3),
    shape=st.none() | shapes,
    shape_list=st.lists(shapes, max_size=2),
    leaf=st.none() | st.builds(Leaf, label=st.text(max_size=4)),
    when=st.none() | st.text(max_size=4) | st.datetimes(),
    extra=st.dictionaries(st.sampled_from(["x", "y"]), anything, max_size=2),
)
def test_any_loose_value_is_written_as_model_dump_writes_it(
    u: Any, d: Any, items: Any, shape: Any, shape_list: Any, leaf: Any, when: Any, extra: Any
) -> None:
    value = Loose(u=u, d=d, items=items, shape=shape, shapes=shape_list, leaf=leaf, when=when)
    for k, v in extra.items():
        setattr(value, k, v)  # extra="allow": kept in __pydantic_extra__
    assert loose_serde().dumps_typed({"v": value})[1] == dumped_bytes(value)


def test_loose_values_changed_behind_pydantics_back_are_written_as_model_dump_does() -> None:
    value = Loose(u=1, shape={"name": "sq", "sides": 4})
    value.shape["colour"] = "red"  # type: ignore[index]  # not a Shape key: model_dump drops it
    assert loose_serde().dumps_typed({"v": value})[1] == dumped_bytes(value)
    reordered = Loose(u=1, d={"a": 1})
    del reordered.__dict__["u"]
    reordered.__dict__["u"] = 1
    assert loose_serde().dumps_typed({"v": reordered})[1] == dumped_bytes(reordered)
    union = WithUnion(x="s")
    assert loose_serde().dumps_typed({"v": union})[1] == dumped_bytes(union)


def test_loose_models_get_the_loose_encoder() -> None:
    loose_serde().dumps_typed(Loose(u=1))
    assert _ext._ENCODERS[Loose][0].__name__ == "enc_loose"


# --- the kill switch: TETHER_PYDANTIC_FAST=0 (tether.serde._pydantic.FAST) ------------

KILL_SWITCH_PAYLOADS = [
    WIDE,
    Wide(s="", i=0, f=0, b=False, raw=b""),
    Inner(leaf=Leaf(label="only")),
    Inner(leaf=SubLeaf(label="l", secret=1)),
    m.Person(name="ada", age=36, address=m.Address(city="London"), tags=("x",)),
    WithFieldSerializer(x=1),
    WithModelSerializer(x=1),
    WithAnnotatedSerializer(x=1),
    WithExcluded(x=1, hidden=2),
    WithUnion(x="s"),
    WithSet(uniq={0, 5, -3}),
    SerializedByAlias(x=1),
    Loose(u=1, d={"a": [1, "b"]}, items=[None, 2.5], shape={"name": "sq", "sides": 4}),
    Loose(u="x", leaf=Leaf(label="l"), when=dt.datetime(2026, 1, 2)),
]


def _kill_switch_serde() -> MsgpackSerializer:
    return MsgpackSerializer(allowlist=[*m.ALL, *PLAIN, *NOT_PLAIN, Kind, Loose, SubLeaf])


def test_the_kill_switch_writes_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = [_kill_switch_serde().dumps_typed({"v": v}) for v in KILL_SWITCH_PAYLOADS]
    assert _ext._ENCODERS[Wide][0].__name__ == "enc_plain"
    assert _ext._ENCODERS[Loose][0].__name__ == "enc_loose"
    monkeypatch.setattr(_pydantic, "FAST", False)
    monkeypatch.setattr(_ext, "_ENCODERS", {})  # the encoders are made once per class
    slow = [_kill_switch_serde().dumps_typed({"v": v}) for v in KILL_SWITCH_PAYLOADS]
    made = {enc.__name__ for enc, _ in _ext._ENCODERS.values()}
    assert "enc_plain" not in made
    assert "enc_loose" not in made
    assert slow == fast  # byte for byte, so what is read back is the same too


@pytest.mark.parametrize(("value", "fast"), [("0", False), (" 0 ", False), ("1", True), ("", True)])
def test_the_kill_switch_is_read_from_the_environment(value: str, fast: bool) -> None:
    code = "import tether.serde._pydantic as p; print(p.FAST)"
    src = str(Path(_pydantic.__file__).parents[2])  # where tether is imported from
    path = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TETHER_PYDANTIC_FAST": value}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(fast)

"""Every supported type comes back with its type (SPEC S3.1, S3.2)."""

from __future__ import annotations

import collections
import decimal
import ipaddress
import pathlib
import pickle
import re
import subprocess
import sys
import uuid
import zoneinfo
from datetime import UTC, date, datetime, time, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from tether.errors import DecodeError, EncodeError
from tether.serde import MsgpackSerializer, SerializerCompat, as_typed

from . import models as m

PARIS = zoneinfo.ZoneInfo("Europe/Paris")
PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"), tags=("x", "y"))

VALUES: list[Any] = [
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,
    2**200,
    -(2**90),
    10**5000,  # beyond CPython's 4300-digit str<->int limit
    1.5,
    float("inf"),
    True,
    "",
    "héllo \u2603",
    [1, [2, [3]]],
    {"a": {"b": [1, 2]}},
    {1: "int key", 2.5: "float key", None: "none key", False: "bool key"},
    {(1, 2): "tuple key", ("a", (3, 4)): "nested tuple key"},
    (),
    (1, "a", None),
    ((1, 2), [3, (4,)]),
    [(1, 2), (3, 4)],
    {"t": (1, 2)},
    set(),
    {1, 2, 3},
    {(1, 2), (3, 4)},
    frozenset({"a", (1, (2, 3))}),
    collections.deque([1, (2, 3)]),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    uuid.uuid4(),
    decimal.Decimal("3.14159265358979323846264338327950288"),
    decimal.Decimal("-Infinity"),
    datetime(2026, 1, 2, 3, 4, 5, 6),
    datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
    datetime(2026, 7, 1, 12, tzinfo=PARIS),
    datetime(2026, 10, 25, 2, 30, tzinfo=PARIS, fold=1),
    date(1999, 12, 31),
    time(23, 59, 59, 999999),
    time(1, 2, tzinfo=timezone(timedelta(hours=3), "X")),
    timedelta(days=-3, seconds=5, microseconds=7),
    UTC,
    timezone(timedelta(hours=2), "CEST"),
    PARIS,
    m.Color.RED,
    m.Level.HIGH,
    m.Flags.A | m.Flags.B,
    m.Point(1, 2),
    pathlib.Path("/tmp/a/b.txt"),
    pathlib.PurePosixPath("rel/x"),
    pathlib.PureWindowsPath("C:/x/y"),
    re.compile(r"a+b?", re.IGNORECASE | re.MULTILINE),
    re.compile(rb"\x00bytes"),
    ipaddress.IPv4Address("10.1.2.3"),
    ipaddress.IPv6Address("::1"),
    ipaddress.IPv4Network("10.0.0.0/8"),
    ipaddress.IPv6Network("2001:db8::/32"),
    ipaddress.IPv4Interface("10.0.0.1/24"),
    ipaddress.IPv6Interface("2001:db8::1/64"),
    PERSON,
    m.Legacy(name="old", count=3),
    m.Item("k", 1),
    m.Frozen(uuid.UUID(int=7), datetime(2026, 1, 1, tzinfo=UTC), m.Color.BLUE),
    m.Holder(PERSON, [m.Item("a", 1, "n"), m.Item("b", 2)], m.Point(3), {"when": date(2020, 1, 1)}),
    m.Outer.Inner(5),
    b"nested bytes in a list are fine".split(),
]


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, np.ndarray):
        return (
            isinstance(got, np.ndarray)
            and got.dtype == want.dtype
            and got.shape == want.shape
            and bool((got == want).all())
        )
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, list | tuple | collections.deque):
        return len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want, strict=True))
    return bool(got == want)


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_value_round_trips_with_its_type(serde: MsgpackSerializer, value: Any) -> None:
    tag, data = serde.dumps_typed(value)
    assert tag == "msgpack"
    got = serde.loads_typed((tag, data))
    assert _same(got, value), (got, value)
    # and nested inside containers
    wrapped = {"v": [value, {"deep": (value,)}]}
    assert _same(serde.loads_typed(serde.dumps_typed(wrapped)), wrapped)


def test_aware_datetimes_keep_offset_and_zone(serde: MsgpackSerializer) -> None:
    fixed = datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=1)))
    zoned = datetime(2026, 3, 29, 1, 30, tzinfo=PARIS)
    got_fixed = serde.loads_typed(serde.dumps_typed(fixed))
    got_zoned = serde.loads_typed(serde.dumps_typed(zoned))
    assert got_fixed.utcoffset() == timedelta(hours=1)
    assert got_zoned.tzinfo is PARIS  # ZoneInfo instances are cached per key
    # the zone's DST rules survive: that night Paris moves to summer time
    assert (got_zoned + timedelta(hours=3)).utcoffset() == timedelta(hours=2)


def test_enum_subclasses_of_str_and_int_stay_enums(serde: MsgpackSerializer) -> None:
    got = serde.loads_typed(serde.dumps_typed({"c": m.Color.RED, "l": [m.Level.LOW]}))
    assert got["c"] is m.Color.RED
    assert got["l"][0] is m.Level.LOW


def test_nested_pydantic_inside_dataclass(serde: MsgpackSerializer) -> None:
    holder = m.Holder(PERSON, [], m.Point(1, 2))
    got = serde.loads_typed(serde.dumps_typed(holder))
    assert isinstance(got.person, m.Person)
    assert isinstance(got.person.address, m.Address)
    assert got.person.tags == ("x", "y")
    assert isinstance(got.point, m.Point)


def test_dataclass_with_non_init_field(serde: MsgpackSerializer) -> None:
    obj = m.WithNonInit(1)
    obj.b = 9
    got = serde.loads_typed(serde.dumps_typed(obj))
    assert (got.a, got.b) == (1, 9)


def test_numpy_arrays(serde: MsgpackSerializer) -> None:
    for arr in (
        np.arange(12, dtype=np.int32).reshape(3, 4),
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        np.arange(20)[::3],  # not contiguous
        np.zeros((0, 3)),
        np.array(3.5),
        np.array([1 + 2j], dtype=">c16"),
        np.arange(300000, dtype=np.uint8),  # bin32 header
    ):
        got = serde.loads_typed(serde.dumps_typed(arr))
        assert _same(got, arr)
        got[...] = 0  # writable, like the array that was stored


def test_tags_for_none_bytes_bytearray(serde: MsgpackSerializer) -> None:
    assert serde.dumps_typed(None) == ("null", b"")
    assert serde.loads_typed(("null", b"")) is None
    assert serde.dumps_typed(b"\x00raw") == ("bytes", b"\x00raw")
    assert serde.loads_typed(("bytes", b"\x00raw")) == b"\x00raw"
    tag, data = serde.dumps_typed(bytearray(b"ba"))
    assert (tag, data) == ("bytearray", b"ba")
    got = serde.loads_typed((tag, data))
    assert type(got) is bytearray
    assert got == bytearray(b"ba")


class Opaque:
    def __init__(self, v: int) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.v == self.v

    __hash__ = None  # type: ignore[assignment]


def test_unsupported_type_raises_encode_error_with_path(serde: MsgpackSerializer) -> None:
    value = {"messages": [1, 2, {"x": Opaque(1)}]}
    with pytest.raises(EncodeError) as info:
        serde.dumps_typed(value)
    assert info.value.path == "$.messages[2].x"
    assert "test_roundtrip.Opaque" in str(info.value)
    assert "at `$.messages[2].x`" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_encode_error_path_inside_dataclass(serde: MsgpackSerializer) -> None:
    with pytest.raises(EncodeError) as info:
        serde.dumps_typed([m.Holder(PERSON, [], m.Point(1), {"bad": Opaque(2)})])
    assert info.value.path == "$[0].extra.bad"


def test_class_defined_in_a_function_is_refused_at_encode(serde: MsgpackSerializer) -> None:
    import dataclasses

    @dataclasses.dataclass
    class Local:
        a: int

    with pytest.raises(EncodeError, match="inside a function"):
        serde.dumps_typed({"x": Local(1)})


def test_pickle_only_when_enabled() -> None:
    strict = MsgpackSerializer()
    with pytest.raises(DecodeError, match="pickle_fallback=True"):
        strict.loads_typed(("pickle", pickle.dumps(1)))
    with_pickle = MsgpackSerializer(pickle_fallback=True)
    tag, data = with_pickle.dumps_typed({"o": Opaque(3)})
    assert tag == "pickle"
    assert with_pickle.loads_typed((tag, data)) == {"o": Opaque(3)}
    # supported values still use msgpack
    assert with_pickle.dumps_typed({"a": 1})[0] == "msgpack"
    with pytest.raises(DecodeError, match="invalid pickle"):
        with_pickle.loads_typed(("pickle", b"\x80\x05garbage"))


class PlainSerde:
    """An untyped dumps/loads serializer, the kind SerializerCompat adapts."""

    def dumps(self, obj: Any) -> bytes:
        return repr(obj).encode()

    def loads(self, data: bytes) -> Any:
        import ast

        return ast.literal_eval(data.decode())


def test_compat_adapter_for_plain_serializers() -> None:
    typed = as_typed(PlainSerde())
    assert isinstance(typed, SerializerCompat)
    tag, data = typed.dumps_typed({"a": (1, 2)})
    assert tag == "dict"
    assert typed.loads_typed((tag, data)) == {"a": (1, 2)}
    native = MsgpackSerializer()
    assert as_typed(native) is native


def test_with_allowlist_returns_new_instance_or_self() -> None:
    base = MsgpackSerializer(allowlist=[("tests.serde.models", "Item")], on_mismatch="raw")
    assert base.with_allowlist([("tests.serde.models", "Item")]) is base
    assert base.with_allowlist([]) is base
    more = base.with_allowlist([m.Point])
    assert more is not base
    assert more.allowlist == {("tests.serde.models", "Item"), ("tests.serde.models", "Point")}
    assert more.on_mismatch == "raw"
    assert base.allowlist == {("tests.serde.models", "Item")}
    data = more.dumps_typed(m.Point(1, 2))
    assert more.loads_typed(data) == m.Point(1, 2)
    with pytest.raises(DecodeError, match="not in the allowlist"):
        base.loads_typed(data)


def test_numpy_stays_optional(tmp_path: pathlib.Path) -> None:
    """tether imports and works with numpy unavailable; a stored array is a clear error."""
    stored = MsgpackSerializer().dumps_typed({"a": np.arange(3)})[1]
    script = f"""
import sys
sys.modules["numpy"] = None  # makes `import numpy` fail
from tether.serde import MsgpackSerializer
from tether.errors import DecodeError
s = MsgpackSerializer()
assert s.loads_typed(s.dumps_typed({{"a": (1, 2)}})) == {{"a": (1, 2)}}
try:
    s.loads_typed(("msgpack", {stored!r}))
except DecodeError as exc:
    assert "numpy is not installed" in str(exc), exc
    assert exc.path == "$.a", exc.path
    print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"

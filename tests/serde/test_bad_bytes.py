"""Bad bytes are a DecodeError saying where, never another exception or a hang."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import ormsgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer

from . import models as m

SERDE = MsgpackSerializer(allowlist=m.ALL)
PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"))


def ext(code: int, envelope: Any) -> bytes:
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(envelope)))


def test_unknown_tag() -> None:
    with pytest.raises(DecodeError, match="unknown serialization tag 'yaml'"):
        SERDE.loads_typed(("yaml", b"a: 1"))


def test_not_a_pair() -> None:
    with pytest.raises(DecodeError, match=r"\(tag, bytes\)"):
        SERDE.loads_typed("msgpack")  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match="must be bytes"):
        SERDE.loads_typed(("msgpack", "text"))  # type: ignore[arg-type]


def test_truncated_payload() -> None:
    _tag, data = SERDE.dumps_typed({"messages": [PERSON] * 3})
    for cut in range(1, len(data), 7):
        with pytest.raises(DecodeError):
            SERDE.loads_typed(("msgpack", data[:cut]))


def test_unknown_ext_code_names_code_and_path() -> None:
    data = ormsgpack.packb({"messages": [1, 2, 3, ormsgpack.Ext(42, b"\x90")]})
    with pytest.raises(DecodeError, match="unknown ext code 42") as info:
        SERDE.loads_typed(("msgpack", data))
    assert info.value.path == "$.messages[3]"
    assert "at `$.messages[3]`" in str(info.value)


@pytest.mark.parametrize(
    ("code", "envelope", "message"),
    [
        (0, "not an array", "malformed ext 0"),
        (0, ["uuid"], "malformed ext 0"),
        (0, [1, 2, 3], "malformed ext 0"),
        (0, ["uuid", "UUID", 12], "malformed uuid.UUID payload"),
        (0, ["uuid", "UUID", "zz"], "malformed uuid.UUID payload"),
        (0, ["decimal", "Decimal", "1.2.3"], "decimal.Decimal"),
        (0, ["builtins", "set", 5], "malformed builtins.set payload"),
        (0, ["zoneinfo", "ZoneInfo", "Mars/Olympus"], "zoneinfo.ZoneInfo"),
        (1, ["datetime", "date", [2020, 13, 1]], "malformed datetime.date payload"),
        (1, ["datetime", "timedelta", "x"], "malformed datetime.timedelta payload"),
        (1, ["re", "compile", ["(", 0]], "re.compile"),
        (1, ["builtins", "int", ["0xZZ", 0]], "malformed builtins.int payload"),
        (2, ["datetime", "time", {"hour": 99}], "malformed datetime.time payload"),
        (2, ["tests.serde.models", "Item", ["a", 1]], "expected a map of field names"),
        (1, ["tests.serde.models", "Point", {"x": 1}], "expected an argument array"),
        (3, ["datetime", "datetime", "yesterday", "fromisoformat"], "datetime.datetime"),
        (
            5,
            ["tests.serde.models", "Person", {"name": "x"}, "model_validate_json", "extra"],
            "ext 5",
        ),
        (6, ["<f8", [2], "C", b"\x00" * 3], "ext 6"),
        (6, ["|O", [1], "C", b"\x00" * 8], "dtype object"),
        (6, "nope", "ext 6"),
    ],
)
def test_wrong_payload_shape_inside_an_ext(code: int, envelope: Any, message: str) -> None:
    data = ormsgpack.packb({"state": [ormsgpack.Ext(code, ormsgpack.packb(envelope))]})
    with pytest.raises(DecodeError, match=message) as info:
        SERDE.loads_typed(("msgpack", data))
    assert info.value.path == "$.state[0]"


def test_path_reaches_into_dataclass_fields() -> None:
    bad_uuid = ormsgpack.Ext(0, ormsgpack.packb(["uuid", "UUID", "not-hex"]))
    frozen = ormsgpack.Ext(
        2,
        ormsgpack.packb(["tests.serde.models", "Frozen", {"id": bad_uuid, "when": 1, "color": 2}]),
    )
    data = ormsgpack.packb({"items": [0, frozen]})
    with pytest.raises(DecodeError, match=r"uuid\.UUID") as info:
        SERDE.loads_typed(("msgpack", data))
    assert info.value.path == "$.items[1].id"


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    deep = b"\x91" * 100_000 + b"\xc0"
    with pytest.raises(DecodeError):
        SERDE.loads_typed(("msgpack", deep))
    inner: Any = None
    for _ in range(5000):  # ext in ext in ext...: Python recursion
        inner = ormsgpack.Ext(0, ormsgpack.packb(["builtins", "tuple", [inner]]))
    with pytest.raises(DecodeError):
        SERDE.loads_typed(("msgpack", ormsgpack.packb(inner)))


def test_huge_declared_length_does_not_allocate() -> None:
    for data in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xc6\xff\xff\xff\xff"):
        with pytest.raises(DecodeError):
            SERDE.loads_typed(("msgpack", data))


def test_large_top_level_array_damaged_anywhere_in_its_header() -> None:
    """A whole-message array is read in place (no ormsgpack pass): damage still fails cleanly."""
    import numpy as np

    arr = np.arange(5000, dtype=np.float64).reshape(50, 100)
    payload = SERDE.dumps_typed(arr)[1]
    assert np.array_equal(SERDE.loads_typed(("msgpack", payload)), arr)
    for pos in range(40):
        for byte in (0x00, 0x01, 0x7F, 0x93, 0x94, 0xC4, 0xC6, 0xCE, 0xFF):
            mutated = payload[:pos] + bytes([byte]) + payload[pos + 1 :]
            _decode_or_decode_error(mutated)
    for cut in (1, 3, 6, 10, 20, len(payload) - 1):
        with pytest.raises(DecodeError):
            SERDE.loads_typed(("msgpack", payload[:cut]))
    wrong_shape = ext(6, ["<f8", [50, 101], "C", arr.tobytes()])
    with pytest.raises(DecodeError, match=r"numpy array\) payload: 40000 bytes for shape"):
        SERDE.loads_typed(("msgpack", wrong_shape))


def _valid_payloads() -> list[bytes]:
    import collections
    import datetime as dt
    import uuid

    import numpy as np

    values = [
        {"messages": [{"role": "user", "content": "hi"}] * 3},
        [PERSON, m.Item("a", 1), m.Point(1, 2), (1, 2), {3, 4}],
        m.Holder(PERSON, [m.Item("b", 2)], m.Point(0), {"d": dt.date(2020, 1, 1)}),
        {"u": uuid.UUID(int=3), "t": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "c": m.Color.RED},
        {"q": collections.deque([1]), "n": np.arange(4), "big": 2**80},
        np.arange(3000, dtype=np.int64),  # a whole message read in place
    ]
    return [SERDE.dumps_typed(v)[1] for v in values]


VALID = _valid_payloads()


def _decode_or_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        SERDE.loads_typed(("msgpack", data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    _decode_or_decode_error(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_mutated_valid_payloads(payload: bytes, data: st.DataObject) -> None:
    buf = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        pos = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del buf[pos:]
        elif op == "insert":
            buf[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif buf:
            del buf[pos]
    _decode_or_decode_error(bytes(buf))


def test_every_single_byte_flip_of_a_payload() -> None:
    """Exhaustive for one payload: each position set to a few byte values."""
    payload = VALID[1]
    rng = random.Random(0)
    for pos in range(len(payload)):
        for byte in (0x00, 0xFF, 0xC1, 0xD4, rng.randrange(256)):
            mutated = payload[:pos] + bytes([byte]) + payload[pos + 1 :]
            _decode_or_decode_error(mutated)


def test_random_legacy_json_is_a_decode_error() -> None:
    rng = random.Random(1)
    for _ in range(200):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        with contextlib.suppress(DecodeError):
            SERDE.loads_typed(("json", blob))


def test_legacy_json_is_utf8_and_imports_no_codec() -> None:
    """Found by the fuzz target: json.loads guesses UTF-16/32 from a payload's first
    bytes and imports that codec's module, a module chosen by stored data."""
    import subprocess
    import sys

    payloads = [
        '{"a": 1}'.encode(codec) for codec in ("utf-16", "utf-16-be", "utf-32", "utf-32-le")
    ]
    script = f"""
import sys
from tether.errors import DecodeError
from tether.serde import MsgpackSerializer
before = set(sys.modules)
for payload in {payloads!r}:
    try:
        MsgpackSerializer().loads_typed(("json", payload))
    except DecodeError as exc:
        assert "legacy json" in str(exc), exc
    else:
        raise AssertionError("read a UTF-16/32 payload")
assert set(sys.modules) == before, sorted(set(sys.modules) - before)
print("ok")
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr

"""Only tether's errors leave the serializer (issue #18.10).

A class's own code may raise anything on stored data it no longer expects
(AttributeError, KeyError, RuntimeError...); the caller must still get a
DecodeError that names the type and where in the value it is, so that a
saver's read fails as a tether error and the CLI prints one line.
"""

from __future__ import annotations

import json
from typing import Any

import ormsgpack
import pytest

from tether.errors import DecodeError, EncodeError
from tether.serde import MsgpackSerializer

from . import models as m

SERDE = MsgpackSerializer(allowlist=m.ALL)
FAILS = ["attribute", "key", "runtime", "lookup", "zero"]


def lc(name: str, **kwargs: Any) -> dict[str, Any]:
    """A legacy ``json`` constructor object, as LangGraph's old format wrote them."""
    return {
        "lc": 2,
        "type": "constructor",
        "id": ["tests", "serde", "models", name],
        "kwargs": kwargs,
    }


@pytest.mark.parametrize("fail", FAILS)
def test_legacy_json_constructor_errors_are_decode_errors(fail: str) -> None:
    stored = json.dumps({"state": [1, {"x": lc("Fussy", fail=fail)}]}).encode()
    with pytest.raises(DecodeError, match=f"Fussy refuses {fail}") as info:
        SERDE.loads_typed(("json", stored))
    assert info.value.type_name == "tests.serde.models.Fussy"
    assert info.value.path == "$.state[1].x"


@pytest.mark.parametrize("fail", FAILS)
def test_legacy_json_dataclass_errors_are_decode_errors(fail: str) -> None:
    stored = json.dumps([lc("Item", k="a", count=1), lc("FussyRecord", fail=fail)]).encode()
    with pytest.raises(DecodeError, match="FussyRecord") as info:
        SERDE.loads_typed(("json", stored))
    assert info.value.type_name == "tests.serde.models.FussyRecord"
    assert info.value.path == "$[1]"


def test_legacy_json_args_and_enum_errors() -> None:
    args = {
        "lc": 2,
        "type": "constructor",
        "id": ["tests", "serde", "models", "FussyColor"],
        "args": ["x"],
    }
    with pytest.raises(DecodeError, match="no color") as info:
        SERDE.loads_typed(("json", json.dumps({"c": args}).encode()))
    assert info.value.type_name == "tests.serde.models.FussyColor"
    assert info.value.path == "$.c"


def _ext(code: int, envelope: list[Any]) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(envelope))


@pytest.mark.parametrize("fail", FAILS)
def test_msgpack_constructor_errors_name_the_type(fail: str) -> None:
    """The same classes stored as ext values: the DecodeError names type and path."""
    for code, envelope in [
        (2, ["tests.serde.models", "Fussy", {"fail": fail}]),
        (2, ["tests.serde.models", "FussyRecord", {"fail": fail}]),
        (1, ["tests.serde.models", "Fussy", [fail]]),
    ]:
        data = ormsgpack.packb({"items": [0, _ext(code, envelope)]})
        with pytest.raises(DecodeError, match="refuses") as info:
            SERDE.loads_typed(("msgpack", data))
        assert info.value.type_name == f"tests.serde.models.{envelope[1]}"
        assert info.value.path == "$.items[1]"


def test_msgpack_enum_missing_hook_error() -> None:
    data = ormsgpack.packb([_ext(0, ["tests.serde.models", "FussyColor", "blue"])])
    with pytest.raises(DecodeError, match="no color") as info:
        SERDE.loads_typed(("msgpack", data))
    assert info.value.type_name == "tests.serde.models.FussyColor"


def test_an_upgrade_function_sees_the_failure() -> None:
    """A constructor's own failure is a schema mismatch: upgrades and raw mode apply."""
    serde = MsgpackSerializer(
        allowlist=m.ALL,
        upgrades={("tests.serde.models", "Fussy"): lambda fields: ("upgraded", fields)},
    )
    data = ormsgpack.packb(_ext(2, ["tests.serde.models", "Fussy", {"fail": "key"}]))
    assert serde.loads_typed(("msgpack", data)) == ("upgraded", {"fail": "key"})


@pytest.mark.parametrize(
    "data",
    [("bytes", 5), ("bytearray", "text"), ("json", 7), ("json", "{}"), ("msgpack", None)],
)
def test_payloads_that_are_not_bytes(data: Any) -> None:
    """bytes(5) is five zero bytes: a wrong payload type was returned as data."""
    with pytest.raises(DecodeError, match="must be bytes"):
        SERDE.loads_typed(data)


def test_pickle_failures_are_encode_errors() -> None:
    serde = MsgpackSerializer(pickle_fallback=True)
    with pytest.raises(EncodeError, match="pickle"):
        serde.dumps_typed({"f": lambda: None})


def test_an_exception_that_cannot_be_printed() -> None:
    """The message falls back to the exception's type when its repr() fails too."""
    for code, envelope in [
        (2, ["tests.serde.models", "Fussy", {"fail": "unprintable"}]),
        (2, ["tests.serde.models", "FussyRecord", {"fail": "unprintable"}]),
    ]:
        data = ormsgpack.packb([_ext(code, envelope)])
        with pytest.raises(DecodeError, match="UnprintableError whose repr"):
            SERDE.loads_typed(("msgpack", data))
    stored = json.dumps([lc("Fussy", fail="unprintable")]).encode()
    with pytest.raises(DecodeError, match="UnprintableError whose repr"):
        SERDE.loads_typed(("json", stored))

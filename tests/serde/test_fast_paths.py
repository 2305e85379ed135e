"""Decoding's fast paths (a type seen before) keep every check of the first read.

A serializer resolves a class once and then builds it straight from later
payloads (tether.serde._decode.Decoder.hook): Enum members by value and then
by their exact bytes, pydantic models validated after a key check, dataclasses
after a type check, safe built-in types without a lookup. These tests read each kind twice
or more with one serializer, so the later reads take the fast path, and check
that the allowlist, the schema-mismatch policies (SPEC S3.4, S3.5) and the
error reporting behave exactly as on the first read.
"""

from __future__ import annotations

import uuid
import warnings
from datetime import date, datetime
from typing import Any

import ormsgpack
import pydantic
import pytest

from tether.errors import DecodeError, EncodeError
from tether.serde import MsgpackSerializer, SchemaMismatchWarning
from tether.serde._classinfo import counts_fields

from . import models as m

PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"))


def written(code: int, name: str, arg: Any, *rest: Any) -> tuple[str, bytes]:
    """``{"items": [value]}`` as stored for tests.serde.models.<name>, written by hand."""
    envelope = ormsgpack.packb(["tests.serde.models", name, arg, *rest])
    return "msgpack", ormsgpack.packb({"items": [ormsgpack.Ext(code, envelope)]})


def serde(**kwargs: Any) -> MsgpackSerializer:
    return MsgpackSerializer(allowlist=m.ALL, **kwargs)


# --- Enum members ----------------------------------------------------------------------


def test_enum_members_are_the_members() -> None:
    s = serde()
    stored = s.dumps_typed([m.Color.RED, m.Color.BLUE, m.Color.RED, m.Level.HIGH])
    for _ in range(3):
        got = s.loads_typed(stored)
        assert got == [m.Color.RED, m.Color.BLUE, m.Color.RED, m.Level.HIGH]
        assert got[0] is m.Color.RED
        assert got[3] is m.Level.HIGH


def test_known_enum_bytes_are_still_refused_by_another_serializer() -> None:
    stored = serde().dumps_typed({"c": m.Color.RED})
    warm = serde()
    for _ in range(2):
        assert warm.loads_typed(stored) == {"c": m.Color.RED}
    with pytest.raises(DecodeError, match="not in the allowlist") as info:
        MsgpackSerializer().loads_typed(stored)
    assert info.value.path == "$.c"


def test_enum_value_no_longer_a_member_once_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m, "Color", m.ColorShrunk)  # the deployed class lost RED
    old, current = written(0, "Color", "red"), written(0, "Color", "blue")
    strict, raw = serde(), serde(on_mismatch="raw")
    for s in (strict, raw):
        for _ in range(2):
            assert s.loads_typed(current) == {"items": [m.ColorShrunk.BLUE]}
    for _ in range(2):  # every read: nothing about "red" is remembered
        with pytest.raises(DecodeError, match="'red' is not a member") as info:
            strict.loads_typed(old)
        assert info.value.path == "$.items[0]"
        with pytest.warns(SchemaMismatchWarning, match="'red' is not a member"):
            assert raw.loads_typed(old) == {"items": ["red"]}
    upgraded = serde(upgrades={("tests.serde.models", "Color"): lambda v: m.ColorShrunk.BLUE})
    for _ in range(2):
        assert upgraded.loads_typed(current) == {"items": [m.ColorShrunk.BLUE]}
        assert upgraded.loads_typed(old) == {"items": [m.ColorShrunk.BLUE]}


def test_enum_lookup_by_value_falls_back_to_the_class() -> None:
    s = serde()
    stored = s.dumps_typed([m.Flags.A | m.Flags.B, m.Flags.A])  # a composite flag value
    for _ in range(3):
        assert s.loads_typed(stored) == [m.Flags.A | m.Flags.B, m.Flags.A]


# --- pydantic v2 ------------------------------------------------------------------------


def test_pydantic_removed_field_is_found_once_warm() -> None:
    s = serde()
    current = s.dumps_typed({"items": [PERSON]})
    for _ in range(2):
        assert s.loads_typed(current) == {"items": [PERSON]}
    # written when Person had a nickname (tags as a plain list: hand-written bytes)
    stored = PERSON.model_dump() | {"tags": [], "nickname": "ad"}
    for _ in range(2):
        with pytest.raises(DecodeError, match="stored field 'nickname' no longer exists") as info:
            s.loads_typed(written(5, "Person", stored, "model_validate_json"))
        assert info.value.type_name == "tests.serde.models.Person"
        assert info.value.path == "$.items[0]"
    with pytest.warns(SchemaMismatchWarning, match="nickname"):
        got = serde(on_mismatch="raw").loads_typed(written(5, "Person", stored))
    assert got == {"items": [stored]}


def test_pydantic_type_and_missing_fields_are_found_once_warm() -> None:
    s = serde()
    for _ in range(2):
        s.loads_typed(s.dumps_typed({"items": [PERSON]}))
    bad_type = PERSON.model_dump() | {"age": "old"}
    with pytest.raises(DecodeError, match="validation failed: field 'age'"):
        s.loads_typed(written(5, "Person", bad_type, "model_validate_json"))
    missing = {"age": 36, "address": {"city": "London"}}
    with pytest.raises(
        DecodeError, match=r"field 'name' of tests\.serde\.models\.Person is required"
    ):
        s.loads_typed(written(5, "Person", missing))
    # a field added since with a default is not a mismatch
    older = {"name": "ada", "age": 36, "address": {"city": "London"}}
    assert s.loads_typed(written(5, "Person", older)) == {"items": [PERSON]}
    # a map is required: a value built by a nested ext is not fields
    with pytest.raises(DecodeError, match="expected a map of field names"):
        s.loads_typed(written(5, "Person", [1, 2]))


class WithPostInit(pydantic.BaseModel):
    name: str

    def model_post_init(self, context: Any) -> None:
        self.name = self.name.upper()


class WithPrivate(pydantic.BaseModel):
    name: str
    _cache: int = 0


class Migrating(pydantic.BaseModel):
    """Renames a stored key itself: its validator sees the stored data first."""

    full_name: str

    @pydantic.model_validator(mode="before")
    @classmethod
    def _rename(cls, data: Any) -> Any:
        if isinstance(data, dict) and "name" in data:
            data = {"full_name": data["name"], **{k: v for k, v in data.items() if k != "name"}}
        return data


def test_which_models_count_their_fields() -> None:
    """Only models whose own code cannot touch validation skip the key comparison."""
    assert counts_fields(m.Person)
    assert counts_fields(m.Address)
    for cls in (m.Open, m.CustomInit, WithPostInit, WithPrivate, Migrating):
        assert not counts_fields(cls), cls


def test_a_model_validator_does_not_hide_a_removed_field() -> None:
    """As on the first read: a stored key the class lacks is a mismatch, whatever
    the model's own validator would make of it (register an upgrade for that)."""
    s = MsgpackSerializer(allowlist=[(__name__, "Migrating")])
    current = ormsgpack.packb(
        ormsgpack.Ext(5, ormsgpack.packb([__name__, "Migrating", {"full_name": "a"}]))
    )
    old = ormsgpack.packb(ormsgpack.Ext(5, ormsgpack.packb([__name__, "Migrating", {"name": "a"}])))
    for _ in range(2):
        assert s.loads_typed(("msgpack", current)) == Migrating(full_name="a")
        with pytest.raises(DecodeError, match="stored field 'name' no longer exists"):
            s.loads_typed(("msgpack", old))


@pytest.mark.parametrize(
    "value",
    [
        m.Open(name="o", extra_field=1),
        m.Closed(name="c"),
        m.Aliased(fullName="a"),
        m.WithComputed(a=2),
    ],
    ids=lambda v: type(v).__name__,
)
def test_models_off_the_plain_path_round_trip_warm(value: pydantic.BaseModel) -> None:
    s = serde()
    stored = s.dumps_typed({"items": [value]})
    for _ in range(3):
        got = s.loads_typed(stored)["items"][0]
        assert got == value
        assert got.model_extra == value.model_extra


def test_custom_init_runs_on_every_read() -> None:
    s = serde()
    stored = s.dumps_typed(m.CustomInit(name="x"))
    for _ in range(3):
        assert s.loads_typed(stored).inits == 2  # once when stored, once when read


def test_closed_model_refuses_unknown_keys_once_warm() -> None:
    s = serde()
    for _ in range(2):
        s.loads_typed(s.dumps_typed({"items": [m.Closed(name="c")]}))
    with pytest.raises(DecodeError, match="stored field 'x' no longer exists"):
        s.loads_typed(written(5, "Closed", {"name": "c", "x": 1}))


# --- safe built-in types -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "envelope", "message"),
    [
        (0, ["uuid", "UUID", "zz"], "malformed uuid.UUID payload"),
        (3, ["datetime", "datetime", 5, "fromisoformat"], "malformed datetime.datetime payload"),
        (3, ["datetime", "datetime", "2020-01-01", "fromtimestamp"], "refusing to call"),
        (1, ["datetime", "date", [2020, 13, 1]], "malformed datetime.date payload"),
    ],
)
def test_safe_types_check_their_input_once_warm(
    code: int, envelope: list[Any], message: str
) -> None:
    s = serde()
    s.loads_typed(s.dumps_typed([uuid.UUID(int=1), date(2020, 1, 1), datetime(2020, 1, 1)]))
    bad = ormsgpack.packb({"v": [ormsgpack.Ext(code, ormsgpack.packb(envelope))]})
    for _ in range(2):
        with pytest.raises(DecodeError, match=message) as info:
            s.loads_typed(("msgpack", bad))
        assert info.value.path == "$.v[0]"


# --- no state left behind by a failure --------------------------------------------------------


def test_a_decode_failure_leaves_nothing_behind() -> None:
    s = serde()
    unknown = ormsgpack.packb({"a": ormsgpack.Ext(42, b"\x90")})
    refused = ormsgpack.packb({"b": [ormsgpack.Ext(0, ormsgpack.packb(["os", "system", "x"]))]})
    with pytest.raises(DecodeError, match="unknown ext code 42"):
        s.loads_typed(("msgpack", unknown))
    assert s.loads_typed(s.dumps_typed([PERSON])) == [PERSON]
    with pytest.raises(DecodeError, match=r"refusing to construct os\.system") as info:
        s.loads_typed(("msgpack", refused))
    assert info.value.path == "$.b[0]"
    with pytest.raises(DecodeError, match="invalid msgpack data"):
        s.loads_typed(("msgpack", b"\xc1"))


def test_an_encode_failure_leaves_nothing_behind() -> None:
    s = serde()
    with pytest.raises(EncodeError, match=r"builtins\.object") as info:
        s.dumps_typed({"a": [object()]})
    assert info.value.path == "$.a[0]"
    assert s.loads_typed(s.dumps_typed([PERSON])) == [PERSON]

    class Local:
        pass

    with pytest.raises(EncodeError, match="Local") as info:
        s.dumps_typed({"b": Local()})
    assert info.value.path == "$.b"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert s.dumps_typed(1) == ("msgpack", b"\x01")

"""A stored value that no longer fits its class is never lost silently (SPEC S3.5).

Each test stores a value with today's class, then swaps the class under the
same (module, name) for its "next version" -- what a deploy does -- and reads
with a fresh serializer.
"""

from __future__ import annotations

import dataclasses
import enum
import warnings
from datetime import datetime
from typing import Any

import ormsgpack
import pydantic
import pytest

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer, SchemaMismatchWarning

from . import models as m

PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"))


def _store(value: Any) -> tuple[str, bytes]:
    return MsgpackSerializer(allowlist=m.ALL).dumps_typed({"items": [value]})


def _read(stored: tuple[str, bytes], **kwargs: Any) -> Any:
    return MsgpackSerializer(allowlist=m.ALL, **kwargs).loads_typed(stored)


CASES = [
    pytest.param(
        m.Item("a", 1, "n"),
        "Item",
        m.ItemWithoutK,
        ["stored field 'k' no longer exists on tests.serde.models.Item"],
        id="dataclass-removed",
    ),
    pytest.param(
        m.Item("a", 1),
        "Item",
        m.ItemRenamed,
        [
            "stored field 'k' no longer exists on tests.serde.models.Item",
            "field 'key' of tests.serde.models.Item is required but was not stored",
        ],
        id="dataclass-renamed",
    ),
    pytest.param(
        m.Item("a", 1),
        "Item",
        m.ItemCountStr,
        ["stored field 'count' holds int but tests.serde.models.Item.count is now str"],
        id="dataclass-type-changed",
    ),
    pytest.param(
        PERSON,
        "Person",
        m.PersonRenamed,
        [
            "stored field 'name' no longer exists on tests.serde.models.Person",
            "field 'full_name' of tests.serde.models.Person is required but was not stored",
        ],
        id="pydantic-renamed",
    ),
    pytest.param(
        PERSON,
        "Person",
        m.PersonAgeStrict,
        ["validation failed: field 'age'"],
        id="pydantic-type-changed",
    ),
    pytest.param(
        m.Point(1, 2),
        "Point",
        m.PointRenamed,
        ["stored field 'x' no longer exists on tests.serde.models.Point"],
        id="namedtuple-renamed",
    ),
    pytest.param(
        m.Color.RED,
        "Color",
        m.ColorShrunk,
        ["stored value 'red' is not a member of tests.serde.models.Color"],
        id="enum-member-removed",
    ),
]


@pytest.mark.parametrize(("value", "name", "new_cls", "problems"), CASES)
def test_mismatch_is_an_error_by_default(
    monkeypatch: pytest.MonkeyPatch, value: Any, name: str, new_cls: type, problems: list[str]
) -> None:
    stored = _store(value)
    monkeypatch.setattr(m, name, new_cls)
    with pytest.raises(DecodeError) as info:
        _read(stored)
    err = info.value
    for problem in problems:
        assert problem in str(err)
    assert err.type_name == f"tests.serde.models.{name}"
    assert err.path == "$.items[0]"
    assert "no longer fits its class" in str(err)
    assert "upgrades=" in str(err)
    assert "on_mismatch='raw'" in str(err)


# a value of each "next version", as that version writes it under the old name
CURRENT: dict[type, Any] = {
    m.ItemWithoutK: m.ItemWithoutK(count=2),
    m.ItemRenamed: m.ItemRenamed("b", 2),
    m.ItemCountStr: m.ItemCountStr("b", "2"),
    m.PersonRenamed: m.PersonRenamed(full_name="bo", age=3, address=m.Address(city="Paris")),
    m.PersonAgeStrict: m.PersonAgeStrict(
        name="bo", age=datetime(2020, 1, 1), address=m.Address(city="Paris")
    ),
    m.PointRenamed: m.PointRenamed(1, 2),
    m.ColorShrunk: m.ColorShrunk.BLUE,
}


def _written_as(name: str, value: Any) -> tuple[str, bytes]:
    if isinstance(value, enum.Enum):
        code, arg = 0, value.value
    elif isinstance(value, pydantic.BaseModel):
        code, arg = 5, value.model_dump()
    elif isinstance(value, tuple):
        code, arg = 2, value._asdict()
    else:
        code, arg = 2, {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    _tag, envelope = MsgpackSerializer().dumps_typed(["tests.serde.models", name, arg])
    return "msgpack", ormsgpack.packb({"items": [ormsgpack.Ext(code, envelope)]})


@pytest.mark.parametrize(("value", "name", "new_cls", "problems"), CASES)
def test_mismatch_is_found_by_a_warm_serializer(
    monkeypatch: pytest.MonkeyPatch, value: Any, name: str, new_cls: type, problems: list[str]
) -> None:
    """Old data read after current data: the fast path for a known class checks as well."""
    stored = _store(value)
    monkeypatch.setattr(m, name, new_cls)
    serde = MsgpackSerializer(allowlist=m.ALL)
    current = _written_as(name, CURRENT[new_cls])
    for _ in range(2):
        assert serde.loads_typed(current) == {"items": [CURRENT[new_cls]]}
    for _ in range(2):
        with pytest.raises(DecodeError) as info:
            serde.loads_typed(stored)
        for problem in problems:
            assert problem in str(info.value)
        assert info.value.path == "$.items[0]"
    assert serde.loads_typed(current) == {"items": [CURRENT[new_cls]]}


@pytest.mark.parametrize(("value", "name", "new_cls", "problems"), CASES)
def test_raw_policy_returns_stored_fields_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, value: Any, name: str, new_cls: type, problems: list[str]
) -> None:
    stored = _store(value)
    monkeypatch.setattr(m, name, new_cls)
    with pytest.warns(SchemaMismatchWarning, match=problems[0].replace("'", ".")):
        got = _read(stored, on_mismatch="raw")
    raw = got["items"][0]
    if isinstance(value, enum.Enum):
        assert raw == "red"
    else:
        fields = value.model_dump() if hasattr(value, "model_dump") else None
        if fields is None:
            fields = value._asdict() if hasattr(value, "_asdict") else vars(value)
        assert raw == fields


def test_upgrade_function_builds_the_new_value(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _store(m.Item("a", 1, "n"))
    monkeypatch.setattr(m, "Item", m.ItemRenamed)
    seen: list[dict[str, Any]] = []

    def upgrade(fields: dict[str, Any]) -> m.ItemRenamed:
        seen.append(dict(fields))
        return m.ItemRenamed(key=fields.pop("k"), **fields)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the upgrade path warns about nothing
        got = _read(stored, upgrades={("tests.serde.models", "Item"): upgrade}, on_mismatch="raw")
    assert got == {"items": [m.ItemRenamed("a", 1, "n")]}
    assert seen == [{"k": "a", "count": 1, "note": "n"}]


def test_upgrade_is_not_used_when_the_value_fits() -> None:
    stored = _store(m.Item("a", 1))

    def upgrade(fields: dict[str, Any]) -> Any:
        raise AssertionError("called for a value that fits")

    assert _read(stored, upgrades={("tests.serde.models", "Item"): upgrade}) == {
        "items": [m.Item("a", 1)]
    }


def test_upgrade_for_a_class_that_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _store(m.Item("a", 1))
    monkeypatch.delattr(m, "Item")
    with pytest.raises(DecodeError, match="the class no longer exists"):
        _read(stored)
    got = _read(stored, upgrades={("tests.serde.models", "Item"): lambda f: ("upgraded", f["k"])})
    assert got == {"items": [("upgraded", "a")]}


def test_upgrade_keys_are_allowlisted() -> None:
    stored = _store(m.Item("a", 1))
    serde = MsgpackSerializer(upgrades={("tests.serde.models", "Item"): lambda f: f})
    assert serde.loads_typed(stored) == {"items": [m.Item("a", 1)]}


def test_failing_upgrade_is_a_decode_error(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _store(m.Item("a", 1))
    monkeypatch.setattr(m, "Item", m.ItemWithoutK)

    def upgrade(fields: dict[str, Any]) -> Any:
        raise KeyError("nope")

    with pytest.raises(
        DecodeError, match=r"upgrade function for tests\.serde\.models\.Item failed"
    ) as info:
        _read(stored, upgrades={("tests.serde.models", "Item"): upgrade})
    assert isinstance(info.value.__cause__, KeyError)


def test_compatible_change_just_works(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = _store(m.Item("a", 1))
    monkeypatch.setattr(m, "Item", m.ItemNewOptional)
    assert _read(stored) == {"items": [m.ItemNewOptional("a", 1, None, 5)]}


def test_pydantic_v1_removed_field(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic.v1

    class Legacy(pydantic.v1.BaseModel):
        name: str

    stored = _store(m.Legacy(name="x", count=4))
    monkeypatch.setattr(m, "Legacy", Legacy)
    with pytest.raises(DecodeError, match="stored field 'count' no longer exists"):
        _read(stored)

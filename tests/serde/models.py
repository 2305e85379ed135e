"""Importable types for the serializer tests (a real module, as user types are).

Stored data names each type by its module's path, and the tests' allowlists,
envelopes and expected messages spell it ``tests.serde.models``: this module must
be imported under that name (as the tests package, never by a bare ``models``).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import datetime
from typing import NamedTuple

import pydantic
import pydantic.v1

MODULE = "tests.serde.models"
assert __name__ == MODULE, f"imported as {__name__!r}, not as {MODULE!r}"


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Flags(enum.Flag):
    A = 1
    B = 2


class Point(NamedTuple):
    x: int
    y: int = 0


class Address(pydantic.BaseModel):
    city: str
    zip: str | None = None


class Person(pydantic.BaseModel):
    name: str
    age: int
    address: Address
    tags: tuple[str, ...] = ()
    seen: datetime | None = None


class Legacy(pydantic.v1.BaseModel):
    name: str
    count: int = 0


@dataclasses.dataclass
class Item:
    k: str
    count: int
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    id: uuid.UUID
    when: datetime
    color: Color


@dataclasses.dataclass
class Holder:
    person: Person
    items: list[Item]
    point: Point
    extra: dict[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class WithNonInit:
    a: int
    b: int = dataclasses.field(init=False, default=0)


class Outer:
    @dataclasses.dataclass
    class Inner:
        v: int


# pydantic models off the plain path (see tether.serde._decode._closed_validator)


class Open(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    name: str


class Closed(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    name: str


class Aliased(pydantic.BaseModel):
    name: str = pydantic.Field(alias="fullName")


class WithComputed(pydantic.BaseModel):
    a: int

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.a * 2


class CustomInit(pydantic.BaseModel):
    name: str
    inits: int = 0

    def __init__(self, **data: object) -> None:
        super().__init__(**data)
        self.inits += 1


# classes whose own code raises something other than ValueError/TypeError on
# stored data (issue #18.10): the serializer must say so as a DecodeError


class UnprintableError(Exception):
    """An exception whose str() and repr() fail as well."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


_RAISES: dict[str, type[Exception]] = {
    "unprintable": UnprintableError,
    "attribute": AttributeError,
    "key": KeyError,
    "runtime": RuntimeError,
    "lookup": LookupError,
    "zero": ZeroDivisionError,
}


class Fussy:
    """A plain class (built by ``cls(**fields)``) whose constructor fails."""

    def __init__(self, fail: str = "attribute", **fields: object) -> None:
        raise _RAISES[fail](f"Fussy refuses {fail}")


@dataclasses.dataclass
class FussyRecord:
    fail: str

    def __post_init__(self) -> None:
        raise _RAISES[self.fail](f"FussyRecord refuses {self.fail}")


class FussyColor(enum.Enum):
    RED = "red"

    @classmethod
    def _missing_(cls, value: object) -> FussyColor:
        raise RuntimeError(f"no color {value!r}")


# "next versions" of the classes above, swapped in under the same name by the
# schema-evolution tests


@dataclasses.dataclass
class ItemWithoutK:
    count: int
    note: str | None = None


@dataclasses.dataclass
class ItemRenamed:
    key: str
    count: int
    note: str | None = None


@dataclasses.dataclass
class ItemCountStr:
    k: str
    count: str
    note: str | None = None


@dataclasses.dataclass
class ItemNewOptional:
    k: str
    count: int
    note: str | None = None
    added: int = 5


class PersonRenamed(pydantic.BaseModel):
    full_name: str
    age: int
    address: Address
    tags: tuple[str, ...] = ()
    seen: datetime | None = None


class PersonAgeStrict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    name: str
    age: datetime
    address: Address
    tags: tuple[str, ...] = ()
    seen: datetime | None = None


class ColorShrunk(enum.StrEnum):
    BLUE = "blue"


class PointRenamed(NamedTuple):
    a: int
    y: int = 0


ALL = [
    (MODULE, n)
    for n in (
        "Color",
        "Level",
        "Flags",
        "Point",
        "Address",
        "Person",
        "Legacy",
        "Item",
        "Frozen",
        "Holder",
        "WithNonInit",
        "Outer.Inner",
        "Open",
        "Closed",
        "Aliased",
        "WithComputed",
        "CustomInit",
        "Fussy",
        "FussyRecord",
        "FussyColor",
    )
]

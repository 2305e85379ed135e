"""Array parameters in PostgreSQL's binary array format, built in one pass.

Every ``put`` and ``put_writes`` sends its rows as parallel arrays (one
``unnest`` per statement, see :mod:`._sql`). psycopg adapts a Python list by
inspecting its elements to pick an element dumper, in Python, for every list
of every statement: a sixth of a small ``put``'s client CPU and a third of a
``put_writes``'s (measured with cProfile on the 8-writer benchmark). Here the
element type is known, so each array is wrapped in a class whose dumper
emits the binary array (header, one dimension, length-prefixed elements)
with :mod:`struct`.

The classes are registered on psycopg's global adapters and, because a
connection copies those when it is made, on every connection the saver uses
(:func:`register`), so a connection opened before tether was imported works
too. Arrays built here are one-dimensional with lower bound 1, as ``unnest``
expects.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from psycopg import adapt, pq
from psycopg.abc import AdaptContext

__all__ = ["BYTEA", "INT2", "INT4", "TEXT", "PgArray", "ensure", "register"]

_HEADER = struct.Struct(">iiiii")  # ndim, has_null, element oid, length, lower bound
_EMPTY = struct.Struct(">iii")  # ndim 0, has_null 0, element oid
_LEN = struct.Struct(">i")
_NULL = _LEN.pack(-1)
_INT2 = struct.Struct(">ih")  # length 2, value
_INT4 = struct.Struct(">ii")  # length 4, value


class PgArray:
    """A one-dimensional array parameter, already in binary form."""

    __slots__ = ("data",)

    #: The array type's oid and its element type's oid (psycopg sends the former).
    oid: ClassVar[int]
    element_oid: ClassVar[int]

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<{len(self.data)} bytes>)"


class TextArray(PgArray):
    __slots__ = ()
    oid = 1009
    element_oid = 25


class ByteaArray(PgArray):
    __slots__ = ()
    oid = 1001
    element_oid = 17


class Int2Array(PgArray):
    __slots__ = ()
    oid = 1005
    element_oid = 21


class Int4Array(PgArray):
    __slots__ = ()
    oid = 1007
    element_oid = 23


_I = TypeVar("_I", bound=PgArray)


def _frame(cls: type[PgArray], parts: list[bytes], n: int, has_null: bool) -> bytes:
    return _HEADER.pack(1, 1 if has_null else 0, cls.element_oid, n, 1) + b"".join(parts)


# Empty arrays (most statements have some: a put_writes without special writes).
_NO_TEXT = TextArray(_EMPTY.pack(0, 0, TextArray.element_oid))
_NO_BYTEA = ByteaArray(_EMPTY.pack(0, 0, ByteaArray.element_oid))
_NO_INT2 = Int2Array(_EMPTY.pack(0, 0, Int2Array.element_oid))
_NO_INT4 = Int4Array(_EMPTY.pack(0, 0, Int4Array.element_oid))


def TEXT(values: Sequence[str | None]) -> TextArray:
    """A ``text[]``; ``None`` elements are NULL."""
    if not values:
        return _NO_TEXT
    parts: list[bytes] = []
    has_null = False
    for v in values:
        if v is None:
            parts.append(_NULL)
            has_null = True
        else:
            b = v.encode()
            parts.append(_LEN.pack(len(b)))
            parts.append(b)
    return TextArray(_frame(TextArray, parts, len(values), has_null))


def BYTEA(values: Sequence[bytes]) -> ByteaArray:
    """A ``bytea[]`` of non-NULL elements."""
    if not values:
        return _NO_BYTEA
    parts: list[bytes] = []
    for v in values:
        parts.append(_LEN.pack(len(v)))
        parts.append(v)
    return ByteaArray(_frame(ByteaArray, parts, len(values), False))


def _ints(cls: type[_I], empty: _I, fmt: struct.Struct, size: int, values: Sequence[int]) -> _I:
    if not values:
        return empty
    pack = fmt.pack
    return cls(_frame(cls, [pack(size, v) for v in values], len(values), False))


def INT2(values: Sequence[int]) -> Int2Array:
    """A ``smallint[]`` of non-NULL elements."""
    return _ints(Int2Array, _NO_INT2, _INT2, 2, values)


def INT4(values: Sequence[int]) -> Int4Array:
    """An ``integer[]`` of non-NULL elements."""
    return _ints(Int4Array, _NO_INT4, _INT4, 4, values)


def _dumper(cls: type[PgArray]) -> type[adapt.Dumper]:
    class _Dumper(adapt.Dumper):
        format = pq.Format.BINARY
        oid = cls.oid

        def dump(self, obj: Any) -> bytes:
            data: bytes = obj.data
            return data

    _Dumper.__name__ = _Dumper.__qualname__ = f"{cls.__name__}Dumper"
    return _Dumper


_DUMPERS = tuple((cls, _dumper(cls)) for cls in (TextArray, ByteaArray, Int2Array, Int4Array))


def register(context: AdaptContext | None = None) -> None:
    """Register the array dumpers on ``context`` (a connection), or globally."""
    import psycopg

    adapters = context.adapters if context is not None else psycopg.adapters
    for cls, dumper in _DUMPERS:
        adapters.register_dumper(cls, dumper)


register()

# Connections whose own adapters are known to have the dumpers.
_known: weakref.WeakSet[Any] = weakref.WeakSet()


def ensure(conn: AdaptContext) -> None:
    """Register the dumpers on ``conn`` once.

    A connection's adapters start as a copy-on-write view of the global ones;
    one that registered an adapter of its own before tether was imported no
    longer sees later global registrations, so each connection is checked.
    """
    if conn not in _known:
        register(conn)
        _known.add(conn)

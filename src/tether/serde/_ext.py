"""Encoding half of the MessagePack wire format: ext codes and the ``default`` hook.

The ext codes and payload shapes are LangGraph's ``JsonPlusSerializer`` ones, so
either library can read the other's bytes (see :mod:`tether.serde.msgpack`).
Every ext payload is itself a MessagePack array ``[module, name, args, ...]``.

ormsgpack encodes dicts, lists, str, int, float, bool and bytes natively (in C);
everything else reaches :func:`default`, which dispatches on ``type(obj)``
through a per-type cache so the isinstance chain runs once per type, not once
per value. Pydantic models are :mod:`tether.serde._pydantic`'s (with their
fast paths, which write the same bytes with less work); a NumPy array's
payload is joined around its buffer, which is copied once.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import ipaddress
import pathlib
import re
import sys
import threading
import uuid
import zoneinfo
from collections import deque
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import ormsgpack

from tether.serde import _codecs

EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_POS_ARGS = 1
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V1 = 4
EXT_PYDANTIC_V2 = 5
EXT_NUMPY_ARRAY = 6
EXT_DELTA_SNAPSHOT = 7  # LangGraph's _DeltaSnapshot: the packed value, no envelope

EXT_NAMES = {
    EXT_CONSTRUCTOR_SINGLE_ARG: "constructor(arg)",
    EXT_CONSTRUCTOR_POS_ARGS: "constructor(*args)",
    EXT_CONSTRUCTOR_KW_ARGS: "constructor(**kwargs)",
    EXT_METHOD_SINGLE_ARG: "method(arg)",
    EXT_PYDANTIC_V1: "pydantic v1 model",
    EXT_PYDANTIC_V2: "pydantic v2 model",
    EXT_NUMPY_ARRAY: "numpy array",
    EXT_DELTA_SNAPSHOT: "LangGraph delta snapshot",
}

# Tuples, big ints, dataclasses, datetimes, enums and UUIDs would otherwise be
# written natively and come back as list/str/dict: passing them through to
# ``default`` is what keeps their type. Subclasses of str/int/dict/list are NOT
# passed through (they are written as their base type, as LangGraph does).
PASSTHROUGH = (
    ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
PACK_OPTS = ormsgpack.OPT_NON_STR_KEYS | PASSTHROUGH | ormsgpack.OPT_REPLACE_SURROGATES

# An encoder gets the value and the ``default`` hook to pack its payload with:
# the hook of the serializer that is writing, so that values nested in the
# payload go through that serializer's write-time check too.
Default = Callable[[Any], ormsgpack.Ext]
Encoder = Callable[[Any, Default], ormsgpack.Ext]
ReadKey = tuple[str, str]  # (module, name) as written and as the reader checks it
# why the writing serializer would not read a class back, or None when it would
Check = Callable[[ReadKey], str | None]


class Unsupported(Exception):
    """Raised inside ``default``; ormsgpack drops exceptions, so it is also kept in TLS."""

    def __init__(self, obj: Any, reason: str) -> None:
        super().__init__(reason)
        self.obj = obj
        self.reason = reason


# ormsgpack replaces any exception raised by ``default`` with a bare TypeError,
# so the real one is left here for the caller to pick up (per thread, because
# one serializer is shared by every thread of a saver).
last_error = threading.local()


_packb = ormsgpack.packb
_Ext = ormsgpack.Ext


def class_key(cls: type) -> tuple[str, str]:
    """(module, name) as written on the wire; nested classes use their qualname."""
    qual = cls.__qualname__
    if "<locals>" in qual:
        raise Unsupported(
            cls,
            f"{cls.__module__}.{qual} is defined inside a function and could never be "
            "rebuilt; define it at module level",
        )
    return cls.__module__, qual


# The encoders below call ormsgpack directly rather than through helpers: a
# state holds thousands of typed values and each Python call adds to every one.


def _single(cls: type, arg: Callable[[Any], Any], name: str | None = None) -> Encoder:
    module, qual = class_key(cls)
    name = name or qual

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        payload = _packb([module, name, arg(obj)], default=dflt, option=PACK_OPTS)
        return _Ext(EXT_CONSTRUCTOR_SINGLE_ARG, payload)

    return enc


def _positional(
    cls: type,
    args: Callable[[Any], list[Any]],
    name: str | None = None,
    module: str | None = None,
) -> Encoder:
    own_module, qual = class_key(cls)
    module, name = module or own_module, name or qual

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        payload = _packb([module, name, args(obj)], default=dflt, option=PACK_OPTS)
        return _Ext(EXT_CONSTRUCTOR_POS_ARGS, payload)

    return enc


def _keywords(cls: type, fields: Callable[[Any], dict[str, Any]]) -> Encoder:
    module, name = class_key(cls)

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        payload = _packb([module, name, fields(obj)], default=dflt, option=PACK_OPTS)
        return _Ext(EXT_CONSTRUCTOR_KW_ARGS, payload)

    return enc


def _dataclass(cls: type) -> Encoder:
    names = tuple(f.name for f in dataclasses.fields(cls))
    module, name = class_key(cls)

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        # no dataclasses.asdict: it deep-copies and flattens nested dataclasses
        fields = {n: getattr(obj, n) for n in names}
        payload = _packb([module, name, fields], default=dflt, option=PACK_OPTS)
        return _Ext(EXT_CONSTRUCTOR_KW_ARGS, payload)

    return enc


def _numpy_payload(obj: Any) -> list[Any]:
    """The ext 6 payload: ``[dtype, shape, order, buffer]`` without its MessagePack header.

    Written as the parts to be joined, so that the array's bytes are copied once,
    straight into the result: packing a buffer through ormsgpack copies it into a
    growing buffer first, and a top-level array would be copied once more into
    the outer message.
    """
    if obj.dtype.hasobject:
        raise Unsupported(obj, "a NumPy array of dtype object holds Python objects")
    order = "F" if obj.flags.f_contiguous and not obj.flags.c_contiguous else "C"
    # packs as a fixarray of 3 (one byte, 0x93); the payload is an array of 4
    head = _packb([obj.dtype.str, list(obj.shape), order])
    # a memoryview is written without an intermediate bytes copy; datetime64
    # and timedelta64 arrays do not export one
    buffer: Any
    if obj.flags.c_contiguous and obj.dtype.kind not in "mM":
        buffer = memoryview(obj)
    else:
        buffer = obj.tobytes(order="A")
    return [b"\x94", head[1:], _bin_header(_nbytes(buffer)), buffer]


def _nbytes(buffer: bytes | memoryview) -> int:
    return buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)


def _bin_header(size: int) -> bytes:
    if size <= 0xFF:
        return b"\xc4" + size.to_bytes(1, "big")
    if size <= 0xFFFF:
        return b"\xc5" + size.to_bytes(2, "big")
    if size <= 0xFFFFFFFF:
        return b"\xc6" + size.to_bytes(4, "big")
    raise Unsupported(None, f"a buffer of {size} bytes does not fit in MessagePack")


_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}


def ext_header(code: int, size: int) -> bytes:
    """The MessagePack header of an ext value of ``size`` bytes, as ormsgpack writes it."""
    fixed = _FIXEXT.get(size)
    if fixed is not None:
        return bytes((fixed, code))
    if size <= 0xFF:
        return bytes((0xC7, size, code))
    if size <= 0xFFFF:
        return b"\xc8" + size.to_bytes(2, "big") + bytes((code,))
    if size <= 0xFFFFFFFF:
        return b"\xc9" + size.to_bytes(4, "big") + bytes((code,))
    raise Unsupported(None, f"an ext value of {size} bytes does not fit in MessagePack")


def _numpy(obj: Any, dflt: Default) -> ormsgpack.Ext:
    parts = _numpy_payload(obj)
    return _Ext(EXT_NUMPY_ARRAY, b"".join(parts))


def _numpy_whole(obj: Any) -> bytes:
    """A top-level array as a complete message: the ext header, then the payload."""
    parts = _numpy_payload(obj)
    size = len(parts[0]) + len(parts[1]) + len(parts[2]) + _nbytes(parts[3])
    return b"".join([ext_header(EXT_NUMPY_ARRAY, size), *parts])


def _datetime(obj: datetime, dflt: Default) -> ormsgpack.Ext:
    tz = obj.tzinfo
    if tz is None or (type(tz) is timezone and not tz.utcoffset(None).microseconds):
        return _Ext(
            EXT_METHOD_SINGLE_ARG,
            _packb(["datetime", "datetime", obj.isoformat(), "fromisoformat"], option=PACK_OPTS),
        )
    # an ISO string keeps only the offset: a ZoneInfo (DST rules) needs the
    # keyword form, which LangGraph also reads (datetime(**kwargs)). So does an
    # offset with microseconds: CPython 3.11's fromisoformat reads
    # "+00:00:00.000001" as UTC.
    fields = {
        "year": obj.year,
        "month": obj.month,
        "day": obj.day,
        "hour": obj.hour,
        "minute": obj.minute,
        "second": obj.second,
        "microsecond": obj.microsecond,
        "tzinfo": tz,
        "fold": obj.fold,
    }
    payload = _packb(["datetime", "datetime", fields], default=dflt, option=PACK_OPTS)
    return ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, payload)


def _big_int(obj: int) -> list[Any]:
    # hex is exempt from CPython's 4300-digit str<->int limit; int(s, 0) reads it
    return [hex(obj), 0]


def _encoder_for(cls: type) -> tuple[Encoder, ReadKey | None]:
    """The encoder of ``cls`` and the name a reader must be allowed to build.

    None for the types every reader rebuilds itself (datetimes, UUIDs,
    sets...: the safe built-ins), ``(module, qualname)`` for the others.
    """
    hooked = _codecs.encoder(cls)  # a framework's class (_framework_codecs)
    if hooked is not None:
        return hooked[0], class_key(cls) if hooked[1] else None
    safe = _safe_encoder(cls)
    if safe is not None:
        return safe, None
    return _class_encoder(cls), class_key(cls)


def _class_encoder(cls: type) -> Encoder:
    """Classes whose name the reader checks against its allowlist."""
    if issubclass(cls, enum.Enum):
        return _single(cls, lambda o: o.value)
    # pydantic's encoders and fast paths are their own module; imported here,
    # once per class, because it builds on this one
    from tether.serde import _pydantic

    model = _pydantic.encoder(cls)
    if model is not None:
        return model
    if issubclass(cls, tuple):
        if hasattr(cls, "_fields") and hasattr(cls, "_asdict"):
            return _keywords(cls, lambda o: o._asdict())
        raise Unsupported(cls, f"tuple subclass {cls.__module__}.{cls.__qualname__}")
    if dataclasses.is_dataclass(cls):
        return _dataclass(cls)
    secret = getattr(cls, "get_secret_value", None)
    if callable(secret) and cls.__module__.startswith("pydantic"):
        return _single(cls, lambda o: o.get_secret_value())
    raise Unsupported(cls, f"type {cls.__module__}.{cls.__qualname__} is not serializable")


def _safe_encoder(cls: type) -> Encoder | None:
    """Types every reader rebuilds through a fixed function (``SAFE_BUILDERS``)."""
    if cls is tuple:
        return _single(cls, list)
    if cls is int:
        return _positional(cls, _big_int)
    if cls is datetime:
        return _datetime
    if cls is date:
        return _positional(cls, lambda o: [o.year, o.month, o.day])
    if cls is timedelta:
        return _positional(cls, lambda o: [o.days, o.seconds, o.microseconds])
    if cls is time:
        return _keywords(
            cls,
            lambda o: {
                "hour": o.hour,
                "minute": o.minute,
                "second": o.second,
                "microsecond": o.microsecond,
                "tzinfo": o.tzinfo,
                "fold": o.fold,
            },
        )
    if cls is timezone:
        return _positional(cls, lambda o: list(o.__getinitargs__()))
    if cls is zoneinfo.ZoneInfo:
        return _single(cls, lambda o: o.key)
    if cls is uuid.UUID:
        return _single(cls, lambda o: o.hex)
    if cls is decimal.Decimal:
        return _single(cls, str)
    if cls in (set, frozenset, deque):
        # sets of tuples: the items go through default again and keep their type
        return _single(cls, list)
    if cls in _IP_TYPES:
        return _single(cls, str)
    if issubclass(cls, pathlib.PurePath) and cls.__module__.startswith("pathlib"):
        # "pathlib" even on 3.13 where the classes live in pathlib._local
        return _positional(cls, lambda o: list(o.parts), name=cls.__name__)
    if cls is re.Pattern:
        return _positional(cls, lambda o: [o.pattern, o.flags], module="re", name="compile")
    np = sys.modules.get("numpy")
    if np is not None and cls is np.ndarray:
        WHOLE[cls] = _numpy_whole
        return _numpy
    return None


_IP_TYPES = frozenset(
    {
        ipaddress.IPv4Address,
        ipaddress.IPv4Interface,
        ipaddress.IPv4Network,
        ipaddress.IPv6Address,
        ipaddress.IPv6Interface,
        ipaddress.IPv6Network,
    }
)

# class -> (its encoder, the name a reader checks or None): the analysis behind
# an encoder (a pydantic model's schema) is done once per process
_ENCODERS: dict[type, tuple[Encoder, ReadKey | None]] = {}

# Types that :func:`pack` writes itself when they are the whole value (NumPy
# arrays, to copy their buffer once); filled in when their encoder is made.
WHOLE: dict[type, Callable[[Any], bytes]] = {}


class Refused(Unsupported):
    """A class the writing serializer would refuse to read back (SPEC S3.4)."""

    def __init__(self, obj: Any, key: ReadKey, reason: str) -> None:
        super().__init__(obj, reason)
        self.key = key


def _entry(cls: type) -> tuple[Encoder, ReadKey | None]:
    found = _ENCODERS.get(cls)
    if found is None:
        found = _ENCODERS[cls] = _encoder_for(cls)
    return found


def make_default(check: Check | None) -> Default:
    """An ormsgpack ``default`` hook that refuses what ``check`` says will not read back.

    ``check`` is asked once per class (the answer is kept in this hook's
    table), so a value of a class seen before costs one dict lookup, as
    without a check. The hook hands itself to every encoder, so values nested
    in a typed value's payload are checked too.
    """
    table: dict[type, Encoder] = {}

    def default(obj: Any) -> ormsgpack.Ext:
        cls = type(obj)
        enc = table.get(cls)
        if enc is None:
            enc = _admit(table, cls, obj, check)
        try:
            return enc(obj, default)
        except Unsupported:
            raise
        except Exception as exc:
            if getattr(last_error, "exc", None) is None:
                last_error.exc = Unsupported(obj, f"encoding {cls.__qualname__} failed: {exc!r}")
            raise

    return default


def _admit(table: dict[type, Encoder], cls: type, obj: Any, check: Check | None) -> Encoder:
    try:
        enc, key = _entry(cls)
    except Unsupported as exc:
        last_error.exc = Unsupported(obj, exc.reason)
        raise last_error.exc from None
    if key is not None and check is not None:
        why = check(key)
        if why is not None:
            last_error.exc = Refused(obj, key, why)
            raise last_error.exc
    table[cls] = enc
    return enc


#: the hook of :func:`pack` when no serializer is writing: nothing refused
default = make_default(None)


def pack(obj: Any, dflt: Default = default) -> bytes:
    """Encode ``obj``; raises :class:`Unsupported` naming the offending value."""
    whole = WHOLE.get(type(obj))
    if whole is not None:
        try:
            return whole(obj)
        except Unsupported:
            raise
        except Exception as exc:  # e.g. a buffer NumPy cannot export
            raise Unsupported(obj, f"encoding {type(obj).__qualname__} failed: {exc!r}") from exc
    # last_error is cleared on every way out of a failed call, so that a
    # successful one (the common case) does not pay for resetting it
    try:
        return _packb(obj, default=dflt, option=PACK_OPTS)
    except (TypeError, ValueError, ormsgpack.MsgpackEncodeError) as exc:
        found = getattr(last_error, "exc", None)
        last_error.exc = None
        if isinstance(found, Unsupported):
            raise found from None
        raise Unsupported(obj, str(exc)) from exc
    except BaseException:
        last_error.exc = None
        raise


def problems(obj: Any, check: Check | None) -> list[Unsupported]:
    """Everything in ``obj`` that stops it from being written: every refused class
    (``check``), every class defined inside a function, every unsupported value.

    The error path's second pass: it encodes ``obj`` again, carrying on past
    each problem (a value that cannot be encoded at all is written as a
    placeholder and not looked into).
    """
    found: list[Unsupported] = []
    placeholder = _Ext(0, b"")

    def default(value: Any) -> ormsgpack.Ext:
        try:
            enc, key = _entry(type(value))
        except Unsupported as exc:
            found.append(Unsupported(value, exc.reason))
            return placeholder
        if key is not None and check is not None:
            why = check(key)
            if why is not None:
                found.append(Refused(value, key, why))
        try:
            return enc(value, default)
        except Exception as exc:
            found.append(Unsupported(value, f"encoding {type(value).__qualname__} failed: {exc!r}"))
            return placeholder

    try:
        _packb(obj, default=default, option=PACK_OPTS)
    except Exception as exc:
        if not found:
            found.append(Unsupported(obj, str(exc)))
    return found

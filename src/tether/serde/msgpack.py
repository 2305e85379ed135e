"""Typed MessagePack serializer (SPEC S3) -- provisional minimal version.

Only plain values (None, bytes, dict/list/str/int/float/bool) for now; the
full extension-type implementation follows.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import ormsgpack

from tether.errors import DecodeError, EncodeError

__all__ = ["MsgpackSerializer"]

_OPTS = ormsgpack.OPT_NON_STR_KEYS


class MsgpackSerializer:
    """Provisional: plain MessagePack values only."""

    def __init__(self, *, allowlist: Collection[tuple[str, ...]] = ()) -> None:
        self._allowlist = frozenset(tuple(x) for x in allowlist)

    def with_allowlist(self, extra: Collection[tuple[str, ...]]) -> MsgpackSerializer:
        merged = self._allowlist | {tuple(x) for x in extra}
        if merged == self._allowlist:
            return self
        return MsgpackSerializer(allowlist=merged)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None:
            return "null", b""
        if isinstance(obj, bytes):
            return "bytes", obj
        if isinstance(obj, bytearray):
            return "bytearray", bytes(obj)
        try:
            return "msgpack", ormsgpack.packb(obj, option=_OPTS)
        except (TypeError, ormsgpack.MsgpackEncodeError) as exc:
            raise EncodeError(f"cannot serialize {type(obj).__name__}: {exc}") from exc

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, raw = data
        if tag == "null":
            return None
        if tag == "bytes":
            return raw
        if tag == "bytearray":
            return bytearray(raw)
        if tag == "msgpack":
            try:
                return ormsgpack.unpackb(raw, option=_OPTS)
            except Exception as exc:
                raise DecodeError(f"invalid msgpack data: {exc}") from exc
        raise DecodeError(f"unknown serialization tag {tag!r}")

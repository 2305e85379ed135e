"""Small channel values kept in the checkpoint head's JSON instead of value records.

The SQL backends keep small str/int/float/bool/None values inline in the
head (``encode_put(inline=...)`` puts them in its ``channel_values``;
``assemble`` reads them back from there), so a small state is one row. One
rule for every backend (:func:`inline_value`), one option
(:func:`inline_rule`), and the head helpers a put uses to carry its parent's
inline values over (:func:`head_inline`, :func:`with_inline`). I/O-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from tether.backends._delta import supports
from tether.backends._records import HEAD_JSON

__all__ = ["INLINE_MAX_CHARS", "head_inline", "inline_rule", "inline_value", "with_inline"]

_encode_json = msgspec.json.encode

#: Strings up to this length may be kept inline in the checkpoint head; longer
#: ones go to value records, where an unchanged value is stored once, not per step.
INLINE_MAX_CHARS = 256


def inline_value(value: Any) -> bool:
    """Whether a channel value survives the head's JSON exactly (type included).

    One rule for every backend that inlines (Postgres's JSONB, SQLite's JSON
    text), so a value is kept the same way wherever a thread is copied to.
    """
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(-(2**63) <= value < 2**63)  # what SQLite's JSON functions read exactly
    if kind is str:
        return len(value) <= INLINE_MAX_CHARS and "\x00" not in value
    if kind is float:
        # JSONB stores numerics as decimals: 1e16 would come back as an int and
        # -0.0 as 0.0, so only plain positional floats stay inline.
        return (
            math.isfinite(value)
            and "e" not in repr(value)
            and not (value == 0 and math.copysign(1.0, value) < 0)
        )
    return False


def inline_rule(serde: object, inline_primitives: bool | None) -> Callable[[Any], bool] | None:
    """A saver's ``inline=`` for :func:`encode_put` from its ``inline_primitives`` option.

    ``None`` (the default): inline only under tether's own MessagePack
    serializer. Values kept inline never pass through the serializer, so a
    serializer of the user's own (one that encrypts, say) sees every value.
    A saver that encrypts (#17) keeps them inline too, each sealed in the head
    (:func:`~tether.encryption.seal_inline`).
    """
    if inline_primitives is None:
        inline_primitives = supports(serde)
    return inline_value if inline_primitives else None


def head_inline(head_type: str, head: bytes | str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(channel_versions, inline values)`` of a stored head (nothing for a non-JSON head)."""
    if head_type != HEAD_JSON:
        return {}, {}
    decoded = msgspec.json.decode(head)
    if type(decoded) is not dict:
        return {}, {}
    versions = decoded.get("channel_versions")
    values = decoded.get("channel_values")
    return (
        versions if type(versions) is dict else {},
        values if type(values) is dict else {},
    )


def with_inline(head: tuple[str, bytes], values: Mapping[str, Any]) -> tuple[str, bytes]:
    """A planned head with ``values`` (carried over from storage) added to its inline values."""
    decoded = msgspec.json.decode(head[1])
    decoded["channel_values"] = {**values, **(decoded.get("channel_values") or {})}
    return head[0], _encode_json(decoded)

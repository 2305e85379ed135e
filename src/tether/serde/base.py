"""The serializer protocol (SPEC S3.1) and the adapter for plain dumps/loads serializers."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AllowlistSerializer",
    "SerializerCompat",
    "SerializerProtocol",
    "UntypedSerializerProtocol",
    "as_typed",
]


@runtime_checkable
class SerializerProtocol(Protocol):
    """Turns a value into ``(type_tag, bytes)`` and back.

    The tag travels with the bytes (a column beside the blob), so a backend can
    tell ``"null"``, raw ``"bytes"`` and ``"msgpack"`` apart without decoding.
    """

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


@runtime_checkable
class AllowlistSerializer(SerializerProtocol, Protocol):
    """A serializer whose allowlist of constructible types can be extended (S3.4)."""

    def with_allowlist(self, extra: Collection[tuple[str, ...]]) -> AllowlistSerializer: ...


@runtime_checkable
class UntypedSerializerProtocol(Protocol):
    """An older serializer with plain ``dumps``/``loads``."""

    def dumps(self, obj: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class SerializerCompat:
    """Adapts an untyped serializer: the tag is the value's type name (informational)."""

    def __init__(self, serde: UntypedSerializerProtocol) -> None:
        self.serde = serde

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return type(obj).__name__, self.serde.dumps(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.serde.loads(data[1])


def as_typed(serde: SerializerProtocol | UntypedSerializerProtocol) -> SerializerProtocol:
    """Return ``serde`` if it is typed, else wrap it in :class:`SerializerCompat`."""
    if isinstance(serde, SerializerProtocol):
        return serde
    candidate: object = serde  # a caller may pass anything; check it at run time
    if isinstance(candidate, UntypedSerializerProtocol):
        return SerializerCompat(candidate)
    from tether.errors import ConfigError

    raise ConfigError(
        f"{type(serde).__name__} is not a serializer: it needs dumps_typed/loads_typed "
        "or dumps/loads methods"
    )

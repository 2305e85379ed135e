"""Serialization of channel values and writes (SPEC S3).

:class:`MsgpackSerializer` is the default: typed MessagePack, strict by
default (decoding constructs only safe built-in types and an explicit
allowlist), with clear errors instead of silent data loss on schema change.
"""

from tether.serde._allowlist import parse_allowlist
from tether.serde.base import (
    AllowlistSerializer,
    SerializerCompat,
    SerializerProtocol,
    UntypedSerializerProtocol,
    as_typed,
)
from tether.serde.msgpack import MsgpackSerializer, SchemaMismatchWarning

__all__ = [
    "AllowlistSerializer",
    "MsgpackSerializer",
    "SchemaMismatchWarning",
    "SerializerCompat",
    "SerializerProtocol",
    "UntypedSerializerProtocol",
    "as_typed",
    "parse_allowlist",
]

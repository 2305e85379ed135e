"""LangGraph's and LangChain's classes: the special cases they need, as registered hooks.

Each is written as LangGraph's ``JsonPlusSerializer`` writes it, so either
library reads the other's bytes, and each is registered in
:mod:`tether.serde._codecs` by :func:`register` (called once by
:mod:`tether.serde.msgpack`) rather than known to the core encoder and
decoder. By name: nothing here imports LangGraph or LangChain until a value
of theirs is written or read.

* ``langgraph.types.Send``: ext 1, ``[node, arg]`` or ``[node, arg, timeout]``;
  the timeout is read back as the keyword it is.
* ``langgraph.store.base.Item`` / ``SearchItem``: ext 4 around ``.dict()``,
  read back by ``cls(**fields)``.
* LangGraph's DeltaChannel snapshot (``_DeltaSnapshot``): ext 7 around the
  packed value, with no ``[module, name]`` envelope; a fixed import, never one
  named by stored data, and only the NamedTuple is built around a value
  decoded by the same rules as any other.
* LangChain's messages and ``Document`` (:data:`_allowlist.FORWARDING_INIT`):
  their ``__init__`` only forwards the stored fields to pydantic, so they are
  validated straight into a new instance (a third of the cost of reading a
  message) when every ``__init__`` on the way is LangChain's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import ormsgpack

from tether.errors import DecodeError
from tether.serde import _allowlist, _codecs
from tether.serde._ext import (
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_DELTA_SNAPSHOT,
    EXT_PYDANTIC_V1,
    PACK_OPTS,
    Default,
    Encoder,
    class_key,
)

_packb = ormsgpack.packb
_Ext = ormsgpack.Ext

_SEND = ("langgraph.types", "Send")
_DELTA_SNAPSHOT = ("langgraph.checkpoint.serde.types", "_DeltaSnapshot")
_STORE_ITEMS = (("langgraph.store.base", "Item"), ("langgraph.store.base", "SearchItem"))


def register() -> None:
    """Register every hook of this module (again: the same hooks)."""
    _codecs.register_encoder(_SEND, _send_encoder)
    _codecs.register_call(EXT_CONSTRUCTOR_POS_ARGS, _SEND, _send)
    for key in _STORE_ITEMS:
        _codecs.register_encoder(key, _store_item_encoder)
    _codecs.register_encoder(_DELTA_SNAPSHOT, lambda cls: _delta_snapshot, checked=False)
    _codecs.register_value_ext(EXT_DELTA_SNAPSHOT, _delta_snapshot_class, ".value")
    for key in _allowlist.FORWARDING_INIT:
        _codecs.register_validator(key, _forwarding_validator)


# --- LangGraph ----------------------------------------------------------------------


def _send_encoder(cls: type) -> Encoder:
    # Send is a plain class in langgraph.types; same shape as LangGraph writes
    module, name = class_key(cls)

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        timeout = getattr(obj, "timeout", None)
        args = [obj.node, obj.arg] if timeout is None else [obj.node, obj.arg, timeout]
        payload = _packb([module, name, args], default=dflt, option=PACK_OPTS)
        return _Ext(EXT_CONSTRUCTOR_POS_ARGS, payload)

    return enc


def _send(cls: type, args: Any) -> Any:
    if len(args) == 3:
        return cls(args[0], args[1], timeout=args[2])
    return cls(*args)


def _store_item_encoder(cls: type) -> Encoder:
    # as LangGraph writes a store item: ext 4 (its dict() method), read by cls(**fields)
    head = list(class_key(cls))

    def item(obj: Any, dflt: Default) -> ormsgpack.Ext:
        payload = _packb([*head, obj.dict()], default=dflt, option=PACK_OPTS)
        return _Ext(EXT_PYDANTIC_V1, payload)

    return item


def _delta_snapshot(obj: Any, dflt: Default) -> ormsgpack.Ext:
    # as LangGraph writes it: ext 7 around the packed value, no [module, name] envelope
    return _Ext(EXT_DELTA_SNAPSHOT, _packb(obj[0], default=dflt, option=PACK_OPTS))


_delta_snapshot_cls: list[type] = []


def _delta_snapshot_class() -> type:
    """LangGraph's ``_DeltaSnapshot``, which ext 7 holds; a DecodeError without langgraph."""
    if _delta_snapshot_cls:
        return _delta_snapshot_cls[0]
    try:
        from langgraph.checkpoint.serde.types import _DeltaSnapshot
    except ImportError as exc:
        raise DecodeError(
            "ext 7 is a LangGraph DeltaChannel snapshot (_DeltaSnapshot) and reading it "
            "needs LangGraph: pip install 'tether[langgraph]' (langgraph-checkpoint with "
            f"DeltaChannel support); {exc}",
            type_name="langgraph.checkpoint.serde.types._DeltaSnapshot",
        ) from exc
    _delta_snapshot_cls.append(_DeltaSnapshot)
    return _DeltaSnapshot


# --- LangChain ----------------------------------------------------------------------


def forwards_init(cls: Any, dotted: str) -> bool:
    """Whether ``cls`` is in :data:`_allowlist.FORWARDING_INIT` with LangChain's ``__init__``."""
    module, _, name = dotted.rpartition(".")
    if (module, name) not in _allowlist.FORWARDING_INIT:
        return False
    try:
        if cls.__pydantic_custom_init__ is not True:
            return False  # nothing to skip
        base = importlib.import_module("pydantic").BaseModel
    except (AttributeError, ImportError):
        return False
    for klass in cls.__mro__:
        if klass is base:
            return True
        if "__init__" in vars(klass) and not klass.__module__.startswith("langchain_core."):
            return False
    return False


def _forwarding_validator(cls: Any, key: tuple[str, str]) -> Callable[[dict[str, Any]], Any] | None:
    """What ``BaseModel.__init__`` does, called without the class's forwarding ``__init__``."""
    if not forwards_init(cls, ".".join(key)):
        return None
    new = object.__new__
    into = cls.__pydantic_validator__.validate_python

    def validate(data: dict[str, Any]) -> Any:
        return into(data, self_instance=new(cls))

    return validate

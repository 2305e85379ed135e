"""Pydantic models on the wire: v2 as ext 5, v1 as ext 4, and v2's fast paths.

The general path writes what ``model_dump()`` returns (its serializer's
``to_python``). Two fast paths write the same bytes with less work, decided
once per class from the model's pydantic core schema: a *plain* model's
fields are packed by ormsgpack from the instance (:func:`_plain_model`), a
*loose* one's ``__dict__`` when every value is plain MessagePack
(:func:`_loose_model`). Each instance is checked for what the schema cannot
promise; anything else takes the general path.

Kill switch: ``TETHER_PYDANTIC_FAST=0`` in the environment (read when this
module is imported), or :data:`FAST` set to False before a class is first
written, sends every model through the general path: same bytes, slower,
and nothing read from pydantic's core schema (for a pydantic version whose
schemas these paths misread).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import ormsgpack

from tether.serde._ext import (
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    PACK_OPTS,
    Default,
    Encoder,
    class_key,
)

#: the fast paths are on unless TETHER_PYDANTIC_FAST=0 (see the module docs)
FAST = os.environ.get("TETHER_PYDANTIC_FAST", "1").strip() != "0"

_packb = ormsgpack.packb
_Ext = ormsgpack.Ext


def encoder(cls: type) -> Encoder | None:
    """The encoder of a pydantic (v2 or v1) model class; None for any other class."""
    if _is_v2(cls):
        return _v2(cls)
    if _is_v1(cls):
        return _v1(cls)
    return None


def _v2(cls: type) -> Encoder:
    module, name = class_key(cls)
    # to_python is what model_dump calls, minus its Python-level argument handling
    to_python = cls.__pydantic_serializer__.to_python  # type: ignore[attr-defined]

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        payload = _packb(
            [module, name, to_python(obj), "model_validate_json"],
            default=dflt,
            option=PACK_OPTS,
        )
        return _Ext(EXT_PYDANTIC_V2, payload)

    if not FAST:
        return enc
    plain = _plain_model(cls)
    if plain is None:
        loose = _loose_model(cls)
        if loose is None:
            return enc
        names, open_extra, structured = loose

        def enc_loose(obj: Any, dflt: Default) -> ormsgpack.Ext:
            values = obj.__dict__
            if tuple(values) != names or (open_extra and obj.__pydantic_extra__):
                return enc(obj, dflt)
            for field_name in structured:
                value = values[field_name]
                if value and type(value) not in _SCALARS:
                    return enc(obj, dflt)
            # No default: a value model_dump() could change (a model, a tuple,
            # an enum, a datetime... anything but plain MessagePack) makes
            # ormsgpack refuse, and the value takes model_dump's path.
            try:
                payload = _packb([module, name, values, "model_validate_json"], option=PACK_OPTS)
            except TypeError:
                return enc(obj, dflt)
            return _Ext(EXT_PYDANTIC_V2, payload)

        return enc_loose

    def enc_plain(obj: Any, dflt: Default) -> ormsgpack.Ext:
        if not plain(obj):
            return enc(obj, dflt)
        # ormsgpack writes the model's __dict__ itself: for a plain model that
        # is what model_dump() returns, without building it in Python first
        payload = _packb(
            [module, name, obj, "model_validate_json"], default=dflt, option=_PACK_MODELS
        )
        return _Ext(EXT_PYDANTIC_V2, payload)

    return enc_plain


# A plain model's fields, packed by ormsgpack from the instance's __dict__
# (OPT_SERIALIZE_PYDANTIC), give the bytes model_dump() + packb give, at a
# third of the cost. "Plain" is decided once per class from its pydantic core
# schema (_plain_model), and each instance is checked for what the schema
# cannot promise (a subclass instance in a model field, an attribute set
# behind pydantic's back); anything else goes through model_dump's path.
_PACK_MODELS = PACK_OPTS | ormsgpack.OPT_SERIALIZE_PYDANTIC

# core schema types whose value model_dump() (python mode) returns unchanged;
# the ones that are not plain MessagePack reach default() either way
_AS_IS = frozenset(
    {
        "str",
        "int",
        "float",
        "bool",
        "bytes",
        "none",
        "literal",
        "enum",
        "datetime",
        "date",
        "time",
        "timedelta",
        "uuid",
        "decimal",
    }
)


_Defs = dict[str, Any]  # a core schema's definitions by ref


def _resolve(schema: Any, defs: _Defs) -> Any:
    if isinstance(schema, dict) and schema.get("type") == "definition-ref":
        return defs.get(schema.get("schema_ref"))  # type: ignore[arg-type]
    return schema


def _dumped_as_is(schema: Any, defs: _Defs) -> bool:
    """Whether a field schema dumps its value unchanged and can hold no model."""
    schema = _resolve(schema, defs)
    if not isinstance(schema, dict) or "serialization" in schema:
        return False
    kind = schema.get("type")
    if kind in _AS_IS:
        return True
    if kind in ("default", "nullable"):
        return _dumped_as_is(schema.get("schema"), defs)
    if kind == "list":
        return _dumped_as_is(schema.get("items_schema"), defs)  # absent: any item
    if kind == "dict":
        return _dumped_as_is(schema.get("keys_schema"), defs) and _dumped_as_is(
            schema.get("values_schema"), defs
        )
    if kind == "tuple":
        items = schema.get("items_schema")
        return isinstance(items, list) and all(_dumped_as_is(item, defs) for item in items)
    # not: any, unions, dataclasses, validators without a schema... and sets,
    # which model_dump() copies: the copy can iterate in another order
    return False


_NestedCheck = tuple[str, type, Callable[[Any], bool], bool]


def _model_schema(cls: Any) -> tuple[dict[str, Any], _Defs]:
    """A model's core schema and its definitions by ref (models used more than once)."""
    schema = cls.__pydantic_core_schema__
    defs: _Defs = {}
    if schema.get("type") == "definitions":
        defs = {d["ref"]: d for d in schema["definitions"] if "ref" in d}
        schema = schema["schema"]
    return schema, defs


def _plain_model(cls: Any) -> Callable[[Any], bool] | None:
    """For a plain pydantic v2 model, the per-instance check; None for any other.

    Plain: no serializers of its own (model, field or annotated), no computed
    or excluded fields, no aliases used for dumping, extra keys not kept, and
    every field either dumped as is (_dumped_as_is) or a plain model itself.
    """
    try:
        schema, defs = _model_schema(cls)
        return _plain_schema(schema, defs, 0) if schema.get("cls") is cls else None
    except Exception:  # a pydantic version that builds its schemas differently
        return None


# Schema types that only validate and wrap the schema that follows them.
_VALIDATOR_WRAPPERS = frozenset({"function-before", "function-after", "function-wrap"})

# Values model_dump() returns unchanged under any schema without a serializer
# of its own (python mode): exact types only.
_SCALARS = frozenset({str, int, float, bool, type(None)})

# Schemas that dump a dict by their own fields: model_dump() leaves out keys
# they do not declare (a TypedDict's), and dumps a model by its schema.
_STRUCTURED = frozenset({"typed-dict", "model", "dataclass", "dataclass-args", "model-fields"})


def _fields_schema(schema: dict[str, Any], *, unwrap: bool) -> tuple[dict[str, Any], bool] | None:
    """A model schema's ``model-fields`` schema and whether extra keys are kept.

    None when the model is dumped other than field by field: a root model, a
    serializer of its own (model, field or annotated at the model level),
    computed fields, or dumping by alias. ``unwrap``: look through model
    validators wrapped around the fields (they do not change dumping).
    """
    cls = schema["cls"]
    model_config = getattr(cls, "model_config", None) or {}
    core_config = schema.get("config") or {}
    decorators = cls.__pydantic_decorators__
    if not (
        schema.get("type") == "model"
        and not schema.get("root_model")
        and "serialization" not in schema
        and not model_config.get("serialize_by_alias")
        and not core_config.get("serialize_by_alias")
        and not decorators.field_serializers
        and not decorators.model_serializers
        and not decorators.computed_fields
    ):
        return None
    inner = schema.get("schema")
    while (
        unwrap
        and isinstance(inner, dict)
        and inner.get("type") in _VALIDATOR_WRAPPERS
        and "serialization" not in inner
    ):
        inner = inner.get("schema")
    if not (
        isinstance(inner, dict)
        and inner.get("type") == "model-fields"
        and not inner.get("computed_fields")
        and "serialization" not in inner
    ):
        return None
    open_extra = (
        model_config.get("extra") == "allow"
        or core_config.get("extra_fields_behavior") == "allow"
        or inner.get("extra_behavior") == "allow"
    )
    return inner, open_extra


def _loose_model(cls: Any) -> tuple[tuple[str, ...], bool, tuple[str, ...]] | None:
    """A model that is not plain for its field types only: what its instances are checked for.

    Such a model (LangChain's messages: ``content: str | list``,
    ``additional_kwargs: dict[str, Any]``...) has no serializer, alias,
    exclusion or computed field anywhere in its schema, so model_dump()
    returns an instance's ``__dict__`` unchanged whenever every value is plain
    MessagePack (ormsgpack, given no default, refuses anything else) and every
    field whose schema holds a structured type (:data:`_STRUCTURED`) holds a
    scalar or an empty value. Returns ``(field names in order, extra keys
    allowed, structured field names)``, or None.
    """
    try:
        schema, defs = _model_schema(cls)
        if schema.get("cls") is not cls:
            return None
        found = _fields_schema(schema, unwrap=True)
        if found is None:
            return None
        inner, open_extra = found
        structured: list[str] = []
        for field_name, field in inner["fields"].items():
            if any(str(k).startswith("serialization") for k in field):
                return None
            flat = _loose_kind(field.get("schema"), defs)
            if flat is None:
                return None
            if not flat:
                structured.append(field_name)
        return tuple(inner["fields"]), open_extra, tuple(structured)
    except Exception:  # a pydantic version that builds its schemas differently
        return None


def _loose_kind(schema: Any, defs: _Defs) -> bool | None:
    """None: a serializer, alias or exclusion somewhere in the schema; else True
    when no structured type (:data:`_STRUCTURED`) is in it. Union members and
    referenced definitions included."""
    structured = False
    seen: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if str(key).startswith("serialization"):
                return None
            if key == "type" and isinstance(value, str):  # not a field named "type"
                if value == "definition-ref":
                    ref = node.get("schema_ref")
                    if isinstance(ref, str) and ref not in seen:
                        seen.add(ref)
                        stack.append(defs.get(ref))
                elif value in _STRUCTURED:
                    structured = True
            elif key not in ("metadata", "ref", "cls"):
                stack.append(value)
    return not structured


def _plain_schema(schema: Any, defs: _Defs, depth: int) -> Callable[[Any], bool] | None:
    schema = _resolve(schema, defs)
    cls = schema.get("cls") if isinstance(schema, dict) else None
    if cls is None or depth > 3:
        return None
    found = _fields_schema(schema, unwrap=False)
    if found is None or found[1]:
        return None  # not dumped from its fields alone, or extra keys kept
    inner = found[0]
    fields = inner["fields"]
    nested: list[_NestedCheck] = []
    for field_name, field in fields.items():
        if any(str(k).startswith("serialization") for k in field):
            return None  # excluded from dumps, dumped under an alias...
        sub: Any = _resolve(field.get("schema"), defs)
        optional = False
        while isinstance(sub, dict) and sub.get("type") in ("default", "nullable"):
            if "serialization" in sub:
                return None
            optional = optional or sub["type"] == "nullable"
            sub = _resolve(sub.get("schema"), defs)
        if isinstance(sub, dict) and sub.get("type") == "model":
            sub_check = _plain_schema(sub, defs, depth + 1)
            if sub_check is None:
                return None
            nested.append((field_name, sub["cls"], sub_check, optional))
        elif not _dumped_as_is(field.get("schema"), defs):
            return None
    names = tuple(fields)

    def is_plain(obj: Any) -> bool:
        values = obj.__dict__
        # exactly the fields, in their order: what model_dump() writes
        if tuple(values) != names:
            return False
        for field_name, sub_cls, sub_check, optional in nested:
            value = values.get(field_name)
            if type(value) is sub_cls:
                if not sub_check(value):
                    return False
            elif not (optional and value is None):
                return False  # e.g. a subclass instance: dumped as the declared class
        return True

    return is_plain


def _v1(cls: type) -> Encoder:
    head = list(class_key(cls))

    def enc(obj: Any, dflt: Default) -> ormsgpack.Ext:
        payload = _packb([*head, obj.dict()], default=dflt, option=PACK_OPTS)
        return ormsgpack.Ext(EXT_PYDANTIC_V1, payload)

    return enc


def _is_v2(cls: type) -> bool:
    mod = sys.modules.get("pydantic")
    base = getattr(mod, "BaseModel", None) if mod is not None else None
    return (
        isinstance(base, type) and issubclass(cls, base) and hasattr(cls, "__pydantic_serializer__")
    )


def _is_v1(cls: type) -> bool:
    for name in ("pydantic.v1", "pydantic"):
        mod = sys.modules.get(name)
        base = getattr(mod, "BaseModel", None) if mod is not None else None
        if (
            isinstance(base, type)
            and issubclass(cls, base)
            and hasattr(cls, "__fields__")
            and not hasattr(cls, "__pydantic_serializer__")
        ):
            return True
    return False

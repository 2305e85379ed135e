"""Which class a stored ``(module, name)`` means, and what decoding needs to know about it.

:func:`resolve` is the gate of the module docs of :mod:`tether.serde._decode`:
the names are checked as strings (deny list, allowlist, permissive mode)
before any module is imported, the class is looked up without traversal, and
only a class is returned. :func:`class_info` reads, once per class, how it is
built and which stored fields fit it (:class:`ClassInfo`): pydantic v2 / v1
models, dataclasses, named tuples, Enums and other allowlisted classes.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import logging
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from tether.errors import DecodeError
from tether.serde import _allowlist, _codecs
from tether.serde._paths import show

logger = logging.getLogger("tether.serde")

_warned_permissive: set[tuple[str, str]] = set()
_MAX_WARNED = 1000


class Kind(enum.Enum):
    PYDANTIC_V2 = "pydantic"
    PYDANTIC_V1 = "pydantic.v1"
    DATACLASS = "dataclass"
    NAMEDTUPLE = "namedtuple"
    ENUM = "enum"
    OTHER = "class"


@dataclasses.dataclass(slots=True)
class ClassInfo:
    """What decoding needs about one class, computed once."""

    cls: type
    kind: Kind
    dotted: str
    fields: frozenset[str] = frozenset()  # every stored key the class accepts
    required: frozenset[str] = frozenset()
    open_extra: bool = False  # extra keys are fine (pydantic extra="allow")
    drop: frozenset[str] = frozenset()  # stored keys to leave out (computed fields)
    non_init: frozenset[str] = frozenset()  # dataclass fields set after __init__
    checks: dict[str, tuple[type, ...]] = dataclasses.field(default_factory=dict)
    as_tuple: frozenset[str] = frozenset()  # tuple-typed fields LangGraph wrote as lists
    validate: Callable[[dict[str, Any]], Any] | None = None
    # pydantic v2: validation alone decides which stored keys it used (see counts_fields)
    counted: bool = False


def _plain_types(hint: Any) -> tuple[type, ...] | None:
    """The isinstance check a type hint allows, or None when it is not that simple."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        out: list[type] = []
        for arg in typing.get_args(hint):
            if arg is type(None):
                out.append(type(None))
                continue
            sub = _plain_types(arg)
            if sub is None:
                return None
            out.extend(sub)
        return tuple(out)
    if origin in (list, dict, set, frozenset, tuple):
        return (origin,) if origin is not tuple else (tuple, list)
    if isinstance(hint, type) and hint.__module__ in ("builtins", "datetime", "uuid", "decimal"):
        if hint is float:
            return (float, int)
        if hint is complex:
            return (complex, float, int)
        if hint is object:
            return None
        return (hint,) if hint is not tuple else (tuple, list)
    return None


def _hint_checks(cls: type, names: frozenset[str]) -> tuple[dict[str, tuple[type, ...]], set[str]]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        return {}, set()  # unresolvable annotations: no type checks, never a failure
    checks: dict[str, tuple[type, ...]] = {}
    as_tuple: set[str] = set()
    for name in names:
        if name not in hints:
            continue
        allowed = _plain_types(hints[name])
        if allowed:
            checks[name] = allowed
            if tuple in allowed and typing.get_origin(hints[name]) is not typing.Union:
                as_tuple.add(name)
    return checks, as_tuple


def counts_fields(cls: Any) -> bool:
    """Whether a validated ``cls`` records exactly the stored keys that are its fields.

    Validation ignores keys the class does not have, so a field the class lost
    would vanish silently; comparing the stored keys with the field names
    catches that, but costs a set comparison per value. For a plain model the
    validated instance's ``__pydantic_fields_set__`` is exactly the stored keys
    it used, so the count says the same thing after the fact. Not for models
    whose own code runs during validation and could change the input or the
    set (a custom ``__init__``, ``model_post_init`` or private attributes,
    model validators), nor when extra keys are kept.
    """
    try:
        return (
            (getattr(cls, "model_config", None) or {}).get("extra") != "allow"
            and cls.__pydantic_custom_init__ is False
            and cls.__pydantic_post_init__ is None
            and not cls.__pydantic_decorators__.model_validators
        )
    except AttributeError:  # a pydantic version that names these differently
        return False


def _split(dotted: str) -> tuple[str, str]:
    module, _, name = dotted.rpartition(".")
    return module, name


def class_info(cls: type, dotted: str) -> ClassInfo:
    if hasattr(cls, "__pydantic_validator__") and hasattr(cls, "model_fields"):
        fields = cls.model_fields
        computed = frozenset(getattr(cls, "model_computed_fields", {}) or {})
        config = getattr(cls, "model_config", {}) or {}
        aliased = any(f.alias or f.validation_alias for f in fields.values())
        # the validator itself: model_validate is a Python wrapper around it
        validate = cls.__pydantic_validator__.validate_python
        # a framework's own way to build it (LangChain's messages: _framework_codecs)
        own = None if aliased else _codecs.validator(cls, _split(dotted))
        if own is not None:
            validate = own
        elif aliased:
            # model_dump() writes field names; read them back by name
            def validate(data: dict[str, Any], _v: Any = cls.model_validate) -> Any:  # type: ignore[attr-defined]
                return _v(data, by_name=True)

        return ClassInfo(
            cls,
            Kind.PYDANTIC_V2,
            dotted,
            fields=frozenset(fields) | computed,
            required=frozenset(n for n, f in fields.items() if f.is_required()),
            open_extra=config.get("extra") == "allow",
            drop=computed,
            validate=validate,
            counted=not aliased and not computed and counts_fields(cls),
        )
    if hasattr(cls, "__fields__") and hasattr(cls, "parse_obj"):
        fields = cls.__fields__
        extra = getattr(getattr(cls, "__config__", None), "extra", None)
        return ClassInfo(
            cls,
            Kind.PYDANTIC_V1,
            dotted,
            fields=frozenset(fields),
            required=frozenset(n for n, f in fields.items() if f.required),
            open_extra=str(getattr(extra, "value", extra)) == "allow",
            validate=lambda data: cls(**data),
        )
    if dataclasses.is_dataclass(cls):
        dfields = dataclasses.fields(cls)
        names = frozenset(f.name for f in dfields)
        checks, as_tuple = _hint_checks(cls, names)
        return ClassInfo(
            cls,
            Kind.DATACLASS,
            dotted,
            fields=names,
            required=frozenset(
                f.name
                for f in dfields
                if f.init
                and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING
            ),
            non_init=frozenset(f.name for f in dfields if not f.init),
            checks=checks,
            as_tuple=frozenset(as_tuple),
        )
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        names = frozenset(cls._fields)
        defaults = getattr(cls, "_field_defaults", {})
        checks, as_tuple = _hint_checks(cls, names)
        return ClassInfo(
            cls,
            Kind.NAMEDTUPLE,
            dotted,
            fields=names,
            required=names - frozenset(defaults),
            checks=checks,
            as_tuple=frozenset(as_tuple),
        )
    if issubclass(cls, enum.Enum):
        return ClassInfo(cls, Kind.ENUM, dotted)
    return ClassInfo(cls, Kind.OTHER, dotted)


def resolve(key: tuple[str, str], policy: _allowlist.Policy, permissive: bool) -> ClassInfo | None:
    """The class for ``key`` after the checks in the module docs; None when it is gone.

    Not cached here: :class:`~tether.serde._decode.Decoder` keeps what it resolved.

    Names are checked as strings first, so a refused name imports nothing.
    Then the module is imported only when the name is allowed (permissive
    mode takes modules already imported, never imports one), and the name
    is looked up without traversal: a module attribute, then classes
    nested in it, each read from the class's own ``__dict__``. Whatever is
    found must be a class, of a module that is not denied.
    """
    module, name = key
    dotted = f"{module}.{name}"
    if _allowlist.is_denied(module):
        raise _refuse(dotted, f"module {module!r} is never allowed ({_DENIED_WHY})")
    allowed = policy.allows(module, name)
    if not allowed and not permissive:
        raise _refuse(dotted, f"it is not in the allowlist; {_allowlist.how_to_allow([key])}")
    if allowed:
        try:
            mod: Any = importlib.import_module(module)
        except ImportError:
            return None
        except Exception as exc:
            why = f"importing {module} failed: {show(exc)}"
            raise DecodeError(why, type_name=dotted) from exc
    else:
        mod = sys.modules.get(module)
        if mod is None:
            raise _refuse(
                dotted,
                f"permissive mode never imports a module named by stored data, and "
                f"{module!r} is not imported; import it first or "
                f"{_allowlist.how_to_allow([key])}",
            )
    cls = _lookup(mod, module, name, by_attribute=allowed)
    if cls is None:
        return None
    if _allowlist.is_denied(cls.__module__):
        raise _refuse(
            dotted,
            f"it is {cls.__module__}.{cls.__qualname__}, and module {cls.__module__!r} "
            f"is never allowed ({_DENIED_WHY})",
        )
    exact = cls.__module__ == module and cls.__qualname__ == name
    if not exact and (not allowed or policy.wildcard_only(module, name)):
        # permissive mode and module:* entries take a class only where it is defined
        raise _refuse(
            dotted,
            f"that name leads to {cls.__module__}.{cls.__qualname__}, which is defined "
            "elsewhere; only an explicit allowlist entry reaches a class through another name",
        )
    try:
        info = class_info(cls, dotted)
    except Exception as exc:  # a class whose fields or hints cannot be read
        why = f"cannot read class {dotted}: {show(exc)}"
        raise DecodeError(why, type_name=dotted) from exc
    if not allowed:
        if info.kind is Kind.OTHER:
            raise _refuse(
                dotted,
                "permissive mode constructs only data classes (pydantic models, "
                "dataclasses, named tuples, Enums), never other constructors; "
                + _allowlist.how_to_allow([key]),
            )
        _warn_permissive(key)
    return info


_DENIED_WHY = "it can run code or touch the system"


def _refuse(dotted: str, why: str) -> DecodeError:
    return DecodeError(f"refusing to construct {dotted}: {why}", type_name=dotted)


def _lookup(module: Any, module_name: str, name: str, *, by_attribute: bool) -> type | None:
    """``name`` in ``module`` without traversal: None when it is not there.

    The first part is an attribute of the module (``getattr`` for an allowed
    name, so that lazily loaded module attributes resolve; the module's own
    ``__dict__`` in permissive mode). Every further part is looked up in the
    ``__dict__`` of the class before it, so a dotted name only ever reaches
    classes nested in classes, never another module (``venv.subprocess``), a
    function or a descriptor.
    """
    dotted = f"{module_name}.{name}"
    first, *rest = name.split(".")
    if by_attribute:
        try:
            obj: Any = getattr(module, first)
        except AttributeError:
            return None
        except Exception as exc:  # a module __getattr__ that failed
            why = f"looking up {dotted} failed: {show(exc)}"
            raise DecodeError(why, type_name=dotted) from exc
    else:
        obj = vars(module).get(first)
    walked = module_name
    for part in rest:
        if obj is None:
            return None
        if not isinstance(obj, type):
            raise _refuse(
                dotted,
                f"{walked}.{first} is a {type(obj).__name__}, not a class; a dotted name may "
                "only name a class nested in a class",
            )
        walked, first = f"{walked}.{first}", part
        obj = vars(obj).get(part)
    if obj is None:
        return None
    if not isinstance(obj, type):
        raise _refuse(
            dotted,
            f"it is a {type(obj).__name__}, not a class; tether only constructs classes",
        )
    return obj


def _warn_permissive(key: tuple[str, str]) -> None:
    if key in _warned_permissive or len(_warned_permissive) >= _MAX_WARNED:
        return
    _warned_permissive.add(key)
    logger.warning(
        "permissive mode: constructing %s.%s, which is not in the allowlist; add "
        "(%r, %r) to the allowlist to silence this and to keep working in strict mode",
        key[0],
        key[1],
        key[0],
        key[1],
    )

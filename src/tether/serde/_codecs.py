"""Hooks for other libraries' classes, registered by the module that knows them.

Core serde knows the standard library's types and the ``[module, name, ...]``
envelope; where a framework's class needs more than those general rules, the
module that knows the framework registers a hook here (msgspec's model:
``enc_hook``/``dec_hook``), and the encoder and decoder only ask this registry.
LangGraph's and LangChain's are :mod:`tether.serde._framework_codecs`.

Every hook is keyed by strings, ``(module, qualname)`` as written on the wire,
so registering one imports nothing: the framework is imported only when a
value of it is written or read. Kinds of hook:

* an encoder, by class: how its values are written (:func:`register_encoder`);
* a call, by ``(ext code, class)``: how a stored envelope's argument builds
  the class, instead of the general ``cls(*args)`` (:func:`register_call`);
* a validator, by class: how a pydantic model is built from its stored
  fields, instead of its own validator (:func:`register_validator`);
* a value ext: an ext code whose payload is one packed value, with no
  envelope, wrapped in a class the hook loads (:func:`register_value_ext`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.serde._ext import Encoder

Key = tuple[str, str]  # (module, qualname)
#: builds the class from the envelope's argument: ``call(cls, arg)``
Call = Callable[[type, Any], Any]
#: a model's validator from its class and the name it was stored under, or None
#: to keep pydantic's own
MakeValidator = Callable[[type, Key], "Callable[[dict[str, Any]], Any] | None"]

# (module, qualname) -> (make the class's encoder, whether a reader checks the name
# against its allowlist; False for a type every reader rebuilds itself)
_encoders: dict[Key, tuple[Callable[[type], Encoder], bool]] = {}
_calls: dict[int, dict[Key, Call]] = {}
_validators: dict[Key, MakeValidator] = {}
# ext code -> (load the wrapper, which raises DecodeError when its library is
# missing; the path step from the ext value to the value inside)
_value_exts: dict[int, tuple[Callable[[], Callable[[Any], Any]], str]] = {}


def register_encoder(key: Key, make: Callable[[type], Encoder], *, checked: bool = True) -> None:
    """Write values of the class ``key`` names with the encoder ``make(cls)`` returns.

    ``checked``: the reader checks the written name against its allowlist (a
    class); False for a type every reader rebuilds through a fixed function.
    """
    _encoders[key] = (make, checked)


def encoder(cls: type) -> tuple[Encoder, bool] | None:
    """The registered encoder of ``cls`` and whether its name is checked; None if none is."""
    found = _encoders.get((cls.__module__, cls.__qualname__))
    if found is None:
        return None
    make, checked = found
    return make(cls), checked


def register_call(code: int, key: Key, call: Call) -> None:
    """Build the class ``key`` names, stored under ext ``code``, as ``call(cls, arg)``."""
    _calls.setdefault(code, {})[key] = call


def calls(code: int) -> dict[Key, Call]:
    """The calls registered for ext ``code``: the live table, which later registrations fill."""
    return _calls.setdefault(code, {})


def register_validator(key: Key, make: MakeValidator) -> None:
    """Validate stored fields of the pydantic model ``key`` names with ``make(cls)``."""
    _validators[key] = make


def validator(cls: type, key: Key) -> Callable[[dict[str, Any]], Any] | None:
    """The validator registered for ``key`` (the name ``cls`` was stored under), if any."""
    make = _validators.get(key)
    return None if make is None else make(cls, key)


def register_value_ext(code: int, load: Callable[[], Callable[[Any], Any]], step: str) -> None:
    """Read ext ``code`` as one packed value wrapped by ``load()``; ``step`` is its path step."""
    _value_exts[code] = (load, step)


def value_ext(code: int) -> tuple[Callable[[], Callable[[Any], Any]], str] | None:
    """How to read ext ``code`` if it is a registered value ext, else None."""
    return _value_exts.get(code)

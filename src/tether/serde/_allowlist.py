"""What decoding may construct (SPEC S3.4).

Three sets, all checked on the (module, name) strings of the payload BEFORE
anything is imported:

* :data:`SAFE_BUILDERS`: standard-library types tether rebuilds itself, each
  through one fixed function (``UUID(hex)``, ``datetime.fromisoformat``...),
  never through a callable looked up from the payload;
* :data:`FRAMEWORK_TYPES`: LangGraph / LangChain classes that graph state holds
  (messages, ``Send``, ``Interrupt``...), allowed by name like an allowlist
  entry (the same list as LangGraph's ``SAFE_MSGPACK_TYPES``);
* :data:`DENIED_MODULES`: never constructed, not even in permissive mode or
  when a user allowlists them.

A serializer's own entries are a :class:`Policy`: ``(module, name)`` pairs and
``(module, "*")`` wildcards (every class whose ``__module__`` is exactly that
module). The decoder asks it before importing anything, and the encoder asks
it, per class, before writing a value the decoder would refuse.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import functools
import ipaddress
import os
import pathlib
import re
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tether.serde._ext import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
)

__all__ = [
    "DENIED_MODULES",
    "ENV_VAR",
    "FORWARDING_INIT",
    "FRAMEWORK_TYPES",
    "SAFE_BUILDERS",
    "SAFE_JSON_BUILDERS",
    "WILDCARD",
    "Policy",
    "from_env",
    "how_to_allow",
    "is_denied",
    "normalize",
    "parse_allowlist",
]


_Builder = Callable[[Any], Any]


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _seq(value: Any) -> list[Any] | tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return value


def _kw(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"expected a map of field names, got {type(value).__name__}")
    return value


_new = object.__new__
_set = object.__setattr__
# an Enum member read through its class costs a descriptor call on 3.11
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown
_MAX_UUID = 1 << 128


def _uuid(value: Any) -> uuid.UUID:
    # UUID.__init__ is pure Python with several branches; a 32-digit hex string
    # (what the encoder writes) needs only the int
    if type(value) is str and len(value) == 32:
        number = int(value, 16)
        if 0 <= number < _MAX_UUID:
            out: uuid.UUID = _new(uuid.UUID)
            _set(out, "int", number)
            _set(out, "is_safe", _UNKNOWN_SAFETY)
            return out
    return uuid.UUID(hex=_str(value))


def _fromisoformat(value: Any) -> dt.datetime:
    if type(value) is str:
        return dt.datetime.fromisoformat(value)
    return dt.datetime.fromisoformat(_str(value))


def _hashable(value: Any) -> Any:
    # set items LangGraph wrote (it has no tuple ext) come back as lists; a set
    # can only have held them as tuples
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _items(value: Any) -> list[Any]:
    return [_hashable(v) for v in _seq(value)]


def _int_args(value: Any) -> int:
    text, base = _seq(value)
    if not isinstance(base, int) or base not in (0, 10, 16):
        raise TypeError("int base must be 0, 10 or 16")
    return int(_str(text), base)


def _timezone(value: Any) -> dt.timezone:
    args = _seq(value)
    if not 1 <= len(args) <= 2 or not isinstance(args[0], dt.timedelta):
        raise TypeError("timezone needs (offset[, name])")
    return dt.timezone(*args)


def _time(value: Any) -> dt.time:
    kw = _kw(value)
    if not set(kw) <= {"hour", "minute", "second", "microsecond", "tzinfo", "fold"}:
        raise TypeError(f"unexpected time fields {sorted(kw)}")
    return dt.time(**kw)


def _datetime_kw(value: Any) -> dt.datetime:
    kw = _kw(value)
    allowed = {"year", "month", "day", "hour", "minute", "second", "microsecond", "tzinfo", "fold"}
    if not set(kw) <= allowed:
        raise TypeError(f"unexpected datetime fields {sorted(kw)}")
    return dt.datetime(**kw)


def _ints(value: Any, n: int) -> list[int]:
    args = list(_seq(value))
    if len(args) != n or not all(type(a) is int for a in args):
        raise TypeError(f"expected {n} integers")
    return args


def _from_str(cls: Callable[[str], Any]) -> _Builder:
    def build(value: Any) -> Any:
        return cls(_str(value))

    return build


def _first(build: _Builder) -> _Builder:
    def first(args: Any) -> Any:
        return build(_seq(args)[0])

    return first


def _path(cls: type[pathlib.PurePath]) -> Callable[[Any], pathlib.PurePath]:
    def build(value: Any) -> pathlib.PurePath:
        return cls(*(_str(p) for p in _seq(value)))

    return build


def _pattern(value: Any) -> re.Pattern[Any]:
    pattern, flags = _seq(value)
    if not isinstance(pattern, str | bytes) or type(flags) is not int:
        raise TypeError("re.compile needs (pattern, flags)")
    return re.compile(pattern, flags)


# (ext code, module, name) -> builder of the payload's argument. EXT 3 (method)
# keys carry the method name too: only these exact methods are ever called.
SAFE_BUILDERS: dict[tuple[Any, ...], _Builder] = {
    (EXT_CONSTRUCTOR_SINGLE_ARG, "uuid", "UUID"): _uuid,
    (EXT_CONSTRUCTOR_SINGLE_ARG, "decimal", "Decimal"): lambda v: decimal.Decimal(_str(v)),
    (EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "set"): lambda v: set(_items(v)),
    (EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "frozenset"): lambda v: frozenset(_items(v)),
    (EXT_CONSTRUCTOR_SINGLE_ARG, "builtins", "tuple"): lambda v: tuple(_seq(v)),
    (EXT_CONSTRUCTOR_SINGLE_ARG, "collections", "deque"): lambda v: collections.deque(_seq(v)),
    (EXT_CONSTRUCTOR_SINGLE_ARG, "zoneinfo", "ZoneInfo"): lambda v: zoneinfo.ZoneInfo(_str(v)),
    (EXT_CONSTRUCTOR_POS_ARGS, "builtins", "int"): _int_args,
    (EXT_CONSTRUCTOR_POS_ARGS, "datetime", "date"): lambda v: dt.date(*_ints(v, 3)),
    (EXT_CONSTRUCTOR_POS_ARGS, "datetime", "timedelta"): lambda v: dt.timedelta(*_ints(v, 3)),
    (EXT_CONSTRUCTOR_POS_ARGS, "datetime", "timezone"): _timezone,
    (EXT_CONSTRUCTOR_POS_ARGS, "re", "compile"): _pattern,
    (EXT_CONSTRUCTOR_KW_ARGS, "datetime", "time"): _time,
    (EXT_CONSTRUCTOR_KW_ARGS, "datetime", "datetime"): _datetime_kw,
    (EXT_METHOD_SINGLE_ARG, "datetime", "datetime", "fromisoformat"): _fromisoformat,
}
for _ip in (
    ipaddress.IPv4Address,
    ipaddress.IPv4Interface,
    ipaddress.IPv4Network,
    ipaddress.IPv6Address,
    ipaddress.IPv6Interface,
    ipaddress.IPv6Network,
):
    SAFE_BUILDERS[(EXT_CONSTRUCTOR_SINGLE_ARG, "ipaddress", _ip.__name__)] = _from_str(_ip)
for _mod in ("pathlib", "pathlib._local"):
    for _cls in (
        pathlib.Path,
        pathlib.PosixPath,
        pathlib.WindowsPath,
        pathlib.PurePath,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
    ):
        SAFE_BUILDERS[(EXT_CONSTRUCTOR_POS_ARGS, _mod, _cls.__name__)] = _path(_cls)


def _json_safe() -> dict[tuple[str, str], _Builder]:
    """The legacy JSON format calls ``cls(*args)``: the same types, one argument list."""
    out: dict[tuple[str, str], _Builder] = {}
    for key, build in SAFE_BUILDERS.items():
        code, module, name = key[0], key[1], key[2]
        if code == EXT_CONSTRUCTOR_SINGLE_ARG:
            out[(module, name)] = _first(build)
        elif code == EXT_CONSTRUCTOR_POS_ARGS:
            out[(module, name)] = build
    out[("datetime", "time")] = lambda args: dt.time(*args)
    return out


# (module, name) -> builder of the JSON ``args`` list
SAFE_JSON_BUILDERS = _json_safe()

FRAMEWORK_TYPES: frozenset[tuple[str, str]] = frozenset(
    {
        ("langchain_core.messages.base", "BaseMessage"),
        ("langchain_core.messages.base", "BaseMessageChunk"),
        ("langchain_core.messages.human", "HumanMessage"),
        ("langchain_core.messages.human", "HumanMessageChunk"),
        ("langchain_core.messages.ai", "AIMessage"),
        ("langchain_core.messages.ai", "AIMessageChunk"),
        ("langchain_core.messages.system", "SystemMessage"),
        ("langchain_core.messages.system", "SystemMessageChunk"),
        ("langchain_core.messages.chat", "ChatMessage"),
        ("langchain_core.messages.chat", "ChatMessageChunk"),
        ("langchain_core.messages.tool", "ToolMessage"),
        ("langchain_core.messages.tool", "ToolMessageChunk"),
        ("langchain_core.messages.function", "FunctionMessage"),
        ("langchain_core.messages.function", "FunctionMessageChunk"),
        ("langchain_core.messages.modifier", "RemoveMessage"),
        ("langchain_core.documents.base", "Document"),
        ("langgraph.types", "Send"),
        ("langgraph.types", "TimeoutPolicy"),
        ("langgraph.types", "Interrupt"),
        ("langgraph.types", "Command"),
        ("langgraph.types", "StateSnapshot"),
        ("langgraph.types", "PregelTask"),
        ("langgraph.types", "Overwrite"),
        ("langgraph.store.base", "Item"),
        ("langgraph.store.base", "GetOp"),
        ("pydantic.types", "SecretStr"),
        ("pydantic.types", "SecretBytes"),
    }
)

# Framework classes whose own ``__init__`` passes stored fields on to pydantic
# unchanged (LangChain's messages: ``__init__(content, content_blocks=None,
# **kwargs)`` forwards ``content`` and ``kwargs`` when ``content_blocks`` is
# absent, and ``content_blocks`` is not a field, so no stored value has it).
# For these the decoder validates the stored fields straight into a new
# instance, which is what that ``__init__`` ends up doing, and skips the Python
# frames in between: a third of the cost of reading a message (the same
# pydantic validation and model validators run; S3.5's checks are unchanged).
# ``RemoveMessage`` is left out: its ``__init__`` refuses content. The decoder
# also checks that every ``__init__`` on the way is LangChain's own (a
# subclass elsewhere with its own ``__init__`` takes the ordinary path), and a
# test compares both paths on each class here with every stored shape.
FORWARDING_INIT: frozenset[tuple[str, str]] = frozenset(
    key
    for key in FRAMEWORK_TYPES
    if key[0].startswith("langchain_core.messages.") and key[1] != "RemoveMessage"
) | {("langchain_core.documents.base", "Document")}

# Modules whose classes and functions run code, touch the process or the file
# system, or load more code. A payload naming anything in them is refused in
# every mode, and the module is never imported.
DENIED_MODULES: frozenset[str] = frozenset(
    {
        "builtins",
        "os",
        "posix",
        "nt",
        "posixpath",
        "ntpath",
        "sys",
        "subprocess",
        "shutil",
        "importlib",
        "pickle",
        "_pickle",
        "marshal",
        "ctypes",
        "socket",
        "pty",
        "runpy",
        "code",
        "codeop",
        "shelve",
        "multiprocessing",
        "signal",
        "io",
        "_io",
        "tempfile",
        "webbrowser",
        "platform",
        "threading",
        "asyncio",
        "operator",
        "functools",
        "types",
        "inspect",
        "gc",
        # a settings model reads the environment and files when it is built
        "pydantic_settings",
    }
)


def is_denied(module: str) -> bool:
    """True if ``module`` (or a package it lives in) is in :data:`DENIED_MODULES`."""
    root = module.split(".", 1)[0]
    return module in DENIED_MODULES or root in DENIED_MODULES


WILDCARD = "*"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _entry(module: str, name: str, given: object) -> tuple[str, str]:
    from tether.errors import ConfigError

    if not _IDENT.fullmatch(module):
        raise ConfigError(f"allowlist entry {given!r}: {module!r} is not a module name")
    if name != WILDCARD and not _IDENT.fullmatch(name):
        raise ConfigError(
            f"allowlist entry {given!r}: {name!r} is not a class name (Name, Outer.Inner) or '*'"
        )
    if name == WILDCARD and is_denied(module):
        raise ConfigError(
            f"allowlist entry {given!r}: module {module!r} is never allowed (it can run code "
            "or touch the system), so it cannot be allowed whole"
        )
    return module, name


def normalize(entries: Iterable[tuple[str, ...] | type]) -> frozenset[tuple[str, str]]:
    """Allowlist entries as ``(module, name)`` pairs; classes are accepted too.

    ``(module, "*")`` allows every class whose ``__module__`` is exactly
    ``module`` (not its submodules); a module that is never allowed cannot be
    given that way.
    """
    from tether.errors import ConfigError

    out: set[tuple[str, str]] = set()
    for entry in entries:
        if isinstance(entry, type):
            out.add((entry.__module__, entry.__qualname__))
            continue
        if not isinstance(entry, tuple | list) or len(entry) < 2:
            raise ConfigError(
                f"allowlist entries are (module, name) pairs or classes, got {entry!r}"
            )
        if not all(isinstance(p, str) for p in entry):
            raise ConfigError(f"allowlist entry {entry!r} must hold strings")
        # LangGraph's allowlists may spell a type as (*module_parts, name).
        # Names are not checked further: LangGraph hands over its schemas'
        # types, local classes included (which the encoder refuses to store).
        module, name = ".".join(entry[:-1]), entry[-1]
        if name == WILDCARD:
            _entry(module, name, entry)
        out.add((module, name))
    return frozenset(out)


def parse_allowlist(text: str, *, source: str = "allowlist") -> frozenset[tuple[str, str]]:
    """``"myapp.models:Order, myapp.models:*"`` as ``(module, name)`` pairs.

    The form of ``TETHER_ALLOWLIST`` and of the CLI's ``--allow``: entries
    separated by commas (spaces around them are ignored), each ``module:Name``,
    ``module:Outer.Inner`` or ``module:*``.

    Raises:
        ConfigError: an entry that is not of that form, named with ``source``.
    """
    from tether.errors import ConfigError

    out: set[tuple[str, str]] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        module, sep, name = item.partition(":")
        if not sep:
            raise ConfigError(
                f"{source}: {item!r} is not module:Name (for example myapp.models:Order, "
                "or myapp.models:* for every class defined in that module)"
            )
        try:
            out.add(_entry(module.strip(), name.strip(), item))
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return frozenset(out)


#: the environment variable every default serializer reads its extra entries from
ENV_VAR = "TETHER_ALLOWLIST"


def from_env(environ: Mapping[str, str] | None = None) -> frozenset[tuple[str, str]]:
    """The entries of ``TETHER_ALLOWLIST`` (none when it is unset or empty).

    Raises:
        ConfigError: a malformed entry, naming the variable and the entry.
    """
    text = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return _parse_env(text) if text.strip() else frozenset()


@functools.lru_cache(maxsize=8)
def _parse_env(text: str) -> frozenset[tuple[str, str]]:
    # with_allowlist makes a serializer per compiled graph: parse the text once
    return parse_allowlist(text, source=ENV_VAR)


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """What one serializer constructs beyond the safe built-in types, by name.

    Attributes:
        names: explicit ``(module, name)`` entries.
        modules: modules given as ``(module, "*")``.
        upgrades: names with a registered upgrade function (allowed too).
        permissive: also construct data classes (pydantic models,
            dataclasses, named tuples, Enums) of modules already imported.
    """

    names: frozenset[tuple[str, str]]
    modules: frozenset[str]
    upgrades: frozenset[tuple[str, str]]
    permissive: bool

    @classmethod
    def of(
        cls,
        allowlist: frozenset[tuple[str, str]],
        upgrades: Iterable[tuple[str, str]],
        permissive: bool,
    ) -> Policy:
        return cls(
            names=frozenset(k for k in allowlist if k[1] != WILDCARD),
            modules=frozenset(k[0] for k in allowlist if k[1] == WILDCARD),
            upgrades=frozenset(upgrades),
            permissive=permissive,
        )

    def allows(self, module: str, name: str) -> bool:
        """Allowed by name (before anything is imported): entries, framework types, upgrades.

        A module wildcard admits the name here; the class found must then be
        defined in that very module (:meth:`wildcard_only`).
        """
        key = (module, name)
        return (
            key in self.names
            or key in FRAMEWORK_TYPES
            or key in self.upgrades
            or module in self.modules
        )

    def wildcard_only(self, module: str, name: str) -> bool:
        """Whether only a ``module:*`` entry allows ``(module, name)``."""
        key = (module, name)
        return (
            module in self.modules
            and key not in self.names
            and key not in FRAMEWORK_TYPES
            and key not in self.upgrades
        )


def how_to_allow(keys: Iterable[tuple[str, str]]) -> str:
    """The ways to allow ``keys``, each written out so that it works as typed."""
    keys = sorted(set(keys))
    pairs = ", ".join(f"({m!r}, {n!r})" for m, n in keys)
    env = ",".join(f"{m}:{n}" for m, n in keys)
    return (
        f"allow {'it' if len(keys) == 1 else 'them'} with "
        f"serde=MsgpackSerializer(allowlist=[{pairs}]) on a tether saver, "
        f"allowlist=[{pairs}] on a tether.langgraph saver (e.g. "
        f"SqliteSaver.from_conn_string(path, allowlist=[{pairs}])), "
        f"saver = saver.with_allowlist([{pairs}]) (it returns a new saver; use that one), "
        f"or TETHER_ALLOWLIST={env}"
    )

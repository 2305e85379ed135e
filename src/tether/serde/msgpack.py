"""tether's default serializer: typed MessagePack, safe by default (SPEC S3).

Tags
----
``dumps_typed`` returns ``(tag, bytes)``:

========== ===================================================================
``null``    ``None``, with empty bytes
``bytes``   a top-level ``bytes`` value, untouched
``bytearray`` a top-level ``bytearray``, untouched
``msgpack`` everything else (below)
``pickle``  only with ``pickle_fallback=True``, for values msgpack cannot hold
``json``    read only: LangGraph's legacy JSON format (``{"lc": 2, ...}``)
========== ===================================================================

Wire format
-----------
The same as LangGraph's ``JsonPlusSerializer`` (tether reads what it wrote,
and it reads what tether writes). dict/list/str/int/float/bool/bytes are plain
MessagePack (dict keys may be str, int, float, bool, None or tuples of those).
Typed values are MessagePack ext values whose payload is a MessagePack array
``[module, name, arg, ...]``:

=== ======================== ==================================================
0   ``cls(arg)``             Enum (value), UUID (hex), Decimal (str),
                             set / frozenset / deque / tuple (items),
                             IP addresses and networks (str), ZoneInfo (key)
1   ``cls(*args)``           date, timedelta, timezone, pathlib paths,
                             ``re.compile(pattern, flags)``, ints beyond 64 bits
                             (``int(hex, 0)``), LangGraph ``Send``
2   ``cls(**fields)``        dataclasses, named tuples, time, datetimes with a
                             ZoneInfo (so DST rules survive)
3   ``cls.method(arg)``      datetimes: ``datetime.fromisoformat`` only
4   pydantic v1 model        ``model.dict()``
5   pydantic v2 model        ``model_dump()`` (python mode), rebuilt with
                             ``model_validate``
6   NumPy array              ``[dtype.str, shape, order, buffer]``
7   LangGraph snapshot       ``_DeltaSnapshot(value)``: the packed value itself,
                             no ``[module, name]`` envelope
=== ======================== ==================================================

Differences from LangGraph, each a strict improvement it still reads: tuples
(LangGraph returns them as lists), ints beyond 64 bits and datetimes in a
ZoneInfo. Ext 7 holds a LangGraph ``DeltaChannel`` snapshot: it is written and
read as LangGraph does when ``langgraph`` is importable (decoding builds only
the ``_DeltaSnapshot`` NamedTuple, around a value decoded by the rules below);
without it, reading ext 7 is a DecodeError that says what to install.
Not kept (written as their base type, like LangGraph): subclasses of
str/int/dict/list (OrderedDict, defaultdict...), nested ``bytearray`` (comes
back as ``bytes``), and dict keys that are Enum/UUID/datetime (ormsgpack writes
them as their string form). Classes defined inside a function cannot be
rebuilt, so encoding them raises EncodeError. Fields of a pydantic model go
through ``model_dump``: a model held in a field typed ``Any`` comes back as a
dict, as in LangGraph.

Limits
------
Stored bytes are read by one decoder (msgspec's) for the value and for every
ext payload in it:

* a value is exactly one MessagePack value: bytes after its end, at the top or
  inside any ext payload, are a DecodeError (one damaged length byte would
  otherwise drop the rest of a list without a word);
* nesting (arrays, maps and typed values inside each other) is counted over
  the bytes before anything is decoded, across ext values, against a fixed
  limit: 512 levels, each typed value counting 4 (``tether.serde._depth``).
  Deeper is a DecodeError naming the path, whatever ``sys.getrecursionlimit()``
  says. What the limit allows takes at most ~160 KiB of C stack to decode
  (measured on CPython 3.11, x86-64), so it reads on a thread made with
  ``threading.stack_size(256 * 1024)``; a caller that leaves less stack than
  that, or class constructors (pydantic validators) that recurse on their own
  over a deep value, are outside what this bounds. Legacy ``"json"`` payloads
  are held to the same 512 levels;
* ext payloads are read in place, not copied per level: reading a value costs
  time and memory linear in its size;
* MessagePack's own timestamp extension (code -1) is read as a UTC datetime
  (neither tether nor LangGraph writes it).

Safe types
----------
Decoding constructs only:

* plain MessagePack values;
* the standard-library types in the tables above, each rebuilt by one fixed
  function (``UUID(hex=...)``, ``datetime.fromisoformat``...), never through a
  callable looked up from the payload;
* LangGraph / LangChain framework types that graph state holds (messages,
  ``Document``, ``Send``, ``Interrupt``, ``Command``...; the same set as
  LangGraph's ``SAFE_MSGPACK_TYPES``), and LangGraph's ``_DeltaSnapshot``
  (ext 7) around a value already decoded by these rules;
* classes in the **allowlist**: ``(module, name)`` pairs given as
  ``allowlist=[("app.models", "Item")]`` (a class object works too), or added
  later with :meth:`MsgpackSerializer.with_allowlist` (what the graph runtime
  does for its state schema).

Everything is checked on the (module, name) strings before anything is
imported: a refused payload imports nothing and calls nothing. An allowed name
is then looked up without traversal: an attribute of its module, and for a
dotted name (``Outer.Inner``) classes nested in that class, each read from
the class's own ``__dict__`` -- never through another module
(``("venv", "subprocess.Popen")``), a function or a descriptor. It must
resolve to a class (never a function such as ``os.system``) whose own
``__module__`` is not denied, and is built only through its kind's path:
pydantic ``model_validate``, dataclass / named tuple / plain class
``cls(**fields)``, ``cls(*args)``, Enum ``cls(value)``. Modules that run code
or touch the system (``os``, ``posix``, ``subprocess``, ``builtins``, ``sys``,
``importlib``, ``pickle``, ``ctypes``, ``socket``, ``pydantic_settings``...)
are refused in every mode, allowlisted or not.

An entry ``(module, "*")`` (``module:*`` in ``TETHER_ALLOWLIST``) allows every
class whose ``__module__`` is exactly ``module``: not its submodules, not a
class it imported from elsewhere, never a denied module. Its security meaning
is that of listing each class of that module by hand, including the ones
added later: every class there must be safe to build from stored fields.

``TETHER_ALLOWLIST``
~~~~~~~~~~~~~~~~~~~~
Every serializer made with its defaults (so every saver's default serializer,
the ``tether.langgraph`` drop-ins' and the CLI's) also allows the entries of
the ``TETHER_ALLOWLIST`` environment variable, read when the serializer is
made: comma-separated ``module:Name``, ``module:Outer.Inner`` or ``module:*``
(e.g. ``TETHER_ALLOWLIST=myapp.models:Order,myapp.events:*``). A malformed
entry, or ``module:*`` of a denied module, is a ConfigError naming the
variable. ``MsgpackSerializer(env_allowlist=False)`` ignores it. What it means
for security: whoever sets the process's environment decides what stored data
may construct in that process, exactly as if the entries were written in the
code, for every store the process opens; ``module:*`` trusts every class
defined in that module, including ones added later. List your own model
modules, never a library's wholesale. :func:`tether.serde.parse_allowlist`
reads the same text (the CLI's ``--allow``).

Types from ``__main__`` get no special treatment: strict mode refuses them
unless ``("__main__", "Name")`` is allowlisted (and then they decode only in a
process whose ``__main__`` defines them); move them to an importable module.

Permissive mode
---------------
``permissive=True`` also constructs classes that are not allowlisted, logging
one warning per type on the ``tether.serde`` logger. It exists for migrating
old data and is never the default. What it still refuses:

* any module a payload names that the process has not imported already
  (stored data never makes tether import a module);
* a class reached through another name (a re-export, a dotted path through a
  module): it takes a class only as ``(its __module__, its __qualname__)``;
* anything but data classes: pydantic models, dataclasses, named tuples and
  Enums. Other constructors (``logging.FileHandler(path, "w")`` truncates a
  file) are never called;
* the denied modules above.

Its real risk, plainly: whoever can write to the store can make every reader
build any data class of any module the reader has imported, with fields of
their choosing. That runs those classes' own code (pydantic validators,
``__post_init__``, Enum ``_missing_``), wherever they come from: the
application's, its libraries', the standard library's. Use it only on data
you trust, for as long as a migration takes, and write the types it warns
about into the allowlist.

Schema evolution
----------------
When a stored dataclass, named tuple or pydantic model no longer fits its
class, decoding never drops or invents data silently. What counts as not
fitting: a stored field the class no longer has (removed or renamed), a
required field that was not stored (added without a default, or renamed), a
stored value whose type no longer matches a simple annotation (``int``,
``str | None``, ``list[...]``, a datetime/UUID/Decimal class; other hints are
not checked for dataclasses and named tuples), a failed pydantic validation, an
Enum value that is no longer a member, or a class that no longer exists.
Compatible changes (a new field with a default, a removed default) just work.
What happens then:

* default (``on_mismatch="error"``): :class:`~tether.errors.DecodeError`, e.g.
  ``stored app.models.Item no longer fits its class: stored field 'k' no
  longer exists on app.models.Item; ... at `$.items[0]```;
* an upgrade registered for the stored ``(module, name)``:
  ``upgrades={("app.models", "Item"): fn}``; ``fn`` gets the stored fields (a
  dict; the stored value for Enum / one-argument types, the argument list for
  ``cls(*args)`` types) and returns the value to use. Registering an upgrade
  allowlists that name;
* ``on_mismatch="raw"``: the stored fields are returned as a dict (value /
  list as above) and a :class:`SchemaMismatchWarning` is issued with
  :func:`warnings.warn` (filter it like any warning).

Errors
------
* :class:`~tether.errors.DecodeError` for anything that cannot be read: bad or
  truncated bytes, an unknown tag, an unknown ext code, a malformed ext
  payload, a refused type, a schema mismatch, ``pickle`` without
  ``pickle_fallback``. The message names the type and ends with the path inside
  the value (``at `$.messages[3]```); ``.path`` and ``.type_name`` hold them.
* :class:`~tether.errors.EncodeError` (a ``TypeError``) for a value msgpack
  cannot hold, naming its type and path, unless ``pickle_fallback=True``.

Refused at write what would be refused at read
----------------------------------------------
``dumps_typed`` (so every saver's ``put`` and ``put_writes``, before anything
is stored) refuses a value holding a class this serializer would refuse to
construct when reading it back: a class not in the allowlist, a class of a
denied module, a class defined inside a function (no importable path). The
EncodeError names every such class (``module:qualname``) and where it is in
the value (``$.orders[0]`` and how many more places), then the fixes, written
out so that they work as typed: ``serde=MsgpackSerializer(allowlist=[...])``,
``allowlist=[...]`` on a ``tether.langgraph`` saver,
``saver = saver.with_allowlist([...])`` (it returns a new saver) or
``TETHER_ALLOWLIST=module:Name``. The decision is kept per class, so a type
seen before costs nothing more. A model nested in a pydantic model's fields is
written as its fields (``model_dump``), so it needs no entry of its own.

* permissive mode refuses only classes of denied modules (what it reads, it
  reads from modules already imported: a class that was written was);
* with ``pickle_fallback=True`` a value holding a class msgpack would not
  read back is pickled instead (pickle reads back whatever it wrote).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Mapping
from typing import Any

from tether.errors import ConfigError, DecodeError, EncodeError
from tether.serde import _allowlist, _ext, _framework_codecs, _paths
from tether.serde._decode import Decoder, MismatchPolicy, SchemaMismatchWarning, Upgrade
from tether.serde._jsonplus import loads_json

__all__ = ["MsgpackSerializer", "SchemaMismatchWarning"]

# LangGraph's and LangChain's classes are written and read through hooks
# that module registers; core serde itself knows only the standard library
_framework_codecs.register()

_EMPTY = b""


class MsgpackSerializer:
    """Typed MessagePack serializer, strict by default; see the module docs.

    Args:
        allowlist: extra ``(module, name)`` pairs (or classes) decoding may
            construct, on top of the safe built-in and framework types.
        permissive: construct any importable class (logs a warning per type).
            For migrations only.
        pickle_fallback: pickle values msgpack cannot hold (tag ``"pickle"``)
            and read ``"pickle"`` payloads. Off by default: unpickling runs code.
        on_mismatch: ``"error"`` (default) raises DecodeError when a stored value
            no longer fits its class; ``"raw"`` returns the stored fields with a
            :class:`SchemaMismatchWarning`.
        upgrades: ``{(module, name): fn}``; ``fn(stored_fields)`` builds the
            value when the stored one no longer fits (takes precedence over
            ``on_mismatch``).
        env_allowlist: also allow the entries of the ``TETHER_ALLOWLIST``
            environment variable, read once, here (see the module docs).

    Raises:
        ConfigError: a malformed allowlist entry (in ``allowlist`` or in
            ``TETHER_ALLOWLIST``) or policy.
    """

    def __init__(
        self,
        *,
        allowlist: Iterable[tuple[str, ...] | type] = (),
        permissive: bool = False,
        pickle_fallback: bool = False,
        on_mismatch: MismatchPolicy = "error",
        upgrades: Mapping[tuple[str, str], Upgrade] | None = None,
        env_allowlist: bool = True,
    ) -> None:
        if on_mismatch not in ("error", "raw"):
            raise ConfigError(f"on_mismatch must be 'error' or 'raw', got {on_mismatch!r}")
        ups = dict(upgrades or {})
        for key, fn in ups.items():
            if not (
                isinstance(key, tuple) and len(key) == 2 and all(isinstance(p, str) for p in key)
            ):
                raise ConfigError(f"upgrades keys are (module, name) pairs, got {key!r}")
            if not callable(fn):
                raise ConfigError(f"the upgrade for {key!r} is not callable")
        self._allowlist = _allowlist.normalize(allowlist)
        if env_allowlist:
            self._allowlist |= _allowlist.from_env()
        self.permissive = permissive
        self.pickle_fallback = pickle_fallback
        self.on_mismatch: MismatchPolicy = on_mismatch
        self._upgrades = ups
        self._decoder = Decoder(
            allowlist=self._allowlist,
            permissive=permissive,
            on_mismatch=on_mismatch,
            upgrades=ups,
        )
        # the encoder's hook, with this serializer's write-time check (#13.4)
        self._default = _ext.make_default(self._read_back_refusal)

    @property
    def allowlist(self) -> frozenset[tuple[str, str]]:
        """The explicit ``(module, name)`` pairs, ``TETHER_ALLOWLIST``'s included, and
        ``(module, "*")`` entries (safe and framework types not included)."""
        return self._allowlist

    def with_allowlist(self, extra: Iterable[tuple[str, ...] | type]) -> MsgpackSerializer:
        """A serializer that also allows ``extra``; ``self`` when nothing is new."""
        merged = self._allowlist | _allowlist.normalize(extra)
        if merged == self._allowlist:
            return self
        return MsgpackSerializer(
            allowlist=merged,
            permissive=self.permissive,
            pickle_fallback=self.pickle_fallback,
            on_mismatch=self.on_mismatch,
            upgrades=self._upgrades,
            env_allowlist=False,  # its entries are in self._allowlist already
        )

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Encode ``obj`` as ``(tag, bytes)``.

        Raises:
            EncodeError: ``obj`` holds a value of an unsupported type, or of a class
                this serializer would refuse to read back (the message names every
                one, with its path, and the fix), unless ``pickle_fallback`` is on.
        """
        if obj is None:
            return "null", _EMPTY
        cls = type(obj)
        if cls is bytes:
            return "bytes", obj
        if cls is bytearray:
            return "bytearray", bytes(obj)
        try:
            return "msgpack", _ext.pack(obj, self._default)
        except _ext.Unsupported as exc:
            if self.pickle_fallback:  # pickle reads back whatever it wrote
                return "pickle", _pickle(obj)
            raise _encode_error(obj, exc, self._read_back_refusal) from None

    def _read_back_refusal(self, key: tuple[str, str]) -> str | None:
        """Why :meth:`loads_typed` would refuse to build the class ``key``, or None.

        Asked once per class by the encoder. The same policy as the decoder's
        gate, for a class the writer has in hand (so its ``(module, qualname)``
        is exact): denied modules, then the allowlist unless permissive.
        """
        module, name = key
        if _allowlist.is_denied(module):
            return (
                f"module {module!r} is never allowed (it can run code or touch the system); "
                "define the class in another module"
            )
        if self.permissive or self._decoder.policy.allows(module, name):
            return None
        if module == "__main__":
            return (
                "not in the allowlist (and a class of __main__ reads back only in a process "
                "whose __main__ defines it: better move it to an importable module)"
            )
        return _NOT_ALLOWED

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode what :meth:`dumps_typed` (or LangGraph's JsonPlusSerializer) wrote.

        Raises:
            DecodeError: the bytes cannot be read, name a type that is not allowed,
                or no longer fit their class (see the module docs).
        """
        try:
            tag, raw = data
        except (TypeError, ValueError) as exc:
            raise DecodeError(f"expected a (tag, bytes) pair, got {type(data).__name__}") from exc
        if tag == "null":
            return None
        if type(raw) is not bytes:
            # bytes(5) would be five zero bytes: a wrong payload must not read as data
            if not isinstance(raw, bytes | bytearray | memoryview):
                raise DecodeError(f"{tag!r} payload must be bytes, got {type(raw).__name__}")
            raw = bytes(raw)
        if tag == "msgpack":
            return self._decoder.unpack(raw)
        if tag == "bytes":
            return raw
        if tag == "bytearray":
            return bytearray(raw)
        if tag == "json":
            return loads_json(self._decoder, raw)
        if tag == "pickle":
            if not self.pickle_fallback:
                raise DecodeError(
                    "refusing a 'pickle' payload: unpickling runs code; enable it with "
                    "MsgpackSerializer(pickle_fallback=True) only for data you trust"
                )
            try:
                return pickle.loads(raw)  # noqa: S301 - opted in with pickle_fallback
            except Exception as exc:
                raise DecodeError(f"invalid pickle payload: {exc!r}") from exc
        raise DecodeError(
            f"unknown serialization tag {tag!r}; tether reads 'msgpack', 'json', 'null', "
            "'bytes', 'bytearray' and (with pickle_fallback) 'pickle'"
        )

    def __repr__(self) -> str:
        mode = "permissive" if self.permissive else "strict"
        return f"MsgpackSerializer({mode}, allowlist={len(self._allowlist)} types)"


def _pickle(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj)
    except Exception as exc:  # PicklingError, AttributeError (a lambda, a local class)...
        raise EncodeError(
            f"cannot serialize {type(obj).__module__}.{type(obj).__qualname__}: msgpack cannot "
            f"hold it and pickle failed too: {exc!r}"
        ) from exc


_NOT_ALLOWED = "not in the allowlist"


def _encode_error(obj: Any, first: _ext.Unsupported, check: _ext.Check) -> EncodeError:
    """One EncodeError naming every problem in ``obj`` and the fix for each kind."""
    found = _ext.problems(obj, check) or [first]
    kinds: dict[tuple[str, str], list[Any]] = {}  # class -> [reason, first instance, count]
    values: list[_ext.Unsupported] = []
    for problem in found:
        cls = type(problem.obj)
        if isinstance(problem, _ext.Refused) or "<locals>" in cls.__qualname__:
            key = (cls.__module__, cls.__qualname__)
            entry = kinds.setdefault(key, [problem.reason, problem.obj, 0])
            entry[2] += 1
        else:
            values.append(problem)
    if not kinds:
        bad = values[0] if values else first
        target = bad.obj
        return EncodeError(
            f"cannot serialize {type(target).__module__}.{type(target).__qualname__}: "
            f"{bad.reason}; convert it to a supported type or enable pickle_fallback",
            path=_paths.locate(obj, target),
        )
    lines = [
        f"refusing to store a value holding {len(kinds)} type{'s' if len(kinds) > 1 else ''} "
        "this serializer would refuse to read back:"
    ]
    paths = []
    for (module, qualname), (reason, instance, count) in kinds.items():
        path = _paths.locate(obj, instance)
        paths.append(path)
        more = f" and {count - 1} more place{'s' if count > 2 else ''}" if count > 1 else ""
        lines.append(f"- {module}:{qualname} at `{path}`{more}: {reason}")
    for bad in values:
        target = bad.obj
        path = _paths.locate(obj, target)
        paths.append(path)
        lines.append(
            f"- cannot serialize {type(target).__module__}.{type(target).__qualname__} at "
            f"`{path}`: {bad.reason}"
        )
    refused = [key for key, entry in kinds.items() if entry[0].startswith(_NOT_ALLOWED)]
    if refused:
        lines.append(_allowlist.how_to_allow(refused))
    error = EncodeError("\n".join(lines))
    error.path = paths[0]  # the message names every path; .path holds the first
    return error

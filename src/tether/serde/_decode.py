"""Decoding half of the MessagePack wire format: the ext hook, the allowlist gate
and the schema-evolution policies (SPEC S3.4, S3.5).

Order of checks for every ext value: the payload shape, then the (module, name)
strings against the safe builders / allowlist / deny list -- only then is the
module imported and the class looked up, and then only a class (never a
function) is constructed, through the path its kind dictates. The gate and
what is known about each class are :mod:`tether.serde._classinfo`; the path
an error carries is found by :mod:`tether.serde._paths`.

Once a (module, name) has passed those checks, the decoder keeps how to build
it (``Decoder._fast``) and later values of that type take a short path in
:meth:`Decoder.hook` that still checks the shape and the fit of every value
(S3.5) and falls back to the full path on anything unexpected. An Enum member
is also remembered by its exact payload bytes: the same bytes would pass the
same checks to the same member.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal

import msgspec

from tether.errors import DecodeError
from tether.serde import _allowlist, _classinfo, _codecs, _depth, _paths
from tether.serde._classinfo import ClassInfo, Kind
from tether.serde._ext import (
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_NAMES,
    EXT_NUMPY_ARRAY,
)
from tether.serde._numpy import EXT_HEADS, SMALL_ARRAY, read_array, read_whole
from tether.serde._paths import describe, failed, show

MismatchPolicy = Literal["error", "raw"]
Upgrade = Callable[[Any], Any]


class SchemaMismatchWarning(UserWarning):
    """A stored value no longer fits its class and was returned as raw fields."""


# Bounds of Decoder._memo: an Enum envelope is a few dozen bytes; hashing
# larger ext 0 payloads (sets, tuples) would cost more than it could save.
_MEMO_MAX_BYTES = 256
_MEMO_MAX_ITEMS = 4096

# allowed lengths of the [module, name, arg, ...] envelope, by ext code (0-5)
_ENVELOPE_LEN = (
    (3,),  # EXT_CONSTRUCTOR_SINGLE_ARG
    (3,),  # EXT_CONSTRUCTOR_POS_ARGS
    (3,),  # EXT_CONSTRUCTOR_KW_ARGS
    (4,),  # EXT_METHOD_SINGLE_ARG
    (3,),  # EXT_PYDANTIC_V1
    (3, 4),  # EXT_PYDANTIC_V2
)

# Decoding is msgspec's, not ormsgpack's (which writes): ormsgpack's unpackb
# returns the first value and ignores bytes after it (a flipped length byte
# turned a 3-message list into 1 message, #18.3), and counts depth per call,
# so the ext hook's nested calls each started from zero and ~20 ext levels of
# 1,000 arrays overflowed the C stack (#18.1). msgspec refuses trailing bytes
# and hands the hook a view of the payload instead of a copy (a value nested k
# ext levels deep is not copied k times). Its own depth guard is the
# interpreter's recursion counter, which sys.setrecursionlimit raises and
# which does not know a thread's stack size, so the nesting is counted
# before decoding, across ext levels, against a fixed limit (_depth).

_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


def _msgpack_problem(exc: Exception, size: int) -> str:
    """msgspec's complaint about ``size`` bytes, in words that say what happened."""
    text = str(exc)
    found = _TRAILING.search(text)
    if found is None:
        return text
    end = int(found.group(1))
    extra = size - end
    return (
        f"{extra} byte{'s' if extra != 1 else ''} after the end of the value (the value "
        f"ends at byte {end} of {size}): the bytes are damaged or are not one MessagePack value"
    )


_TOO_DEEP = (
    f"the value is nested too deeply to read: its arrays, maps and typed values inside "
    f"each other go past tether's limit of {_depth.MAX_DEPTH} levels (a typed value "
    f"counts {_depth.EXT_LEVELS}), which keeps decoding within a small thread's C stack"
)
# what is left: the caller's own frames used up Python's recursion limit
_NO_RECURSION_LEFT = (
    "the value is nested too deeply to read: Python's recursion limit was reached while reading "
    "it (the caller's own frames count, and so do class constructors)"
)


# How Decoder.hook builds a type it has seen, from its (how, target, extra)
# entry in Decoder._fast:
_SAFE = 0  # a safe built-in type: target(arg), its errors reported as malformed
_METHOD = 1  # ext 3: target(arg) when the stored method name is extra
_BUILD = 2  # target(arg), which checks the input itself (the from_* paths)
_VALIDATE = 3  # pydantic: target(fields) when the stored keys are exactly extra
_COUNTED = 4  # pydantic: target(fields), kept if it used every stored key
_MEMBER = 5  # an Enum member: target[value]
_Fast = tuple[int, Any, Any]


class Decoder:
    """One serializer's decoding rules; :meth:`hook` is the decoder's ``ext_hook``."""

    def __init__(
        self,
        *,
        allowlist: frozenset[tuple[str, str]],
        permissive: bool,
        on_mismatch: MismatchPolicy,
        upgrades: Mapping[tuple[str, str], Upgrade],
    ) -> None:
        self.allowlist = allowlist
        self.policy = _allowlist.Policy.of(allowlist, upgrades, permissive)
        self.permissive = permissive
        self.on_mismatch = on_mismatch
        self.upgrades = dict(upgrades)
        self._classes: dict[tuple[str, str], ClassInfo] = {}
        # ext code -> (module -> name -> how to build the envelope's argument,
        # see _SAFE...; the envelope lengths the code allows). The safe
        # builders are there from the start, each allowed class once it has
        # been resolved. Nested dicts rather than (code, module, name) keys:
        # no tuple to build per value.
        self._fast: dict[int, tuple[dict[str, dict[str, _Fast]], tuple[int, ...]]] = {
            code: ({}, lengths) for code, lengths in enumerate(_ENVELOPE_LEN)
        }
        for key, build in _allowlist.SAFE_BUILDERS.items():
            code, module, name = key[0], key[1], key[2]
            entry = (_SAFE, build, None) if len(key) == 3 else (_METHOD, build, key[3])
            self._fast[code][0].setdefault(module, {})[name] = entry
        # ext 0 payload bytes -> the Enum member they decoded to. Members are
        # singletons and a state repeats a few of them many times, so the same
        # bytes skip the envelope entirely; only members found by value (after
        # the allowlist check) are kept, never an upgrade's or raw result.
        self._memo: dict[bytes | memoryview, Any] = {}
        # one decoder for the value and every ext payload in it: the hook
        # decodes a payload with it, so the recursion count runs across levels
        self._unpack = msgspec.msgpack.Decoder(ext_hook=self.hook).decode
        self._lock = threading.Lock()
        # ext 1 classes built by a framework's own call instead of cls(*args)
        self._calls = _codecs.calls(EXT_CONSTRUCTOR_POS_ARGS)

    # --- entry points -------------------------------------------------------

    def unpack(self, raw: bytes) -> Any:
        """Decode MessagePack bytes; every failure is a DecodeError with a path.

        The bytes must hold exactly one value, and so must every ext payload
        inside it. Nesting is bounded (``_depth``): by the recursion guard where
        it stops any value before the C stack ends, else by :data:`_depth.MAX_DEPTH`
        levels counted before any of it is decoded. A DecodeError either way.
        """
        if type(raw) is not bytes:
            raw = bytes(raw)  # ext payloads are views of it: read-only, hashable
        if not _depth.guard_suffices() and _depth.too_deep(raw):
            raise DecodeError(_TOO_DEEP, path=_depth.deep_path(raw))
        if len(raw) > SMALL_ARRAY and raw[:1] in EXT_HEADS:
            array = read_whole(raw)
            if array is not None:
                return array
        try:
            return self._unpack(raw)
        except DecodeError as exc:
            inner = exc
        except RecursionError:
            raise DecodeError(_NO_RECURSION_LEFT) from None
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            # TypeError: a map key that is not hashable (a typed value as a key)
            raise DecodeError(f"invalid msgpack data: {_msgpack_problem(exc, len(raw))}") from exc
        except Exception as exc:  # anything else a class's own code raised on the way
            raise DecodeError(f"cannot read the value: {show(exc)}") from exc
        if inner.reason == _NO_RECURSION_LEFT:
            raise inner
        raise DecodeError(inner.reason, path=self._locate(raw), type_name=inner.type_name) from (
            inner.__cause__ or inner
        )

    def hook(self, code: int, data: bytes | memoryview) -> Any:
        """The ``ext_hook``: one ext value, through the checks in the module docs.

        A type seen before (or a safe built-in one) is built right here from its
        ``_fast`` entry: a state holds thousands of ext values, so the hot path
        is this one function. Anything else, and any input that does not fit,
        goes to :meth:`_slow` and the ``from_*`` paths, which check it and say
        what is wrong.
        """
        try:
            if code == EXT_CONSTRUCTOR_SINGLE_ARG and len(data) <= _MEMO_MAX_BYTES:
                hit = self._memo.get(data)
                if hit is not None:
                    return hit
            known = self._fast.get(code)
            if known is None:
                value_ext = _codecs.value_ext(code)  # ext 7: _framework_codecs
                if value_ext is not None:
                    # the class first: without its library nothing is decoded
                    wrap = value_ext[0]()
                    return wrap(self._unpack(data))
                return _other_ext(code, data)
            table, lengths = known
            env = self._unpack(data)
            if type(env) is not list or len(env) not in lengths:
                return self._slow(code, env)
            try:
                how, target, extra = table[env[0]][env[1]]
            except (KeyError, TypeError):  # not seen yet, or an unhashable module/name
                return self._slow(code, env)
            arg = env[2]
            # most frequent first: pydantic models (LangChain messages are ones)
            if how == _COUNTED:
                if type(arg) is dict:
                    try:
                        obj = target(arg)
                    except Exception:  # noqa: S110 - the slow path names the mismatch
                        pass
                    else:
                        # every stored key was a field (see _classinfo.counts_fields)
                        if len(obj.__pydantic_fields_set__) == len(arg):
                            return obj
                return self.from_fields((env[0], env[1]), arg)
            if how == _SAFE or (how == _METHOD and env[3] == extra):
                try:
                    return target(arg)
                except Exception as exc:
                    raise _rebuild_error(env[0], env[1], exc) from exc
            if how == _BUILD:
                return target(arg)
            if how == _VALIDATE:
                # validation would ignore a stored field the class no longer has
                if type(arg) is dict and arg.keys() == extra:
                    try:
                        return target(arg)
                    except Exception:  # noqa: S110 - the slow path names the mismatch
                        pass
                return self.from_fields((env[0], env[1]), arg)
            if how == _MEMBER:
                try:
                    member = target[arg]
                except (KeyError, TypeError):  # aliases, _missing_, or no longer a member
                    return self.from_value((env[0], env[1]), arg)
                if len(data) <= _MEMO_MAX_BYTES and len(self._memo) < _MEMO_MAX_ITEMS:
                    # a view of its own copy: the lookups are views (of the caller's bytes)
                    self._memo[memoryview(bytes(data))] = member
                return member
            return self._slow(code, env)
        except (DecodeError, RecursionError):
            raise
        except msgspec.DecodeError as exc:
            name = EXT_NAMES.get(code, "unknown")
            problem = _msgpack_problem(exc, len(data))
            raise DecodeError(f"malformed ext {code} ({name}) payload: {problem}") from exc
        except Exception as exc:
            name = EXT_NAMES.get(code, "unknown")
            raise DecodeError(f"malformed ext {code} ({name}) payload: {show(exc)}") from exc

    def _slow(self, code: int, env: Any) -> Any:
        """First sight of a type, or input the fast path did not accept."""
        lengths = _ENVELOPE_LEN[code]
        if (
            not isinstance(env, list | tuple)
            or len(env) not in lengths
            or not isinstance(env[0], str)
            or not isinstance(env[1], str)
        ):
            raise DecodeError(
                f"malformed ext {code} ({EXT_NAMES[code]}) payload: expected "
                f"[module, name, ...] of length {lengths[0]}, got {describe(env)}"
            )
        module, name, arg = env[0], env[1], env[2]
        if code == EXT_METHOD_SINGLE_ARG:
            raise DecodeError(
                f"refusing to call {module}.{name}.{env[3]!r}: tether calls no method named "
                "by stored data except datetime.fromisoformat",
                type_name=f"{module}.{name}",
            )
        key = (module, name)
        if code == EXT_CONSTRUCTOR_SINGLE_ARG:
            out = self.from_value(key, arg)
        elif code == EXT_CONSTRUCTOR_POS_ARGS:
            out = self.from_args(key, arg)
        else:
            out = self.from_fields(key, arg)
        info = self._classes.get(key)
        if info is not None:
            self._fast[code][0].setdefault(module, {})[name] = self._maker(code, key, info)
        return out

    def _maker(self, code: int, key: tuple[str, str], info: ClassInfo) -> _Fast:
        """The fast path for a class seen before: valid input goes straight to it."""
        cls = info.cls
        if code == EXT_CONSTRUCTOR_SINGLE_ARG:
            members = getattr(cls, "_value2member_map_", None)
            if info.kind is Kind.ENUM and isinstance(members, dict):
                return (_MEMBER, members, None)
            return (_BUILD, functools.partial(self.from_value, key), None)
        if code == EXT_CONSTRUCTOR_POS_ARGS:
            return (_BUILD, functools.partial(self.from_args, key), None)
        slow = functools.partial(self.from_fields, key)
        names = info.fields
        if info.kind in (Kind.PYDANTIC_V2, Kind.PYDANTIC_V1) and not info.drop:
            assert info.validate is not None
            if info.counted and not info.open_extra:
                return (_COUNTED, info.validate, None)
            return (_VALIDATE, info.validate, names)
        if info.kind in (Kind.DATACLASS, Kind.NAMEDTUPLE) and not (info.non_init or info.as_tuple):
            checks = tuple(info.checks.items())

            def record(fields: Any) -> Any:
                if type(fields) is dict and fields.keys() == names:
                    for field, allowed in checks:
                        if not isinstance(fields[field], allowed):
                            return slow(fields)
                    try:
                        return cls(**fields)
                    except RecursionError:
                        raise
                    except Exception:  # noqa: S110 - the slow path names the failure
                        pass
                return slow(fields)

            return (_BUILD, record, None)
        return (_BUILD, slow, None)

    # --- construction paths ------------------------------------------------------

    def from_value(self, key: tuple[str, str], value: Any) -> Any:
        """``cls(value)``: enums (and allowlisted one-argument classes)."""
        info = self._resolve(key)
        if info is None:
            return self._mismatch(key, value, ["the class no longer exists"])
        try:
            return info.cls(value)
        except RecursionError:
            raise
        except Exception as exc:  # the class's own code may raise anything (#18.10)
            if info.kind is Kind.ENUM and isinstance(exc, ValueError | TypeError):
                problem = f"stored value {show(value)} is not a member of {info.dotted}"
            else:
                problem = f"{info.dotted}({describe(value)}) failed: {failed(exc)}"
            return self._mismatch(key, value, [problem], exc)

    def from_args(self, key: tuple[str, str], args: Any) -> Any:
        """``cls(*args)``."""
        if not isinstance(args, list | tuple):
            raise DecodeError(
                f"malformed {key[0]}.{key[1]} payload: expected an argument array, "
                f"got {describe(args)}",
                type_name=".".join(key),
            )
        info = self._resolve(key)
        if info is None:
            return self._mismatch(key, list(args), ["the class no longer exists"])
        if info.kind is Kind.ENUM and len(args) == 1:
            return self.from_value(key, args[0])
        try:
            call = self._calls.get(key)  # a framework's own (LangGraph's Send)
            if call is not None:
                return call(info.cls, args)
            return info.cls(*args)
        except RecursionError:
            raise
        except Exception as exc:
            problem = f"{info.dotted}(*args) failed: {failed(exc)}"
            return self._mismatch(key, list(args), [problem], exc)

    def from_fields(self, key: tuple[str, str], fields: Any) -> Any:
        """Pydantic validation, dataclass / named tuple / plain ``cls(**fields)``."""
        dotted = ".".join(key)
        if not isinstance(fields, dict):
            raise DecodeError(
                f"malformed {dotted} payload: expected a map of field names, "
                f"got {describe(fields)}",
                type_name=dotted,
            )
        info = self._resolve(key)
        if info is None:
            return self._mismatch(key, fields, ["the class no longer exists"])
        if info.kind is Kind.OTHER or info.kind is Kind.ENUM:
            try:
                return info.cls(**fields)
            except RecursionError:
                raise
            except Exception as exc:
                problem = f"{dotted}(**fields) failed: {failed(exc)}"
                return self._mismatch(key, fields, [problem], exc)
        problems = self._fit(info, fields)
        if problems:
            return self._mismatch(key, fields, problems)
        if info.validate is not None:
            data = {k: v for k, v in fields.items() if k not in info.drop} if info.drop else fields
            try:
                return info.validate(data)
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                return self._mismatch(key, fields, [_validation_summary(exc)], exc)
            except RecursionError:
                raise
            except Exception as exc:  # the class's own validators, on data they no longer expect
                problem = f"validating {dotted} failed: {show(exc)}"
                return self._mismatch(key, fields, [problem], exc)
        if info.as_tuple:
            fields = {
                k: (tuple(v) if k in info.as_tuple and isinstance(v, list) else v)
                for k, v in fields.items()
            }
        try:
            if info.non_init:
                init = {k: v for k, v in fields.items() if k not in info.non_init}
                obj = info.cls(**init)
                for k in info.non_init & fields.keys():
                    object.__setattr__(obj, k, fields[k])  # frozen dataclasses too
                return obj
            return info.cls(**fields)
        except RecursionError:
            raise
        except Exception as exc:
            return self._mismatch(key, fields, [f"{dotted}(**fields) failed: {failed(exc)}"], exc)

    @staticmethod
    def _fit(info: ClassInfo, fields: dict[str, Any]) -> list[str]:
        """Why ``fields`` no longer fit ``info`` (empty when they do)."""
        keys = fields.keys()
        problems: list[str] = []
        if keys != info.fields:
            if not info.open_extra:
                problems += [
                    f"stored field {k!r} no longer exists on {info.dotted}"
                    for k in sorted(keys - info.fields)
                ]
            problems += [
                f"field {k!r} of {info.dotted} is required but was not stored"
                for k in sorted(info.required - keys)
            ]
        for name, allowed in info.checks.items():
            if name in fields and not isinstance(fields[name], allowed):
                declared = " | ".join(
                    t.__name__ for t in allowed if t is not list or tuple not in allowed
                )
                problems.append(
                    f"stored field {name!r} holds {describe(fields[name])} but "
                    f"{info.dotted}.{name} is now {declared}"
                )
        return problems

    # --- the gate ----------------------------------------------------------------

    def _resolve(self, key: tuple[str, str]) -> ClassInfo | None:
        """The class for ``key`` (:func:`_classinfo.resolve`), kept once resolved."""
        info = self._classes.get(key)
        if info is not None:
            return info
        info = _classinfo.resolve(key, self.policy, self.permissive)
        if info is not None:
            with self._lock:
                self._classes[key] = info
        return info

    def _mismatch(
        self,
        key: tuple[str, str],
        fields: Any,
        problems: list[str],
        cause: BaseException | None = None,
    ) -> Any:
        dotted = ".".join(key)
        upgrade = self.upgrades.get(key)
        if upgrade is not None:
            try:
                return upgrade(fields)
            except Exception as exc:
                raise DecodeError(
                    f"upgrade function for {dotted} failed: {show(exc)}", type_name=dotted
                ) from exc
        detail = "; ".join(problems)
        if self.on_mismatch == "raw":
            warnings.warn(
                f"stored {dotted} no longer fits its class ({detail}); returning the stored "
                "data instead",
                SchemaMismatchWarning,
                stacklevel=2,
            )
            return fields
        raise DecodeError(
            f"stored {dotted} no longer fits its class: {detail}; register an upgrade "
            f"(MsgpackSerializer(upgrades={{({key[0]!r}, {key[1]!r}): fn}})) or read the raw "
            "data with on_mismatch='raw'",
            type_name=dotted,
        ) from cause

    # --- where did it fail ------------------------------------------------------

    def _locate(self, raw: bytes) -> str:
        """Second, slow pass after a failure: the path of the innermost bad ext."""
        return _paths.failing_path(raw, self.hook, _inside)


def _other_ext(code: int, data: bytes | memoryview) -> Any:
    """Ext codes without a ``[module, name, ...]`` envelope (but ext 7, see Decoder.hook)."""
    if code == EXT_NUMPY_ARRAY:
        return read_array(data)
    raise DecodeError(f"unknown ext code {code}; tether knows ext codes 0-7")


def _rebuild_error(module: str, name: str, exc: Exception) -> DecodeError:
    """A safe builder failed on the stored argument."""
    if isinstance(exc, TypeError | ValueError | KeyError | OverflowError | ArithmeticError):
        return DecodeError(
            f"malformed {module}.{name} payload: {exc}", type_name=f"{module}.{name}"
        )
    # e.g. ZoneInfoNotFoundError, re.error
    dotted = f"{module}.{name}"
    return DecodeError(f"cannot rebuild {dotted}: {show(exc)}", type_name=dotted)


def _validation_summary(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            items = errors()
            parts = [
                f"field {'.'.join(str(p) for p in e.get('loc', ()))!r}: {e.get('msg')}"
                for e in items[:3]
            ]
            if parts:
                return "validation failed: " + "; ".join(parts)
        except Exception:  # noqa: S110 - fall back to the plain message
            pass
    return f"validation failed: {exc}"


def _inside(code: int, env: Any) -> list[tuple[str, Any]] | None:
    """The values the payload ``env`` of an ext ``code`` holds, for :func:`_paths.failing_path`."""
    value_ext = _codecs.value_ext(code)
    if value_ext is not None:  # no envelope: env is the value itself
        try:
            value_ext[0]()
        except DecodeError:
            return None  # as in hook: nothing inside is decoded without its library
        return [(value_ext[1], env)]
    if 0 <= code < len(_ENVELOPE_LEN) and isinstance(env, list | tuple) and len(env) >= 3:
        return [("", env[2])]
    return []

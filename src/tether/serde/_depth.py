"""How deeply a stored MessagePack value nests, counted before it is decoded (#18.1).

msgspec's decoder (and the ext hook it calls, which decodes each ext payload
with a fresh decoder call) recurses in C once per array or map, and once more
per typed (ext) value through the hook's Python frame. Its only guard is the
interpreter's recursion counter: after ``sys.setrecursionlimit(100000)`` a
~100-level nested-ext value, and on a thread with a 256 KiB stack
(``threading.stack_size``) 20 levels with the default limit, overflowed the C
stack and killed the process. So the depth is counted here, in a loop that
never recurses, over the bytes, before any C decoder sees them; a value deeper
than :data:`MAX_DEPTH` levels is refused whatever the recursion limit.

Levels: each array or map is one level, each typed value (ext codes 0-7, whose
payload the hook decodes) is :data:`EXT_LEVELS` levels plus what its payload
holds. The weights follow the C stack each costs (measured on CPython 3.11,
x86-64: ~290 bytes per array level in msgspec, ~1.5 KB per ext level with its
envelope array), so :data:`MAX_DEPTH` levels of any mix take at most ~150 KB
of stack; tests/serde/test_limits.py reads the deepest allowed values on a
thread with a 256 KiB stack.

A count that the bytes cannot exceed is taken first, in C (``bytes.translate``
keeps only the bytes that could open a level): a value with few such bytes is
not walked. Only a value that might be too deep is walked token by token, and
there only the typed values that might be too deep are walked inside.
"""

from __future__ import annotations

import platform
import sys
import threading
from typing import Any

import msgspec

from tether.serde._paths import key_path

#: levels a value may nest: arrays and maps count 1, typed (ext) values EXT_LEVELS
MAX_DEPTH = 512
#: what one typed (ext) value counts for, its payload's own levels apart
EXT_LEVELS = 4

# ext codes whose payload is decoded (0-5 envelopes, 6 NumPy, 7 delta snapshot)
# are those below 8; others are refused (or, -1, read by msgspec) without
# decoding anything inside
_EXT_CODES = 8
_DECODED_EXT = range(_EXT_CODES)

# the byte size of each token that opens no level and whose size its first byte
# tells (0 for all others): fixints, nil, booleans, floats, ints, fixstr
_FLAT = [0] * 256
for _b in (*range(0x00, 0x80), *range(0xE0, 0x100), 0xC0, 0xC2, 0xC3):
    _FLAT[_b] = 1
for _b in range(0xA0, 0xC0):
    _FLAT[_b] = 1 + (_b & 0x1F)
for _b, _n in {0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}.items():
    _FLAT[_b] = _FLAT[_b + 4] = _n  # 0xD0-0xD3: the signed ints, same sizes
_FLAT_SIZE = tuple(_FLAT)

# (width of the length field) for str 8/16/32 and bin 8/16/32
_SIZED = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}
# ext headers: (width of the length field, fixed payload size or 0)
_EXT = {0xC7: (1, 0), 0xC8: (2, 0), 0xC9: (4, 0)}
_EXT.update({0xD4: (0, 1), 0xD5: (0, 2), 0xD6: (0, 4), 0xD7: (0, 8), 0xD8: (0, 16)})
# array 16/32, map 16/32: (width of the count field, items per count)
_BIG = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}

_OPENS = bytes(range(0x80, 0xA0)) + bytes(_BIG)
_OPENS_EXT = bytes(_EXT)
_NOT_OPENING = bytes(b for b in range(256) if b not in _OPENS + _OPENS_EXT)
_NOT_EXT = bytes(b for b in range(256) if b not in _OPENS_EXT)


def _bound(data: bytes, start: int, end: int) -> int:
    """Levels ``data[start:end]`` cannot exceed: every byte that could open one, counted."""
    if 2 * (end - start) <= MAX_DEPTH:
        return 2 * (end - start)  # an ext header takes 2+ bytes, a level 1+
    part = data if start == 0 and end == len(data) else data[start:end]
    opening = part.translate(None, _NOT_OPENING)
    if len(opening) <= MAX_DEPTH // EXT_LEVELS:
        return EXT_LEVELS * len(opening)
    exts = len(opening.translate(None, _NOT_EXT))
    return len(opening) + (EXT_LEVELS - 1) * exts


# runs of same-size scalars (a list of numbers) are skipped in C: the bytes at
# every size-th position from a run's start are its markers (fixints are their
# own marker). marker byte -> (the markers of its kind, size of one)
_FIXINTS = bytes((*range(0x00, 0x80), *range(0xE0, 0x100)))
_RUNS: dict[int, tuple[bytes, int]] = {b: (_FIXINTS, 1) for b in _FIXINTS}
_RUNS.update({b: (bytes([b]), _FLAT_SIZE[b]) for b in range(0xCA, 0xD4)})
_RUN_FROM = 8  # items left in a level before a run is looked for
_SMALL = 4096  # a region (the value, an ext payload) this size is counted before walking
_PROBE = 32  # tokens walked in a larger region before its remaining bytes are counted
_WINDOW = 8192  # bytes counted at once from a typed value on


# When the interpreter's recursion guard alone stops a deep value before the C
# stack ends, the bytes need not be walked first: msgspec and json.loads enter
# the recursion counter at every level (a RecursionError is a DecodeError), and
# at CPython's default limit of 1,000 levels the deepest value takes ~1.5 MB of
# C stack (1.5 KB per ext level), well inside glibc's 8 MiB. The walk costs
# about as much as the decode itself on large plain values (a 1,000-message
# history: get_tuple 0.64 -> 2.7 ms), so it runs only where that guard may not
# hold: a raised recursion limit, threads made with a smaller stack
# (threading.stack_size), a small stack rlimit, or a libc whose threads default
# to small stacks (musl: 128 KiB).
_GUARD_LIMIT = 1000
_MIN_THREAD_STACK = 1 << 20
_MIN_MAIN_STACK = 4 << 20


def _stack_rlimit_ok() -> bool:
    try:
        import resource
    except ImportError:  # not POSIX: no rlimit to read, nothing known
        return False
    soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    return soft == resource.RLIM_INFINITY or soft >= _MIN_MAIN_STACK


_GLIBC_BIG_STACKS = (
    sys.platform == "linux" and platform.libc_ver()[0] == "glibc" and _stack_rlimit_ok()
)


def guard_suffices() -> bool:
    """Whether the recursion guard alone stops any value before the C stack ends (see above).

    ``False`` means the bytes are walked before decoding (:func:`too_deep`).
    """
    if not _GLIBC_BIG_STACKS or sys.getrecursionlimit() > _GUARD_LIMIT:
        return False
    size = threading.stack_size()
    return size == 0 or size >= _MIN_THREAD_STACK


def too_deep(data: bytes) -> bool:
    """Whether the value in ``data`` nests deeper than :data:`MAX_DEPTH` levels.

    A header cut off by the end of the bytes (IndexError) is damage that the
    decoder reports at the same place, no deeper.
    """
    try:
        return _walk(data)
    except IndexError:
        return False


def _walk(data: bytes) -> bool:
    """:func:`too_deep`, for bytes that may end anywhere.

    Each region (the value, each ext payload) is walked a few tokens first (an
    array's head and its buffer, a short payload), then the count of
    :func:`_bound` over what is left of it decides whether the rest needs
    walking. Damaged bytes are not judged here: the walk stops where they stop
    making sense, which is where the decoder stops too (it reads the same
    tokens in the same order), so nothing deeper than what was counted is
    reached.
    """
    end = len(data)
    if end <= _SMALL and _bound(data, 0, end) <= MAX_DEPTH:
        return False
    flat, runs = _FLAT_SIZE, _RUNS
    pos, left, depth = 0, 1, 0
    # tokens to walk before counting the rest of this region (-1: walk it all)
    probe = _PROBE if end > _SMALL else -1
    # nothing before `window` goes too deep (counted from a depth at most the
    # present one); no stretch is counted again before `tried`
    window = tried = 0
    # the enclosing levels: (items left, end, depth, where to go on when done or -1)
    stack: list[tuple[int, int, int, int]] = []
    while True:
        if not left:
            while not left:
                if not stack:
                    return False
                left, end, depth, resume = stack.pop()
                if resume >= 0:
                    pos = resume  # past the ext payload (trailing bytes are the decoder's)
                    probe = -1
                left -= 1
            continue
        if pos >= end:
            return False  # truncated: the decoder stops here too
        if not probe:
            probe = -1
            if depth + _bound(data, pos, end) <= MAX_DEPTH:
                # nothing left in this region goes too deep: on after it
                while stack and stack[-1][3] < 0:
                    stack.pop()
                if not stack:
                    return False
                left, end, depth, pos = stack.pop()
                left -= 1
                continue
        probe -= 1
        b = data[pos]
        size = flat[b]
        if size:
            if left >= _RUN_FROM and b in runs:
                markers, one = runs[b]
                most = min(left, (end - pos) // one)
                heads = data[pos : pos + most * one : one]
                run = most - len(heads.lstrip(markers))
                left -= run
                pos += run * one
                continue
            pos += size
            left -= 1
            continue
        if 0x80 <= b <= 0x9F:
            count = b & 0x0F if b >= 0x90 else 2 * (b & 0x0F)
            pos += 1
        elif b in _BIG:
            width, per = _BIG[b]
            count = per * int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width
        elif b in _SIZED:
            width = _SIZED[b]
            pos += 1 + width + int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
            left -= 1
            continue
        elif b in _EXT:
            width, size = _EXT[b]
            if b == 0xC7:
                size = data[pos + 1]
            elif width:
                size = int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
            start = pos + 2 + width
            stop = start + size
            left -= 1
            if stop <= window or stop > end or data[start - 1] >= _EXT_CODES:
                # inside a stretch already counted; damaged; or ext -1 or 8+,
                # which are refused or read by msgspec without decoding inside
                pos = stop
                continue
            inner = depth + EXT_LEVELS
            if inner > MAX_DEPTH:
                return True
            if size <= _SMALL and pos >= tried:
                # count the next _WINDOW bytes at once: sibling typed values (a
                # list of messages) are then passed without counting each one
                tried = min(end, pos + _WINDOW)
                if stop <= tried and depth + _bound(data, pos, tried) <= MAX_DEPTH:
                    window = tried
                    pos = stop
                    continue
            if size <= _SMALL and inner + _bound(data, start, stop) <= MAX_DEPTH:
                pos = stop
                continue
            stack.append((left + 1, end, depth, stop))
            pos, end, left, depth = start, stop, 1, inner
            probe = _PROBE if size > _SMALL else -1
            continue
        else:
            return False  # 0xc1, never used: the decoder refuses it here
        if depth + 1 > MAX_DEPTH:
            return True
        if not count:
            left -= 1
            continue
        stack.append((left, end, depth, -1))
        left, depth = count, depth + 1


def deep_path(data: bytes) -> str:
    """:func:`_deep_path`, shortened to fit in a message."""
    path = _deep_path(data)
    return path if len(path) <= 160 else f"{path[:100]}...{path[-50:]}"


def _deep_path(data: bytes) -> str:
    """The path (``$.a[3]``) where the value in ``data`` first goes past :data:`MAX_DEPTH`.

    The slow second pass after :func:`too_deep` said so: the same count with
    no shortcuts, keeping the key or index of every level. Paths follow the
    decoded value, as DecodeError paths do: the fields of a typed value are
    under the typed value's own path, a delta snapshot's value under ``.value``.
    """

    pos, end, depth = 0, len(data), 0
    frames = [_Frame(1, end, 0, -1, "$", _ROOT)]
    while True:
        frame = frames[-1]
        while not frame.left:
            frames.pop()
            if not frames:
                return "$"
            if frame.resume >= 0:
                pos = frame.resume
            frame = frames[-1]
            end, depth = frame.end, frame.depth
            frame.done()
        if pos >= end:
            return "$"
        if frame.kind == _MAP:
            path = frame.path + (key_path(frame.key) if frame.index % 2 else "[<key>]")
        elif frame.kind == _ARRAY:
            path = f"{frame.path}[{frame.index}]"
        else:  # the top, an ext payload, or the envelope in one
            path = frame.path
        b = data[pos]
        size = _FLAT_SIZE[b]
        if not size and b in _SIZED:
            width = _SIZED[b]
            size = 1 + width + int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        if size:
            if frame.kind == _MAP and frame.index % 2 == 0:
                try:
                    frame.key = msgspec.msgpack.decode(data[pos : pos + size])
                except Exception:
                    frame.key = "<key>"
            pos += size
            frame.done()
            continue
        frame.key = "<key>"
        if 0x80 <= b <= 0x9F or b in _BIG:
            if b in _BIG:
                width, per = _BIG[b]
                count = per * int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
                pos += 1 + width
            else:
                count = b & 0x0F if b >= 0x90 else 2 * (b & 0x0F)
                pos += 1
            if depth + 1 > MAX_DEPTH:
                return path
            is_map = b in (0xDE, 0xDF) or b < 0x90
            kind = _MAP if is_map else _ENVELOPE if frame.kind == _TYPED else _ARRAY
            depth += 1
            frames.append(_Frame(count, end, depth, -1, path, kind))
            continue
        if b not in _EXT:
            return "$"  # 0xc1: the decoder refuses it here
        width, fixed = _EXT[b]
        size = fixed or int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        start = pos + 2 + width
        code = int.from_bytes(data[start - 1 : start], "big", signed=True)
        pos = start + size
        if code not in _DECODED_EXT or pos > end:
            frame.done()
            continue
        if depth + EXT_LEVELS > MAX_DEPTH:
            return path
        depth += EXT_LEVELS
        kind = _ROOT if code == 7 else _TYPED  # 7: the payload is the value itself
        frames.append(_Frame(1, pos, depth, pos, path + ".value" if code == 7 else path, kind))
        pos, end = start, pos


_ROOT, _ARRAY, _MAP, _TYPED, _ENVELOPE = range(5)


class _Frame:
    """One open level in :func:`deep_path`."""

    __slots__ = ("depth", "end", "index", "key", "kind", "left", "path", "resume")

    def __init__(self, left: int, end: int, depth: int, resume: int, path: str, kind: int) -> None:
        self.left = left  # items still to read
        self.end = end  # where its bytes end (an ext payload's end)
        self.depth = depth  # the level of its items
        self.resume = resume  # where to go on when done: past an ext payload, or -1
        self.path = path
        self.kind = kind
        self.index = 0
        self.key: Any = None  # a map's last key

    def done(self) -> None:
        self.left -= 1
        self.index += 1

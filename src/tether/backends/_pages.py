"""What the tuples of one listing share: a growing list's elements, decoded once.

A page of ``list`` is a run of one thread's checkpoints, newest first. Append
tails are cumulative and a new snapshot starts with the old one's elements
(:mod:`tether.backends._delta`), so every value of a growing list on the page
is a prefix of the first one read: decoding each would cost O(n²) elements
over a history (36,000 message decodes to list a 1,000-checkpoint chat).
:func:`tether.backends._records.assemble` asks :func:`part` for each snapshot
and tail: elements whose MessagePack bytes equal the page's longest decoded
run up to an element boundary (values are self-delimiting, so equal bytes are
equal values) are taken from the run; anything else (a fork's own tail, an
edited list) is decoded. Each tuple still gets a list of its own; the elements
are shared between the tuples of one listing, never with storage or another
call. Copying them would cost what decoding costs.

I/O-free; every backend passes the same :data:`DecodeMemo` to ``assemble``
for the tuples of one page and :func:`page_memo` between pages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

from tether.backends._delta import array_header, split_array

__all__ = ["RUN", "DecodeMemo", "extend_run", "page_memo", "part"]

DecodeMemo: TypeAlias = dict[tuple[str, ...], Any]
"""What one page of tuples shares: decoded snapshots by value key (:class:`Part`),
and per ``(thread, namespace, channel, RUN)`` the longest list decoded (:class:`Run`)."""

RUN = "run"
_RAW_ITEMS = msgspec.msgpack.Decoder(list[msgspec.Raw])


@dataclass(frozen=True, slots=True)
class Run:
    """A decoded list: its elements' MessagePack bytes, where each ends, the elements."""

    body: bytes
    ends: list[int]
    items: list[Any]


@dataclass(frozen=True, slots=True)
class Part:
    """A snapshot or tail as a page reads it: its elements' bytes and the elements."""

    body: bytes
    items: Any  # a list, unless the store is damaged (join_append says so)


def part(
    memo: DecodeMemo,
    run_key: tuple[str, ...],
    data: bytes,
    before: Part | None,
    decode: Callable[[bytes], Any],
) -> Part:
    """The elements of an array ``data`` that follows ``before`` (a tail after its
    snapshot) or starts a value (``before`` None), from the page's run if it has them.

    Tails are cumulative and a new snapshot starts with the old one's elements,
    so on a page of one thread (newest first) every value of a growing list is
    a prefix of the first one read: decoding each would cost O(n²) elements
    over a history. Elements whose bytes equal the run's bytes at the same
    place, up to an element boundary (MessagePack values are self-delimiting),
    are the run's elements, shared as a cached snapshot's always were.
    """
    split = split_array(data)
    if split is None:
        return Part(b"", decode(data))
    count, start = split
    body = data[start:]
    run: Run | None = memo.get(run_key)
    if run is not None and count:
        first = 0 if before is None else len(before.items)
        offset = 0 if before is None else len(before.body)
        if (
            first + count <= len(run.items)
            and (first == 0 or run.ends[first - 1] == offset)
            and run.ends[first + count - 1] == offset + len(body)
            and run.body.startswith(body, offset)
        ):
            return Part(body, run.items[first : first + count])
    return Part(body, decode(data))


def page_memo(previous: DecodeMemo | None = None) -> DecodeMemo:
    """The memo for the next page of a listing: the runs of the previous page.

    A thread's history spans pages; carrying its runs over (not its decoded
    snapshots) lets the next page share their elements while the memo stays
    bounded by what one page read.
    """
    if not previous:
        return {}
    return {k: v for k, v in previous.items() if k[-1] == RUN}


def extend_run(memo: DecodeMemo, run_key: tuple[str, ...], snapshot: Part, tail: Part) -> None:
    """Make ``snapshot + tail`` the page's run if it is longer than the one it has."""
    if type(snapshot.items) is not list or type(tail.items) is not list:
        return
    run: Run | None = memo.get(run_key)
    size = len(snapshot.items) + len(tail.items)
    if run is not None and size <= len(run.items):
        return
    body = snapshot.body + tail.body
    ends, end = [], 0
    try:
        for raw in _RAW_ITEMS.decode(array_header(size) + body):
            end += len(raw)
            ends.append(end)
    except msgspec.DecodeError:
        return  # bytes some other serializer wrote: nothing is shared
    if len(ends) == size:  # the serializer decoded one element per array element
        memo[run_key] = Run(body, ends, snapshot.items + tail.items)

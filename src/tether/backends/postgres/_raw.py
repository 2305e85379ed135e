"""Statements sent with ``$n`` placeholders, converted once per text (#19 goal 7).

tether writes its SQL with psycopg's ``%(name)s`` and ``%s`` placeholders.
psycopg turns those into Postgres' ``$1, $2, ...`` on every ``execute``: a
regex scan of the whole text, cached (an LRU keyed by the text) only for
statements up to 4,096 bytes. A put that carries channels over is longer (its
blob rows, the carried-over resolution and the thread index in one
statement, about 5-6 KB), so each such put scanned its text again: measured
with callgrind on the W1 chat's saver calls (LangGraph's own, replayed), 2.2
million of the 7.3 million client instructions of an invoke, two thirds of
what tether's client did more than the official saver's.

:func:`positional` converts a text once (cached by the text) and orders the
parameters by it; the core sends the result through psycopg's raw-query
cursor, which passes the text and the parameters on as they are. The
parameters are adapted exactly as psycopg's named placeholders would adapt
them (the same dumpers, in the same AUTO format). I/O-free.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["positional"]

# psycopg's placeholders as tether writes them: %(name)s, %s, and %% for a percent.
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%|%")


@functools.lru_cache(maxsize=512)
def _convert(query: str) -> tuple[bytes, tuple[str, ...] | None, int]:
    """``query`` with ``$n`` placeholders; the parameter names in ``$n`` order
    (``None`` for positional ``%s``), and how many ``%s`` it has."""
    names: list[str] = []
    count = 0

    def replace(m: re.Match[str]) -> str:
        nonlocal count
        found = m.group(0)
        if found == "%%":
            return "%"
        name = m.group(1)
        if name is not None:
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"
        if found == "%":
            raise ValueError(f"a lone % in a statement: {query[:80]!r}...")
        count += 1
        return f"${count}"

    text = _PLACEHOLDER.sub(replace, query)
    if names and count:
        raise ValueError(f"a statement mixes %(name)s and %s: {query[:80]!r}...")
    return text.encode(), (tuple(names) if names else None), count


def positional(query: str, params: Mapping[str, Any] | Sequence[Any]) -> tuple[bytes, list[Any]]:
    """``query`` with ``$n`` placeholders and ``params`` in their order.

    Raises:
        KeyError: ``query`` names a parameter ``params`` lacks.
        ValueError: ``params`` does not fit the placeholders.
    """
    text, names, count = _convert(query)
    if isinstance(params, Mapping):
        if names is None and count:
            raise ValueError("a statement with %s placeholders takes a sequence of parameters")
        return text, [params[n] for n in names or ()]
    if names is not None or len(params) != count:
        raise ValueError(
            f"the statement has {len(names) if names else count} placeholders, "
            f"{len(params)} parameters were given"
        )
    return text, list(params)

"""Channels: where the graph's state lives between supersteps.

A channel holds one value (or nothing) and is updated once per superstep with
the list of everything the tasks of that step wrote to it. ``update`` returns
whether the value changed; the loop then gives the channel a new version, and
that new version is what triggers the nodes that listen to the channel.

=================== ==============================================================
:class:`LastValue`   one writer per step; the value is the last write (plain keys)
:class:`Reducer`     folds every write into the value with a binary operator
                     (``Annotated[list, operator.add]``, ``add_messages``)
:class:`Topic`       collects the writes of one step as a list (``Send`` packets)
:class:`Ephemeral`   holds a write for one step, then clears itself (edge triggers)
:class:`Barrier`     fills up with the names of the nodes it waits for; full, it
                     triggers the target once and empties (``add_edge([a, b], c)``)
=================== ==============================================================

``checkpoint()`` returns what is stored; ``restore(value)`` builds the channel
back from it. A channel with nothing in it is left out of ``channel_values``.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Sequence
from typing import Any

from tether.errors import ConfigError

__all__ = ["MISSING", "Barrier", "Channel", "Ephemeral", "LastValue", "Reducer", "Topic"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""The value of an empty channel."""


class Channel(abc.ABC):
    """Base class: one value or :data:`MISSING`."""

    __slots__ = ("key", "value")

    def __init__(self, key: str) -> None:
        self.key = key
        self.value: Any = MISSING

    def is_available(self) -> bool:
        return self.value is not MISSING

    def get(self) -> Any:
        return self.value

    def checkpoint(self) -> Any:
        return self.value

    def restore(self, value: Any) -> None:
        self.value = value

    @abc.abstractmethod
    def update(self, values: Sequence[Any]) -> bool:
        """Each subclass implements this."""

    def consume(self) -> bool:
        """The task this channel triggered has run; True if the channel changed."""
        return False

    def copy(self) -> Channel:
        return copy.copy(self)


class LastValue(Channel):
    """The last value written; two writes in one superstep are an error."""

    __slots__ = ()

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        if len(values) > 1:
            raise ConfigError(
                f"state key {self.key!r} received {len(values)} writes in one superstep; "
                "give it a reducer, e.g. Annotated[list, operator.add], to combine them"
            )
        self.value = values[-1]
        return True


class Reducer(Channel):
    """Folds writes into the value with ``reducer(current, write)``."""

    __slots__ = ("initial", "reducer")

    def __init__(
        self, key: str, reducer: Callable[[Any, Any], Any], initial: Callable[[], Any] | None
    ) -> None:
        super().__init__(key)
        self.reducer = reducer
        self.initial = initial
        if initial is not None:
            try:
                self.value = initial()
            except TypeError:
                self.value = MISSING

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        for v in values:
            self.value = v if self.value is MISSING else self.reducer(self.value, v)
        return True


class Topic(Channel):
    """The writes of the last superstep, as a list; cleared by the next step."""

    __slots__ = ()

    def update(self, values: Sequence[Any]) -> bool:
        had = self.value is not MISSING
        if values:
            self.value = list(values)
            return True
        self.value = MISSING
        return had


class Ephemeral(Channel):
    """Holds a write for one superstep; an edge's trigger to its target node."""

    __slots__ = ()

    def update(self, values: Sequence[Any]) -> bool:
        if values:
            self.value = values[-1]
            return True
        if self.value is MISSING:
            return False
        self.value = MISSING
        return True


class Barrier(Channel):
    """Available once every name in ``names`` was written; consumed by the task it triggers."""

    __slots__ = ("names",)

    def __init__(self, key: str, names: Sequence[str]) -> None:
        super().__init__(key)
        self.names = frozenset(names)

    def is_available(self) -> bool:
        return self.value is not MISSING and set(self.value) == self.names

    def checkpoint(self) -> Any:
        return sorted(self.value) if self.value is not MISSING else MISSING

    def restore(self, value: Any) -> None:
        self.value = set(value)

    def update(self, values: Sequence[Any]) -> bool:
        seen = set() if self.value is MISSING else set(self.value)
        new = seen | {v for v in values if v in self.names}
        if new == seen:
            return False
        self.value = new
        return True

    def consume(self) -> bool:
        if self.is_available():
            self.value = MISSING
            return True
        return False

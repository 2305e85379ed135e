"""Time-ordered checkpoint ids: UUID version 6 (SPEC S1.2).

The 60-bit timestamp (100 ns ticks since 1582-10-15) sits in the high bits, so
the canonical string of a later id sorts after an earlier one. Within one
process ids are *strictly* increasing: when two calls fall in the same tick,
or the wall clock steps backwards (NTP, VM resume), the generator issues the
last timestamp plus one tick instead. Unlike the reference implementation's
bare module global, the read-modify-write of that last timestamp is done under
a lock, so ids stay unique and ordered across threads.

``clock_seq`` may carry the step number of a checkpoint (14 bits, wrapped);
the empty checkpoint uses :data:`EMPTY_CLOCK_SEQ`. The clock_seq is *not*
part of the ordering guarantee: the timestamp alone is strictly increasing.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from uuid import UUID

__all__ = ["EMPTY_CLOCK_SEQ", "Uuid6Generator", "uuid6", "uuid6_timestamp"]

#: clock_seq of the empty checkpoint's id (LangGraph uses -2 too, i.e. 0x3FFE).
EMPTY_CLOCK_SEQ = -2

# 100 ns intervals between the Gregorian epoch (1582-10-15) and the Unix epoch.
_GREGORIAN_OFFSET = 0x01B21DD213814000
_TS_MASK = (1 << 60) - 1


class Uuid6Generator:
    """Issues strictly increasing UUIDv6 values; safe to share between threads.

    Args:
        clock: returns nanoseconds since the Unix epoch; injectable for tests
            (a clock that goes backwards still yields increasing ids).
        rng: source of the random node and default clock_seq bits.
    """

    def __init__(
        self,
        clock: Callable[[], int] = time.time_ns,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._rng = rng or random.SystemRandom()
        self._lock = threading.Lock()
        self._last = -1

    def _next_timestamp(self) -> int:
        ts = (self._clock() // 100 + _GREGORIAN_OFFSET) & _TS_MASK
        with self._lock:
            if ts <= self._last:
                ts = self._last + 1
            self._last = ts
        return ts

    def __call__(self, clock_seq: int | None = None, node: int | None = None) -> UUID:
        """A new id; ``clock_seq`` (e.g. the step) is stored in its 14 clock_seq bits."""
        ts = self._next_timestamp()
        if clock_seq is None:
            clock_seq = self._rng.getrandbits(14)
        if node is None:
            node = self._rng.getrandbits(48)
        uuid_int = ((ts >> 12) & 0xFFFFFFFFFFFF) << 80
        uuid_int |= (ts & 0x0FFF) << 64
        uuid_int |= (clock_seq & 0x3FFF) << 48
        uuid_int |= node & 0xFFFFFFFFFFFF
        # Set version (6) and RFC 4122 variant bits by hand: the stdlib's
        # UUID(version=...) only accepts 1-5 before Python 3.14.
        uuid_int = (uuid_int & ~(0xF << 76)) | (6 << 76)
        uuid_int = (uuid_int & ~(0x3 << 62)) | (0x2 << 62)
        return UUID(int=uuid_int)


_default = Uuid6Generator()


def uuid6(clock_seq: int | None = None, node: int | None = None) -> UUID:
    """A new time-ordered id from the process-wide generator."""
    return _default(clock_seq, node)


def uuid6_timestamp(value: UUID | str) -> int:
    """The 60-bit timestamp (100 ns ticks since 1582-10-15) inside a UUIDv6."""
    u = value if isinstance(value, UUID) else UUID(value)
    if u.version != 6:
        raise ValueError(f"{u} is not a version 6 UUID")
    n = u.int
    return (((n >> 80) & 0xFFFFFFFFFFFF) << 12) | ((n >> 64) & 0x0FFF)

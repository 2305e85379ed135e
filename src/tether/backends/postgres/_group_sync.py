# GENERATED FILE: do not edit. Source: src/tether/backends/postgres/_group_async.py
# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.
"""Group commit's leader and followers (#19, goal 8): see :mod:`tether.backends.postgres._group`.

``_group_async.py`` is written by hand; ``_group_sync.py`` is generated from it
by ``tools/gen_sync.py``, so the two cannot drift apart.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from tether.backends.postgres._group import MAX_BATCH, Write, interrupted, take

__all__ = ["GroupCommit"]


class GroupCommit:
    """Group commit for the sync core (see :mod:`tether.backends.postgres._group`)."""

    def __init__(self, writers: int, max_batch: int = MAX_BATCH) -> None:
        self._writers = writers
        self._max_batch = max_batch
        self._queue: deque[Write] = deque()
        self._leading = 0
        self._cond = threading.Condition()

    def run(
        self,
        write: Write,
        alone: Callable[[Write], Any],
        together: Callable[[Sequence[Write]], None],
    ) -> Any:
        """Run ``write`` (alone, or in a batch with others) and return its row.

        ``alone`` runs one write and returns its row or raises; ``together``
        runs a batch and settles every write of it.
        """
        with self._cond:
            # Idle (nothing queued, a turn free): run it alone at once, as the
            # loop below would, without the queue's bookkeeping (#19 goal 7).
            alone_now = not self._queue and self._leading < self._writers
            if alone_now:
                self._leading += 1
            else:
                self._queue.append(write)
        if alone_now:
            try:
                return alone(write)
            finally:
                with self._cond:
                    self._leading -= 1
                    self._cond.notify_all()
        while True:
            with self._cond:
                while not write.done and (write.taken or self._leading >= self._writers):
                    self._cond.wait()
                if write.done:
                    return write.outcome()
                self._leading += 1
                batch = take(self._queue, self._max_batch)
            try:
                if len(batch) == 1:
                    (only,) = batch
                    try:
                        only.settle(alone(only))
                    except BaseException as exc:  # its caller's, raised by outcome()
                        only.settle(error=exc)
                else:
                    together(batch)
            finally:
                for w in batch:
                    if not w.done:
                        w.settle(error=interrupted(w))
                with self._cond:
                    self._leading -= 1
                    self._cond.notify_all()
            # Not done: the queue was longer than a batch, and this leader's own
            # write is still in it; wait for it like a follower.

"""Group commit: concurrent writes of one saver share a transaction (#19, goal 8).

A server keeps many conversations going at once, and each put or put_writes
is one statement and one commit. When every connection the saver may use is
busy, the writes that arrive wait anyway; here they wait in a queue instead,
and the next writer to get a turn takes everything queued and runs it as one
transaction, in one round trip (psycopg pipeline mode): one commit and one
WAL flush for the lot. A caller returns only once the transaction holding its
write has committed, so durability is what it was. An idle saver runs each
write alone, as before: no timer, no added latency.

Leader and followers. A write joins the queue; if fewer than ``writers``
batches are running, its caller becomes a leader, takes the queue (up to
``max_batch``, oldest first) and runs it; otherwise it waits until a leader
has run its write, or until a turn frees up and it leads the next batch
itself. ``writers`` is the connections a saver's writes may hold at once
(its pool's size; 1 for a single connection, where concurrent writes used to
wait for its lock one by one).

Failures. If a statement of a batch fails, the whole transaction rolls back
and each of its writes runs again alone, so that its own error (a lease lost,
a snapshot deleted under a tail) reaches its caller and only it; the others
commit as if there had been no batch.

Deadlocks. A batch runs its writes ordered by thread id (a stable sort: one
thread's writes keep their order, as a tail must follow its snapshot), so two
batches lock the rows of their threads in the same order.

The async and sync groups are the same algorithm over ``asyncio.Condition``
and ``threading.Condition``; :func:`take` is their shared part.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.errors import StorageError

__all__ = ["AsyncGroupCommit", "GroupCommit", "Write", "interrupted", "ordered", "take"]

#: The most writes one transaction takes.
MAX_BATCH = 64


@dataclass(slots=True, eq=False)
class Write:
    """One put or put_writes statement waiting to run, and then its outcome."""

    what: str
    query: str
    params: Any
    thread_id: str
    fetch: bool  # a fenced statement returns the lease epoch it found
    attempts: int = 0  # connections it was tried on (a lost one is retried once)
    taken: bool = False  # a leader took it into its batch
    done: bool = False
    row: Any = None
    error: BaseException | None = field(default=None, repr=False)

    def settle(self, row: Any = None, error: BaseException | None = None) -> None:
        self.row, self.error, self.done = row, error, True

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.row


def interrupted(write: Write) -> StorageError:
    """The error of a write whose batch's leader stopped mid-way (cancelled)."""
    return StorageError(
        f"{write.what}: the caller running the transaction that held this write was "
        "interrupted before it finished, so whether it was stored is unknown; read the "
        "thread back (get_tuple) before writing it again"
    )


def take(queue: deque[Write], limit: int = MAX_BATCH) -> list[Write]:
    """The oldest ``limit`` writes of ``queue``, removed from it and marked taken."""
    batch = [queue.popleft() for _ in range(min(limit, len(queue)))]
    for w in batch:
        w.taken = True
    return batch


def ordered(batch: Sequence[Write]) -> list[Write]:
    """``batch`` in the order it runs: by thread id, each thread's writes in order."""
    return sorted(batch, key=lambda w: w.thread_id)


class AsyncGroupCommit:
    """Group commit for the async core (see the module doc)."""

    def __init__(self, writers: int, max_batch: int = MAX_BATCH) -> None:
        self._writers = writers
        self._max_batch = max_batch
        self._queue: deque[Write] = deque()
        self._leading = 0
        self._cond = asyncio.Condition()

    async def run(
        self,
        write: Write,
        alone: Callable[[Write], Awaitable[Any]],
        together: Callable[[Sequence[Write]], Awaitable[None]],
    ) -> Any:
        """Run ``write`` (alone, or in a batch with others) and return its row.

        ``alone`` runs one write and returns its row or raises; ``together``
        runs a batch and settles every write of it.
        """
        async with self._cond:
            self._queue.append(write)
        while True:
            async with self._cond:
                try:
                    while not write.done and (write.taken or self._leading >= self._writers):
                        await self._cond.wait()
                except asyncio.CancelledError:
                    # The caller gave up while its write waited: a write no
                    # leader took yet is not run at all.
                    if not write.taken:
                        self._queue.remove(write)
                    raise
                if write.done:
                    return write.outcome()
                self._leading += 1
                batch = take(self._queue, self._max_batch)
            try:
                if len(batch) == 1:
                    (only,) = batch
                    try:
                        only.settle(await alone(only))
                    except BaseException as exc:  # its caller's, raised by outcome()
                        only.settle(error=exc)
                else:
                    await together(batch)
            finally:
                for w in batch:
                    if not w.done:
                        w.settle(error=interrupted(w))
                async with self._cond:
                    self._leading -= 1
                    self._cond.notify_all()
            # Not done: the queue was longer than a batch, and this leader's own
            # write is still in it; wait for it like a follower.


class GroupCommit:
    """Group commit for the sync core: :class:`AsyncGroupCommit` over threads."""

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
        """Run ``write`` (alone, or in a batch with others) and return its row."""
        with self._cond:
            self._queue.append(write)
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

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

The group itself is :class:`~tether.backends.postgres._group_async.AsyncGroupCommit`,
written by hand, and its sync twin ``_group_sync.GroupCommit`` is generated
from it by ``tools/gen_sync.py`` (the same algorithm over ``asyncio.Condition``
and ``threading.Condition``); this module holds what both use.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.errors import StorageError

__all__ = ["MAX_BATCH", "Write", "interrupted", "ordered", "take"]

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

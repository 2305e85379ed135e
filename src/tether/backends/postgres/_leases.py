"""The leases a Postgres saver holds, and what a lost one says (I/O-free, both cores).

A lease (S5.4) is an advisory lock plus a fencing token: taking it bumps the
thread's ``epoch`` in ``tether_leases`` (while the lock is held), and every
``put``/``put_writes`` this saver makes on a leased thread is the *fenced*
statement, which writes only while the thread's epoch is still the lease's
(``_sql.Statements``). A holder whose lock the server dropped (restart,
failover, ``pg_terminate_backend``, ``idle_in_transaction_session_timeout``, a
network cut) may keep writing until another run takes the lease; from then
on its writes are refused with :class:`~tether.errors.LeaseLostError` and
store nothing, so two holders never both advance a thread.
"""

from __future__ import annotations

import threading

from tether.errors import LeaseLostError

__all__ = [
    "LeaseRegistry",
    "lost_lease",
    "lost_on_write",
    "lost_while_taking",
    "released_lease",
    "unconfirmed_lease",
]

_CAUSES = (
    "a server restart or failover, pg_terminate_backend, "
    "idle_in_transaction_session_timeout or a network cut"
)


class LeaseRegistry:
    """The threads one saver holds a lease on, and each one's epoch.

    One per saver, shared by its sync and async cores and its
    ``with_allowlist`` clones, so a lease taken with ``lease()`` fences
    ``aput`` too. ``epochs`` is read without the lock on every put (a dict
    lookup: the unleased path stays as it was); it is only written under it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claimed: set[str] = set()
        #: thread id -> the epoch of the lease held on it; puts are fenced by it.
        self.epochs: dict[str, int] = {}

    def claim(self, thread_id: str) -> bool:
        """Reserve ``thread_id`` for a lease being taken; ``False`` if this saver has one."""
        with self._lock:
            if thread_id in self._claimed:
                return False
            self._claimed.add(thread_id)
            return True

    def hold(self, thread_id: str, epoch: int) -> None:
        """The lease is taken at ``epoch``: fence this saver's writes to the thread from now on."""
        with self._lock:
            self.epochs[thread_id] = epoch

    def drop(self, thread_id: str) -> None:
        """The lease ended (or was never taken): writes to the thread are plain again."""
        with self._lock:
            self.epochs.pop(thread_id, None)
            self._claimed.discard(thread_id)


def lost_on_write(
    what: str, thread_id: str, epoch: int, current: int | None, *, retried: bool = False
) -> LeaseLostError:
    """The error of a fenced write that found the thread's epoch moved on: it stored nothing.

    ``retried``: the write ran twice, its first connection lost before the
    result came back, so the first attempt may have been stored (before the
    takeover, since the new holder's epoch refused the second).
    """
    if current is None:
        since = "the thread's lease row is gone (deleted by hand?)"
    else:
        since = f"another run has taken the lease since (epoch {current})"
    stored = (
        "this attempt wrote nothing (an earlier attempt, whose connection was lost before its "
        "result came back, may have been stored before the takeover)"
        if retried
        else "nothing was written"
    )
    return LeaseLostError(
        f"{what}: refused, {stored}: this saver's lease of thread {thread_id!r} "
        f"(epoch {epoch}) was lost and {since}; its lock ended early ({_CAUSES}). "
        "Stop this run: take the lease again and resume from the thread's latest checkpoint",
        thread_id=thread_id,
        epoch=epoch,
        current_epoch=current,
    )


def lost_lease(thread_id: str, epoch: int, current: int | None) -> LeaseLostError:
    """A lease found lost (by ``check()`` or at the end of its block)."""
    if current is None:
        how = "whether another run has taken it since is unknown"
        after = "a write this saver made after a takeover would have been refused"
    elif current == epoch:
        how = "no other run has taken it yet"
        after = "every write this saver made under it stands"
    else:
        how = f"another run has taken it over since (epoch {current})"
        after = "writes this saver made after the takeover were refused and stored nothing"
    return LeaseLostError(
        f"the lease of thread {thread_id!r} (epoch {epoch}) was lost before its block ended: "
        f"the server released its lock ({_CAUSES}) and {how}; {after}. Stop this run: take "
        "the lease again and resume from the thread's latest checkpoint before writing more",
        thread_id=thread_id,
        epoch=epoch,
        current_epoch=current,
    )


def released_lease(thread_id: str, epoch: int) -> LeaseLostError:
    """``check()`` on a lease whose block has ended."""
    return LeaseLostError(
        f"the lease of thread {thread_id!r} (epoch {epoch}) was released when its block "
        "ended; take the lease again to write under it",
        thread_id=thread_id,
        epoch=epoch,
    )


def unconfirmed_lease(thread_id: str, epoch: int, detail: str) -> LeaseLostError:
    """The end of a lease block whose lease could not be confirmed (Postgres unreachable)."""
    return LeaseLostError(
        f"the lease of thread {thread_id!r} (epoch {epoch}) could not be confirmed at the end "
        f"of its block ({detail}); treat it as lost: take the lease again and resume from the "
        "thread's latest checkpoint before writing more",
        thread_id=thread_id,
        epoch=epoch,
    )


def lost_while_taking(thread_id: str) -> LeaseLostError:
    """The lock of a lease being taken ended before its epoch could be raised."""
    return LeaseLostError(
        f"the lease of thread {thread_id!r} was lost while it was being taken: its lock ended "
        f"before the epoch was raised ({_CAUSES}); nothing was taken, retry",
        thread_id=thread_id,
    )

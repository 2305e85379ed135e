"""Thread lifecycle (#15): a retention policy, and what a sweep that applies it did.

A :class:`Retention` set on a saver (``retention=``, every backend and the
LangGraph drop-ins) says how long threads and checkpoints live; a thread may
carry its own (``saver.set_retention(thread_id, policy)``, stored in its row
of the thread index). ``saver.sweep()`` / ``await saver.asweep()`` applies
them and returns a :class:`SweepReport`:

>>> from datetime import timedelta
>>> from tether import InMemorySaver
>>> saver = InMemorySaver(retention=Retention(ttl=timedelta(days=7), keep_last=20))
>>> saver.sweep(dry_run=True).threads
0

What a sweep never deletes:

* a thread active within ``grace`` (default five minutes): a put or a
  pending write in that window (a run in progress, the writes of a task that
  just finished) keeps the whole thread out of this sweep;
* a thread under a lease (Postgres ``saver.lease``): the sweep takes the
  lease's advisory lock in the transaction that deletes, and skips the
  thread when someone holds it;
* what a kept checkpoint needs: checkpoint retention keeps the newest
  checkpoints of each namespace (``prune``'s ``keep_last``), so a kept
  checkpoint's parents up to the oldest kept one, the pending writes of
  every kept checkpoint, the snapshots their append tails extend and the
  ancestors a LangGraph ``DeltaChannel`` is rebuilt from
  (:mod:`tether._delta_chains`) all stay.

The rules are here, without I/O; the sweep itself is
``tether/_sweep_async.py`` (its sync twin generated), over a few private
primitives each backend implements in one transaction each.
"""

from __future__ import annotations

import datetime
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tether.errors import ConfigError, StorageError
from tether.ids import uuid6_timestamp

__all__ = ["DEFAULT_GRACE", "Retention", "SweepReport"]

#: A thread written within this window is never swept (see the module docstring).
DEFAULT_GRACE = datetime.timedelta(minutes=5)

_Duration = datetime.timedelta | int | float


def _duration(value: Any, name: str, *, zero: bool = False) -> datetime.timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, datetime.timedelta | int | float):
        raise ConfigError(
            f"Retention.{name} must be a datetime.timedelta or a number of seconds, "
            f"got {type(value).__name__} {value!r:.80}"
        )
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ConfigError(f"Retention.{name} must be finite, got {value!r}")
        value = datetime.timedelta(seconds=value)
    assert isinstance(value, datetime.timedelta)
    if value < datetime.timedelta(0) or (not zero and value == datetime.timedelta(0)):
        bound = "0 or more" if zero else "more than 0"
        raise ConfigError(f"Retention.{name} must be {bound}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Retention:
    """How long a saver keeps threads and checkpoints (applied by ``sweep``).

    Every rule is optional; a policy with none keeps everything.

    Attributes:
        ttl: delete a whole thread whose last activity (a put or pending write,
            the index's ``updated_at``) is older than this.
        keep_last: in every live thread, keep the newest N checkpoints of each
            namespace and delete older ones.
        keep_within: keep the checkpoints younger than this (by the time in
            their UUIDv6 id). With ``keep_last`` too, a checkpoint stays when
            either rule keeps it; the newest checkpoint of a namespace always
            stays.
        refresh_on_read: reading a thread (``get_tuple``) counts as activity
            for ``ttl``, as LangGraph Platform's TTL does. Saver-wide only
            (a thread's own policy does not change how reads behave); at most
            one refresh per thread a minute from one saver, so a busy reader
            adds a write a minute, not one per read.
        grace: never sweep a thread active more recently than this (its run
            may be in progress, its latest checkpoint may just have got
            pending writes). Five minutes by default.

    Durations are :class:`~datetime.timedelta` or seconds. A thread's own
    policy (``saver.set_retention``) replaces the saver's for that thread: a
    rule it leaves ``None`` is not applied (``Retention()`` keeps the thread
    forever), it is not inherited.

    Raises:
        ConfigError: a rule of the wrong type or not positive.
    """

    ttl: datetime.timedelta | None = None
    keep_last: int | None = None
    keep_within: datetime.timedelta | None = None
    refresh_on_read: bool = False
    grace: datetime.timedelta = DEFAULT_GRACE

    def __init__(
        self,
        ttl: _Duration | None = None,
        keep_last: int | None = None,
        keep_within: _Duration | None = None,
        refresh_on_read: bool = False,
        grace: _Duration = DEFAULT_GRACE,
    ) -> None:
        if keep_last is not None and (
            isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
        ):
            raise ConfigError(
                f"Retention.keep_last must be a positive int (the newest checkpoints kept "
                f"per namespace) or None, got {keep_last!r:.80}"
            )
        if not isinstance(refresh_on_read, bool):
            raise ConfigError(f"Retention.refresh_on_read must be a bool, got {refresh_on_read!r}")
        set_ = object.__setattr__
        set_(self, "ttl", _duration(ttl, "ttl"))
        set_(self, "keep_last", keep_last)
        set_(self, "keep_within", _duration(keep_within, "keep_within"))
        set_(self, "refresh_on_read", refresh_on_read)
        found = _duration(grace, "grace", zero=True)
        assert found is not None
        set_(self, "grace", found)

    @property
    def prunes(self) -> bool:
        """Whether the policy deletes checkpoints of live threads."""
        return self.keep_last is not None or self.keep_within is not None

    def to_json(self) -> str:
        """The policy as stored with a thread (JSON, durations in seconds)."""
        out: dict[str, Any] = {"grace": self.grace.total_seconds()}
        if self.ttl is not None:
            out["ttl"] = self.ttl.total_seconds()
        if self.keep_last is not None:
            out["keep_last"] = self.keep_last
        if self.keep_within is not None:
            out["keep_within"] = self.keep_within.total_seconds()
        if self.refresh_on_read:
            out["refresh_on_read"] = True
        return msgspec.json.encode(out).decode()

    @classmethod
    def from_json(cls, text: str | bytes | Mapping[str, Any]) -> Retention:
        """A policy :meth:`to_json` wrote (Postgres hands JSONB over decoded)."""
        found = text if isinstance(text, Mapping) else msgspec.json.decode(text)
        if not isinstance(found, Mapping):
            raise ConfigError(f"a stored retention policy must be a JSON object, got {text!r:.80}")
        known = {"ttl", "keep_last", "keep_within", "refresh_on_read", "grace"}
        return cls(**{k: v for k, v in found.items() if k in known})


def stored_policy(thread_id: str, stored: Any) -> Retention:
    """A thread's policy as its index row holds it; damage is a :class:`StorageError`."""
    try:
        return Retention.from_json(stored)
    except (ConfigError, TypeError, msgspec.DecodeError) as exc:
        raise StorageError(
            f"the retention policy stored for thread {thread_id!r} does not read "
            f"({stored!r:.80}): {exc}; store it again with saver.set_retention({thread_id!r}, "
            "policy), or None to follow the saver's"
        ) from exc


def check_retention(value: Any, name: str = "retention") -> Retention | None:
    """``value`` if it is a :class:`Retention` or ``None``; else a :class:`ConfigError`."""
    if value is None or isinstance(value, Retention):
        return value
    raise ConfigError(
        f"{name} must be a tether.lifecycle.Retention (or None), got "
        f"{type(value).__name__} {value!r:.80}"
    )


@dataclass(slots=True)
class SweepReport:
    """What one ``sweep`` deleted, or would delete with ``dry_run=True``.

    Attributes:
        threads: whole threads deleted by a TTL.
        checkpoints: checkpoints deleted, those of deleted threads included.
        bytes: what the deleted rows held, as the thread index counts it
            (:attr:`tether.threads.ThreadSummary.bytes`).
        pruned_threads: live threads whose older checkpoints were deleted.
        skipped: threads due that were left alone: leased, or written since
            the sweep found them.
        dry_run: nothing was deleted; the counts are what would have been.
        finished: ``False`` when ``max_seconds`` stopped the sweep early (run
            it again to go on).
        batches: transactions the sweep committed.
        seconds: how long it took.
        freed_bytes: SQLite: how much the file shrank (free pages given back).
        thread_ids: the threads deleted (or that would be), at most the
            first 1,000.
    """

    threads: int = 0
    checkpoints: int = 0
    bytes: int = 0
    pruned_threads: int = 0
    skipped: int = 0
    dry_run: bool = False
    finished: bool = True
    batches: int = 0
    seconds: float = 0.0
    freed_bytes: int = 0
    thread_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON-safe values (``tether sweep --json``)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


# --- the rules, I/O-free ------------------------------------------------------------------

#: Most thread ids a report lists.
MAX_REPORTED = 1_000

_UUID_EPOCH = datetime.datetime(1582, 10, 15, tzinfo=datetime.UTC)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
# 100 ns ticks between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_TO_UNIX = (_EPOCH - _UUID_EPOCH) // datetime.timedelta(microseconds=1) * 10


def checkpoint_micros(checkpoint_id: str) -> int | None:
    """Epoch microseconds of a UUIDv6 checkpoint id (``None``: not one)."""
    try:
        ticks = uuid6_timestamp(checkpoint_id)
    except ValueError:
        return None
    return (ticks - _UUID_TO_UNIX) // 10


def micros(delta: datetime.timedelta) -> int:
    """A duration in whole microseconds."""
    return delta // datetime.timedelta(microseconds=1)


def ttl_cutoff(policy: Retention, now: int) -> int | None:
    """Threads last active before this (epoch microseconds) are expired; ``None``: no TTL.

    A TTL shorter than the grace window is stretched to it.
    """
    if policy.ttl is None:
        return None
    return now - micros(max(policy.ttl, policy.grace))


def keep_count(policy: Retention, namespaces: Mapping[str, Sequence[str]], now: int) -> int:
    """How many newest checkpoints of each namespace ``policy`` keeps (``prune``'s N).

    ``namespaces``: each namespace's checkpoint ids. ``keep_within`` counts,
    per namespace, the checkpoints whose id is younger than the window (an
    id that is not a UUIDv6 counts as young: its age is unknown); the
    largest count serves every namespace, as ``prune(keep=N)`` takes one N.
    """
    n = policy.keep_last or 1
    if policy.keep_within is not None:
        since = now - micros(policy.keep_within)
        for ids in namespaces.values():
            young = 0
            for cid in ids:
                at = checkpoint_micros(cid)
                if at is None or at >= since:
                    young += 1
            n = max(n, young)
    return max(n, 1)


def may_prune(policy: Retention, checkpoints: int, created: int, now: int) -> bool:
    """Whether a thread's index row says ``policy`` could delete any of its checkpoints.

    Cheap filters before the thread is read: no more checkpoints than
    ``keep_last``, or a thread younger than ``keep_within``, has nothing to prune.
    """
    if not policy.prunes or checkpoints <= 1:
        return False
    if policy.keep_within is not None and created >= now - micros(policy.keep_within):
        return False
    return policy.keep_within is not None or checkpoints > (policy.keep_last or 1)


#: The most checkpoints one TTL batch deletes in its transaction when the backend
#: does not pace its sweep (a thread larger than this goes alone): a batch is
#: bounded by rows, not only threads (one batch of 100 threads x 20 checkpoints
#: made a SQLite writer wait up to ~40 ms).
MAX_BATCH_CHECKPOINTS = 200

#: The most checkpoints a paced TTL batch may grow to.
MAX_PACED_CHECKPOINTS = 5_000


class Pace:
    """How many checkpoints the next TTL transaction deletes.

    ``target``: the seconds a transaction should hold the store's write lock
    (a backend's ``_sweep_target``; SQLite, whose writers queue behind it), or
    ``None`` for fixed batches of :data:`MAX_BATCH_CHECKPOINTS`. Paced, the
    limit moves halfway towards what the last transaction's rate says would
    take ``target`` (between 1 and :data:`MAX_PACED_CHECKPOINTS`). A thread is
    never split: one larger than the limit makes a batch alone, and ``batch``
    (threads) bounds a transaction as well.
    """

    def __init__(self, target: float | None, batch: int) -> None:
        self.target = target
        self.batch = batch
        self.limit = MAX_BATCH_CHECKPOINTS

    def take(
        self, rows: Sequence[tuple[str, int, int]], start: int
    ) -> tuple[list[tuple[str, int]], int, int]:
        """The next batch of ``(thread_id, cutoff, checkpoints)`` rows from ``start``:
        ``(batch of (thread_id, cutoff), its checkpoints, where the next begins)``."""
        part: list[tuple[str, int]] = []
        size = 0
        i = start
        while i < len(rows) and len(part) < self.batch:
            tid, cutoff, n = rows[i]
            if part and size + n > self.limit:
                break
            part.append((tid, cutoff))
            size += n
            i += 1
        return part, size, i

    def done(self, checkpoints: int, seconds: float) -> None:
        """A transaction deleted ``checkpoints`` in ``seconds`` (lock wait included)."""
        if self.target is None or checkpoints <= 0 or seconds <= 0:
            return
        want = checkpoints * self.target / seconds
        self.limit = max(1, min(MAX_PACED_CHECKPOINTS, round((self.limit + want) / 2)))


def check_sweep_args(batch: Any, max_seconds: Any) -> tuple[int, float | None]:
    """Validated ``sweep(batch=, max_seconds=)``; a :class:`ConfigError` names the bad one."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10_000:
        raise ConfigError(
            f"batch must be an int from 1 to 10000 (threads per transaction), got {batch!r:.80}"
        )
    if max_seconds is not None and (
        isinstance(max_seconds, bool)
        or not isinstance(max_seconds, int | float)
        or not math.isfinite(max_seconds)
        or max_seconds <= 0
    ):
        raise ConfigError(f"max_seconds must be a positive number or None, got {max_seconds!r:.80}")
    return batch, None if max_seconds is None else float(max_seconds)


def check_now(now: Any) -> int | None:
    """``sweep(now=...)`` as epoch microseconds (``None``: the clock)."""
    if now is None:
        return None
    if not isinstance(now, datetime.datetime) or now.utcoffset() is None:
        raise ConfigError(f"now must be a timezone-aware datetime, got {now!r:.80}")
    return (now - _EPOCH) // datetime.timedelta(microseconds=1)


def no_thread(thread_id: str) -> ConfigError:
    """What ``set_retention`` says of a thread the index does not hold."""
    return ConfigError(
        f"set_retention: thread {thread_id!r} has no checkpoint; a thread's policy is kept "
        "in its row of the thread index, which its first put creates: set it after that"
    )


class ReadRefresher:
    """Which reads count as activity under ``refresh_on_read``: one a thread a minute.

    A read that refreshes writes the thread's index row; doing it once a
    minute per thread keeps a busy reader at one write a minute, where the
    TTL it feeds is days. I/O-free; each saver keeps one.
    """

    #: Microseconds between two refreshes of one thread by one saver.
    INTERVAL = 60_000_000
    #: Threads remembered before the memory starts over (a refresh too many is harmless).
    MAX_THREADS = 100_000

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    def due(self, thread_id: str, now: int) -> bool:
        """Whether a read of ``thread_id`` at ``now`` refreshes it (and note that it did)."""
        with self._lock:
            last = self._last.get(thread_id)
            if last is not None and now - last < self.INTERVAL:
                return False
            if len(self._last) >= self.MAX_THREADS:
                self._last.clear()
            self._last[thread_id] = now
            return True

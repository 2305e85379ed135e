"""The thread index (#15), I/O-free: what a put adds to it, and how ``threads()`` is asked.

Every backend keeps one row per thread, written in the same transaction as
each ``put`` and ``put_writes``: created and updated time, checkpoint and
namespace counts, approximate bytes, the latest root checkpoint (id, step,
``ts``, user metadata), whether the nodes after it would run (``runnable``)
and the thread's status. The rules live here and in :mod:`tether._status`
once; a backend only moves the results into its storage (the in-memory
saver into a dict, SQLite into ``tether_threads`` rows, Postgres into a CTE
of the put statement).

How the status is kept:

* ``put`` of the newest root checkpoint computes ``runnable``
  (:func:`plan_index`): :func:`~tether._status.next_nodes` over the trigger
  channels whose value the put itself names, or the caller passed
  (LangGraph passes its whole state). A carried-over trigger channel that
  would be news to its node and whose value the caller did not pass
  (tether's runtime passes only what changed) is a *candidate*: the backend
  asks its storage, in the put's transaction, whether a value is stored for
  it (not the empty marker a cleared channel leaves), and a stored one
  counts as available. So a carried-over, half-full barrier with nothing
  else to run reads ``pending`` where a decoded read says ``idle``: that
  takes a ``__copy__`` fork of such a checkpoint.
* the status is then :func:`~tether._status.state_of` the checkpoint's
  pending writes (their task ids and channels, no value decoded) and
  ``runnable``, evaluated by the backend over its write rows (in SQL on
  SQLite and Postgres), at the put (writes may come before their
  checkpoint) and at every ``put_writes`` of that checkpoint.
* operations that can remove the latest root checkpoint (``delete_for_runs``,
  a migration filling the index) read the new latest one back and decode
  it (:func:`runnable_of`); one whose values cannot be decoded gets status
  ``None``.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

import msgspec

from tether._status import CONTROL_WRITES, is_trigger, newer, next_nodes, trigger_target
from tether.backends._records import PutPlan
from tether.checkpoint import ERROR, TASKS, ChannelVersions, Checkpoint, CheckpointTuple, check_text
from tether.contract import EMPTY_TAG, check_filter, check_limit
from tether.errors import ConfigError
from tether.threads import ThreadOrder, ThreadStatus, ThreadSummary

__all__ = [
    "BUCKET_BITS",
    "DEFAULT_LIMIT",
    "EMPTY_TAG",
    "RUNTIME_METADATA",
    "IndexPut",
    "ThreadQuery",
    "check_threads_args",
    "encode_cursor",
    "from_micros",
    "now_micros",
    "plain_step_and_user",
    "plan_index",
    "runnable_of",
    "summary",
    "to_micros",
    "user_metadata",
    "write_bytes",
    "write_hint",
]

#: ``threads()`` without ``limit`` returns pages of this many rows.
DEFAULT_LIMIT = 50
#: The largest page ``threads()`` returns.
MAX_LIMIT = 10_000
#: The index's rows are found in update order through ``bucket = updated_at >>
#: BUCKET_BITS`` (epoch microseconds in ~1.05 s buckets), not ``updated_at``
#: itself: a put or put_writes in the bucket of the thread's previous one, with
#: the status unchanged, changes no indexed column, so SQLite rewrites no index
#: entry (only the row's page goes to the WAL) and Postgres updates the row
#: HOT. ``bucket`` is monotone in ``updated_at``, so ordering by ``(bucket,
#: updated_at, thread_id)`` is ordering by ``(updated_at, thread_id)``; a
#: listing reads the index by bucket and sorts inside the newest buckets only.
BUCKET_BITS = 20
#: Metadata keys the runtime writes at every step; the index's metadata is the rest.
#: Metadata keys the index does not keep as user metadata: the runtime's own,
#: and the sealed copy of an encrypting saver's metadata (tether.encryption).
RUNTIME_METADATA = frozenset({"source", "step", "parents", "__tether_sealed__"})

_STATUSES: tuple[str, ...] = get_args(ThreadStatus)
# Every trigger channel starts so (is_trigger decides).
_TRIGGER_PREFIXES = ("__", "branch:to:", "join:")
_ORDERS: tuple[str, ...] = get_args(ThreadOrder)


# --- what a put adds ------------------------------------------------------------------------


class IndexPut:
    """What one ``put`` tells the thread index (see :func:`plan_index`).

    A plain slotted class, not a frozen dataclass: a put builds one, and a
    frozen dataclass's ``__init__`` costs a put about a microsecond.
    """

    __slots__ = ("bytes", "candidates", "root", "runnable", "ts")

    def __init__(
        self, root: bool, ts: str | None, runnable: bool, candidates: dict[str, str], size: int
    ) -> None:
        self.root = root  # the put is in the root namespace: it may be the thread's latest
        self.ts = ts
        self.runnable = runnable  # next_nodes names a node, from what the put itself tells
        # Carried-over trigger channels (channel -> version as text) whose stored
        # value decides `runnable` when it is False: a stored value makes it True.
        self.candidates = candidates
        self.bytes = size  # of the rows the put writes


_NO_CANDIDATES: dict[str, str] = {}


def user_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's metadata without the runtime's own keys."""
    return {k: v for k, v in metadata.items() if k not in RUNTIME_METADATA}


def plain_step_and_user(metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The index's step and user metadata (JSON) of metadata that needs no serializing.

    An int or absent step, and metadata with no user key (the runtime's
    ``source``/``step``/``parents`` only), are answered here; anything else is
    ``None``, and the backend takes it out of the metadata it stores (in SQL),
    so a put never serializes its metadata twice.
    """
    step = metadata.get("step")
    if step is None:
        step_json: str | None = "null"
    elif type(step) is int:
        step_json = str(step)
    else:
        step_json = None
    return step_json, "{}" if metadata.keys() <= RUNTIME_METADATA else None


def plan_index(plan: PutPlan, checkpoint: Checkpoint, new_versions: ChannelVersions) -> IndexPut:
    """What ``put(plan)`` tells the index: see the module docstring for ``runnable``.

    The step and user metadata are not here: each backend takes them out of the
    metadata it stores anyway (in SQL on SQLite and Postgres, or
    :func:`plain_step_and_user` when that takes no serializing), so a put does
    not serialize its metadata twice.
    """
    size = len(plan.head[1])
    for v in plan.values:
        size += len(v.payload)
    found: Any = checkpoint.get("ts")  # typed str; a caller's dict may hold anything
    ts = found if isinstance(found, str) else None
    if plan.address.checkpoint_ns != "":
        return IndexPut(False, ts, False, _NO_CANDIDATES, size)
    runnable, candidates = _runnable(plan, checkpoint, new_versions)
    return IndexPut(True, ts, runnable, _NO_CANDIDATES if runnable else candidates, size)


def _runnable(
    plan: PutPlan, checkpoint: Checkpoint, new_versions: ChannelVersions
) -> tuple[bool, dict[str, str]]:
    versions: Mapping[str, Any] = checkpoint.get("channel_versions") or {}
    triggers = [c for c in versions if c.startswith(_TRIGGER_PREFIXES)]
    if not triggers:  # a graph of plain channels (no runtime): nothing is ever next
        return False, _NO_CANDIDATES
    given: Mapping[str, Any] = checkpoint.get("channel_values") or {}
    seen: Mapping[str, Mapping[str, Any]] = checkpoint.get("versions_seen") or {}
    known: dict[str, Any] = {}
    candidates: dict[str, str] = {}
    for channel in triggers:
        version = versions[channel]
        if not is_trigger(channel):
            continue
        if channel in new_versions or channel in given:
            if channel in given:
                known[channel] = given[channel]
            continue
        # Carried over and not passed: only storage knows. Worth asking only if
        # it could name a node (Send packets always do).
        node = trigger_target(channel)
        if node is None or newer(version, (seen.get(node) or {}).get(channel)):
            candidates[channel] = plan.versions[channel]
    view = {"channel_values": known, "channel_versions": versions, "versions_seen": seen}
    if TASKS in known and not known[TASKS]:
        view["channel_values"] = {k: v for k, v in known.items() if k != TASKS}
    return bool(next_nodes(view)), candidates


def write_bytes(payloads: Any) -> int:
    """The bytes a ``put_writes`` batch adds: its encoded values."""
    return sum(len(p or b"") for p in payloads)


def write_hint(channels: Iterable[str]) -> tuple[bool, bool]:
    """What a ``put_writes`` batch can do to its checkpoint's status, from its channels:
    whether one is an ``__error__`` (the status becomes ``error``), and whether
    none is a control write (then an ``error``, ``pending`` or ``idle`` status
    stays: such writes add no error and no interrupted task). Postgres reads
    the checkpoint's write rows again only when neither settles it."""
    names = set(channels)
    return ERROR in names, names.isdisjoint(CONTROL_WRITES)


def runnable_of(tup: CheckpointTuple) -> bool:
    """Whether nodes would run after a decoded checkpoint (its trigger channels)."""
    return bool(next_nodes(tup.checkpoint))


# --- asking -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadQuery:
    """Validated ``threads()`` arguments (see :func:`check_threads_args`)."""

    statuses: tuple[str, ...] | None  # None: any
    metadata: dict[str, Any]  # JSON-safe, keys validated (as list()'s filter)
    updated_before: int | None  # epoch microseconds, exclusive
    updated_after: int | None  # epoch microseconds, exclusive
    order: str
    limit: int
    after: tuple[int, str] | tuple[str] | None  # the cursor's key: the page starts after it

    @property
    def descending(self) -> bool:
        return self.order == "updated"


def _epoch(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ConfigError(
                f"{name} must be a timezone-aware datetime (datetime.now(timezone.utc)), "
                f"got the naive {value!r}"
            )
        return to_micros(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ConfigError(f"{name} must be a finite number of seconds, got {value!r}")
        return round(seconds * 1_000_000)
    raise ConfigError(
        f"{name} must be a timezone-aware datetime or epoch seconds, "
        f"got {type(value).__name__} {value!r:.100}"
    )


def _statuses(status: Any) -> tuple[str, ...] | None:
    if status is None:
        return None
    items = (status,) if isinstance(status, str) else status
    try:
        found = tuple(items)
    except TypeError:
        found = (status,)
    bad = [s for s in found if s not in _STATUSES]
    if bad or not found:
        raise ConfigError(
            f"status must be one of {', '.join(_STATUSES)} (or a list of them), got {status!r:.100}"
        )
    return tuple(dict.fromkeys(found))


def check_threads_args(
    status: Any,
    metadata: Mapping[str, Any] | None,
    updated_before: Any,
    updated_after: Any,
    order: Any,
    limit: Any,
    cursor: Any,
) -> ThreadQuery:
    """Validate ``threads()`` arguments; a :class:`ConfigError` names the bad one."""
    if not isinstance(order, str) or order not in _ORDERS:
        raise ConfigError(f"order must be one of {', '.join(map(repr, _ORDERS))}, got {order!r}")
    if limit is None:
        limit = DEFAULT_LIMIT
    checked = check_limit(limit)
    assert checked is not None
    if checked > MAX_LIMIT:
        raise ConfigError(f"limit must be at most {MAX_LIMIT} (page with cursor=), got {limit}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ConfigError(f"metadata must be a mapping of metadata keys, got {metadata!r:.100}")
    try:
        want = check_filter(metadata)
    except ConfigError as exc:
        raise ConfigError(f"metadata: {exc}") from None
    bad = sorted(k for k in want if k in RUNTIME_METADATA)
    if bad:
        raise ConfigError(
            f"metadata: {', '.join(map(repr, bad))} is the runtime's, not a key the thread "
            "index keeps (it keeps the run's metadata and configurable keys)"
        )
    return ThreadQuery(
        statuses=_statuses(status),
        metadata=want,
        updated_before=_epoch(updated_before, "updated_before"),
        updated_after=_epoch(updated_after, "updated_after"),
        order=order,
        limit=checked,
        after=_decode_cursor(cursor, order),
    )


# The cursor: URL-safe base64 of the JSON [order, *key] of the last row of a page.
def encode_cursor(order: str, updated_at: int, thread_id: str) -> str:
    """The cursor of the page after the row ``(updated_at, thread_id)``."""
    key: list[Any] = [order, thread_id] if order == "thread_id" else [order, updated_at, thread_id]
    raw = msgspec.json.encode(key)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: Any, order: str) -> tuple[int, str] | tuple[str] | None:
    if cursor is None:
        return None
    if not isinstance(cursor, str):
        raise ConfigError(
            f"cursor must be the text a ThreadPage's next_cursor gave, got {cursor!r}"
        )
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = msgspec.json.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        key = None
    if not isinstance(key, list) or not key or key[0] not in _ORDERS:
        raise ConfigError(f"cursor {cursor!r:.100} is not one threads() gave")
    if key[0] != order:
        raise ConfigError(
            f"cursor was given for order={key[0]!r}, not order={order!r}; pass the same "
            "order (and filters) as the call that returned it"
        )
    if order == "thread_id":
        if len(key) == 2 and isinstance(key[1], str):
            return (check_text(key[1], "cursor"),)
    elif (
        len(key) == 3
        and isinstance(key[1], int)
        and not isinstance(key[1], bool)
        and isinstance(key[2], str)
    ):
        return (key[1], check_text(key[2], "cursor"))
    raise ConfigError(f"cursor {cursor!r:.100} is not one threads() gave")


def summary(
    thread_id: str,
    status: str | None,
    created: int,
    updated: int,
    checkpoints: int,
    namespaces: int,
    size: int,
    latest_id: str | None,
    latest_step: Any,
    latest_ts: str | None,
    metadata: dict[str, Any],
) -> ThreadSummary:
    """A :class:`ThreadSummary` from an index row's columns."""
    return ThreadSummary(
        thread_id=thread_id,
        status=status if status in _STATUSES else None,  # type: ignore[arg-type]
        created_at=from_micros(created),
        updated_at=from_micros(updated),
        checkpoints=int(checkpoints),
        namespaces=int(namespaces),
        bytes=int(size),
        latest_checkpoint_id=latest_id,
        latest_step=latest_step,
        latest_ts=latest_ts,
        metadata=metadata,
    )


def sort_key(query: ThreadQuery, updated: int, thread_id: str) -> tuple[Any, ...]:
    """A row's place in ``query.order`` (ascending), for the in-memory reference."""
    if query.order == "thread_id":
        return (thread_id,)
    if query.descending:
        return (-updated, _Desc(thread_id))
    return (updated, thread_id)


def after_cursor(query: ThreadQuery, updated: int, thread_id: str) -> bool:
    """Whether a row comes after the cursor's row in ``query.order``."""
    key = query.after
    if key is None:
        return True
    if len(key) == 1:
        return thread_id > key[0]
    assert len(key) == 2
    if query.descending:
        return (updated, thread_id) < key
    return (updated, thread_id) > key


def cursor_after(query: ThreadQuery, rows: list[ThreadSummary], more: bool) -> str | None:
    """The next page's cursor: ``None`` when nothing follows ``rows``."""
    if not more or not rows:
        return None
    last = rows[-1]
    return encode_cursor(query.order, to_micros(last.updated_at), last.thread_id)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def to_micros(when: datetime.datetime) -> int:
    """Epoch microseconds of an aware datetime, exactly (the index stores these)."""
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime.datetime:
    """The aware UTC datetime of epoch microseconds, exactly."""
    return _EPOCH + datetime.timedelta(microseconds=int(micros))


def now_micros() -> int:
    """The wall clock in epoch microseconds (what put and put_writes record)."""
    return time.time_ns() // 1_000


class _Desc(str):
    """A string that sorts in reverse (descending thread ids inside ascending keys)."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return str.__gt__(self, other)  # type: ignore[operator]

    def __gt__(self, other: object) -> bool:
        return str.__lt__(self, other)  # type: ignore[operator]

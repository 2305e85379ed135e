"""The saver contract (SPEC S2): what every tether backend does, sync and async.

Method names are LangGraph's (``get_tuple``/``aget_tuple``, ``list``/``alist``,
``put``/``aput``, ``put_writes``/``aput_writes``, ...), so a LangGraph user
recognises them. Every method exists in both forms and every backend
implements both fully; :mod:`tether.testing` runs the whole contract through
each path. How a backend keeps the two in step is its own choice, from a short
list documented in ``docs/architecture.md``:

* no I/O (in-memory): the async method runs the sync one inline;
* a blocking driver (sqlite3): the async method runs the sync one in a worker
  thread, never on the event loop;
* an async driver (psycopg): the async module is the source, the sync module is
  generated from it by ``tools/gen_sync.py`` and checked in CI.

Semantics (the contract suite is the executable form of this list):

``put(config, checkpoint, metadata, new_versions)``
    Stores the checkpoint under ``(thread, ns, checkpoint["id"])``. Its parent
    is the ``checkpoint_id`` of the incoming config. Only channels named in
    ``new_versions`` have their values written; the others are found through
    ``channel_versions`` in blobs written by earlier puts. String, number and
    bool entries of ``config["metadata"]`` and ``config["configurable"]``
    (except internal keys: addressing keys and keys starting with ``__``) are
    merged into the stored metadata; keys in ``metadata`` win. Putting an id
    again overwrites it; a blob written again under the same (channel,
    version) overwrites the previous one. Returns the config addressing the
    new checkpoint.
    The saver keeps no reference to the caller's dicts.

``put_writes(config, writes, task_id, task_path="")``
    Stores intermediate writes of one task against the checkpoint in
    ``config``. Ordinary writes get their position in the batch as index and
    are insert-or-ignore (a repeat of the same (task, index) is ignored);
    special channels (ERROR, SCHEDULED, INTERRUPT, RESUME) get fixed negative
    indexes and replace the previous value. Pending writes are read back
    ordered by ``(task_path, task_id, idx)``.

``get_writes(config)``
    The pending writes of the checkpoint ``config`` names (it must name an
    id), as :class:`~tether.checkpoint.StoredWrite` records: what
    ``get_tuple`` returns as ``pending_writes``, in the same order, each with
    the task path and index it is stored under. ``[]`` when the checkpoint has
    none or does not exist. For tools that copy writes into another store under
    their original keys (``tether export``).

``get_tuple(config)``
    The checkpoint ``config`` names, or the latest of (thread, ns) when it
    names no id; ``None`` when there is none. Includes pending writes and the
    parent config.

``list(config, *, filter=None, before=None, limit=None)``
    Newest first. ``config=None`` (or a config without thread) lists every
    thread; the namespace restricts only when the config names one. ``before``
    keeps checkpoints whose id is smaller than its id. ``limit``: ``None`` =
    all, ``0`` = none, negative = :class:`~tether.errors.ConfigError`.
    ``filter`` = exact equality (as JSON values) on top-level metadata keys,
    all keys must match; a ``None`` value matches a key stored as null, not a
    missing key; numbers compare by value, booleans only equal booleans.

``delete_thread(thread_id)``
    Removes the thread in every namespace: checkpoints, blobs, writes.

``delete_for_runs(run_ids)``
    Removes the checkpoints whose metadata ``run_id`` is in ``run_ids``, with
    their writes and the blobs no remaining checkpoint refers to.

``copy_thread(source_thread_id, target_thread_id)``
    Copies every checkpoint of the source (same ids, every namespace, writes
    included) into the target thread; checkpoints the target already has with
    the same id are overwritten. Unknown source: nothing happens.

``threads(*, status=None, metadata=None, updated_before=None, updated_after=None,
order="updated", limit=50, cursor=None)``
    One page (:class:`~tether.threads.ThreadPage`) of the thread index: a
    :class:`~tether.threads.ThreadSummary` per thread that has a checkpoint,
    kept in the same transaction as every write (#15). ``status``: one of
    ``idle``, ``interrupted``, ``pending``, ``error``, or a list of them;
    ``metadata``: exact equality on the latest root checkpoint's user keys,
    as ``list(filter=...)``; ``updated_before``/``updated_after``: aware
    datetimes or epoch seconds, exclusive; ``order``: ``"updated"`` (newest
    first), ``"-updated"`` or ``"thread_id"``; ``cursor``: a page's
    ``next_cursor`` (keyset paging: a thread written while paging moves, no
    other one is skipped or repeated). Bad arguments are a
    :class:`~tether.errors.ConfigError` naming the argument.

``prune(thread_ids, *, strategy="keep_latest", keep=1)``
    ``"keep_latest"``: only the newest checkpoint of each namespace remains,
    with its writes. ``"keep_last"``: the newest ``keep`` of each namespace.
    ``"delete"``: everything goes. Blobs nobody refers to are removed. Kept
    checkpoints may then name a parent that no longer exists.

``sweep(*, dry_run=False, batch=100, max_seconds=None)``
    Applies the saver's :class:`~tether.lifecycle.Retention` (``retention=``)
    and the threads' own (``set_retention``), see :mod:`tether.lifecycle`:
    deletes threads idle past their TTL and the checkpoints of live threads
    their policy no longer keeps, at most ``batch`` threads per transaction
    (fewer when they hold many checkpoints: see ``sweep``), each thread whole
    or not at all; never a thread active within the policy's
    ``grace`` nor (Postgres) a leased one. Returns a
    :class:`~tether.lifecycle.SweepReport` (what it would delete, with
    ``dry_run``).

``set_retention(thread_id, policy)`` / ``get_retention(thread_id)``
    A thread's own policy, stored in its index row (``None`` removes it); it
    replaces the saver's for that thread and goes with the thread. Setting
    one on a thread without a checkpoint is a
    :class:`~tether.errors.ConfigError`.

``delta_history(config, channels)`` (optional)
    LangGraph's ``get_delta_channel_history`` answered by the storage in one
    round trip, or ``None`` when the backend has no such answer (the caller
    then walks ``get_tuple`` itself). For each channel, the pending writes to
    it on the ancestors of the checkpoint ``config`` names (the latest when
    it names none), oldest first, from its parent back to and including the
    nearest ancestor that stores a value for the channel, and that value
    (``seed``) if there is one: see :class:`~tether.checkpoint.ChannelHistory`
    and :func:`tether.backends._walk.walk_delta`. A parent on the walk
    that is gone, or a value an ancestor names that is gone, is a
    ``StorageError``.
"""

from __future__ import annotations

import abc
import builtins
import copy
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Literal, Self, TypeAlias

from tether._sweeper import Sweeper, check_interval
from tether.checkpoint import (
    ChannelHistory,
    ChannelVersion,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    StoredWrite,
)
from tether.lifecycle import ReadRefresher, Retention, SweepReport, check_retention
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol, as_typed
from tether.threads import ThreadOrder, ThreadPage
from tether.versions import next_str_version

__all__ = ["BaseCheckpointSaver", "PruneStrategy"]

PruneStrategy: TypeAlias = Literal["keep_latest", "keep_last", "delete"]


def default_serializer() -> SerializerProtocol:
    """tether's default: the strict MessagePack serializer (S3.2, S3.4)."""
    from tether.serde import MsgpackSerializer

    serde: SerializerProtocol = MsgpackSerializer()
    return serde


class Closable:
    """``close``/``aclose`` and the context-manager protocol that calls them.

    Shared by tether's savers and by the LangGraph drop-ins (which subclass
    LangGraph's base class, not this module's), so the protocol is written once.
    """

    def close(self) -> None:
        """Release what the saver opened (connections, pools); nothing by default."""

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class BaseCheckpointSaver(Closable, abc.ABC):
    """Base class of every tether saver; see the module docstring for the contract.

    Args:
        serde: the serializer for channel values and writes. Defaults to the
            strict :class:`~tether.serde.MsgpackSerializer`. A plain
            ``dumps``/``loads`` serializer is adapted.
        retention: the saver's :class:`~tether.lifecycle.Retention`, which
            :meth:`sweep` applies (``None``: keep everything, except what
            threads' own policies say).
    """

    serde: SerializerProtocol
    _retention: Retention | None = None
    _refresher: ReadRefresher | None = None  # refresh_on_read's memory
    #: The background sweeper (``sweep_interval=``), ``None`` when off.
    sweeper: Sweeper | None = None

    def __init__(
        self,
        *,
        serde: SerializerProtocol | UntypedSerializerProtocol | None = None,
        retention: Retention | None = None,
    ) -> None:
        self.serde = as_typed(serde) if serde is not None else default_serializer()
        self.retention = retention

    @property
    def retention(self) -> Retention | None:
        """The saver's :class:`~tether.lifecycle.Retention` (``None``: keep everything)."""
        return self._retention

    @retention.setter
    def retention(self, policy: Retention | None) -> None:
        self._retention = check_retention(policy)
        self._refresher = ReadRefresher() if policy is not None and policy.refresh_on_read else None

    # --- sync -------------------------------------------------------------------

    @abc.abstractmethod
    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        """The checkpoint addressed by ``config`` (latest when no id), or ``None``."""

    @abc.abstractmethod
    def list(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first, narrowed by thread/ns, ``filter``, ``before``, ``limit``."""

    @abc.abstractmethod
    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        """Store a checkpoint; returns the config that addresses it."""

    @abc.abstractmethod
    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store the intermediate writes of one task against a checkpoint."""

    @abc.abstractmethod
    def get_writes(self, config: Config) -> builtins.list[StoredWrite]:
        """The pending writes of one checkpoint with their task paths and indexes."""

    @abc.abstractmethod
    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs and writes in every namespace."""

    @abc.abstractmethod
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) created by the given runs."""

    @abc.abstractmethod
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another."""

    @abc.abstractmethod
    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        """Drop old checkpoints of the given threads (see the module docstring)."""

    @abc.abstractmethod
    def threads(
        self,
        *,
        status: str | Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: Any = None,
        updated_after: Any = None,
        order: ThreadOrder = "updated",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ThreadPage:
        """One page of the thread index (see the module docstring)."""

    # --- async ------------------------------------------------------------------

    @abc.abstractmethod
    async def aget_tuple(self, config: Config) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""

    @abc.abstractmethod
    def alist(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""

    @abc.abstractmethod
    async def aput(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        """Async :meth:`put`."""

    @abc.abstractmethod
    async def aput_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""

    @abc.abstractmethod
    async def aget_writes(self, config: Config) -> builtins.list[StoredWrite]:
        """Async :meth:`get_writes`."""

    @abc.abstractmethod
    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""

    @abc.abstractmethod
    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""

    @abc.abstractmethod
    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""

    @abc.abstractmethod
    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        """Async :meth:`prune`."""

    @abc.abstractmethod
    async def athreads(
        self,
        *,
        status: str | Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: Any = None,
        updated_after: Any = None,
        order: ThreadOrder = "updated",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ThreadPage:
        """Async :meth:`threads`."""

    # --- lifecycle (#15): a backend's primitives, each one transaction ------------------

    @abc.abstractmethod
    def set_retention(self, thread_id: str, policy: Retention | None) -> None:
        """Store ``thread_id``'s own retention policy (``None``: the saver's again)."""

    @abc.abstractmethod
    def get_retention(self, thread_id: str) -> Retention | None:
        """``thread_id``'s own retention policy, ``None`` when it follows the saver's."""

    @abc.abstractmethod
    async def aset_retention(self, thread_id: str, policy: Retention | None) -> None:
        """Async :meth:`set_retention`."""

    @abc.abstractmethod
    async def aget_retention(self, thread_id: str) -> Retention | None:
        """Async :meth:`get_retention`."""

    @abc.abstractmethod
    def _retention_rows(self) -> builtins.list[tuple[str, Any]]:
        """``(thread_id, stored policy)`` of every thread with a policy of its own."""

    @abc.abstractmethod
    async def _aretention_rows(self) -> builtins.list[tuple[str, Any]]:
        """Async :meth:`_retention_rows`."""

    @abc.abstractmethod
    def _sweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        """Delete, in one transaction, each ``(thread_id, cutoff)`` of ``due`` whose
        thread was last active before ``cutoff`` (epoch microseconds) and is not
        leased; ``(thread_id, checkpoints, bytes)`` of each deleted (``dry_run``:
        of each that would be, nothing deleted)."""

    @abc.abstractmethod
    async def _asweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        """Async :meth:`_sweep_expired`."""

    @abc.abstractmethod
    def _sweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        """``prune(keep_last=keep)`` of one thread in one transaction, only if it was last
        active before ``active_before`` and is not leased: ``(checkpoints, bytes)``
        deleted, or ``None`` when it was left alone. ``dry_run``: the same checks and
        counts, read from what the prune would leave (as the index would recount it),
        nothing deleted."""

    @abc.abstractmethod
    async def _asweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        """Async :meth:`_sweep_prune`."""

    def _start_sweeper(self, interval: float | None) -> None:
        """Start the background sweeper (a backend calls it once it can serve sync calls)."""
        seconds = check_interval(interval)
        if seconds is not None and self.sweeper is None:
            self.sweeper = Sweeper(self, seconds)
            self.sweeper.start()

    def _stop_sweeper(self) -> None:
        """Stop the background sweeper, if any (a backend's ``close`` calls it first)."""
        if self.sweeper is not None:
            self.sweeper.stop()

    def _touch(self, thread_id: str, now: int) -> None:
        """Record activity on a thread (``refresh_on_read``): its index row's ``updated_at``."""

    async def _atouch(self, thread_id: str, now: int) -> None:
        """Async :meth:`_touch`."""
        self._touch(thread_id, now)

    def _after_read(self, thread_id: str) -> None:
        """A read of ``thread_id`` returned a checkpoint: refresh it if the policy says so."""
        refresh = self._refresher
        if refresh is not None:
            now = time.time_ns() // 1_000  # as the thread index records times
            if refresh.due(thread_id, now):
                self._touch(thread_id, now)

    async def _aafter_read(self, thread_id: str) -> None:
        """Async :meth:`_after_read`."""
        refresh = self._refresher
        if refresh is not None:
            now = time.time_ns() // 1_000  # as the thread index records times
            if refresh.due(thread_id, now):
                await self._atouch(thread_id, now)

    #: Seconds a sweep's TTL transaction should take (:class:`tether.lifecycle.Pace`);
    #: ``None``: fixed batches. SQLite sets it: its writers wait for the sweep's.
    _sweep_target: float | None = None

    def _sweep_vacuum(self) -> int:
        """Give back the space a sweep freed; the bytes the store shrank (SQLite)."""
        return 0

    async def _asweep_vacuum(self) -> int:
        """Async :meth:`_sweep_vacuum`."""
        return 0

    def sweep(
        self,
        *,
        dry_run: bool = False,
        batch: int = 100,
        max_seconds: float | None = None,
        now: Any = None,
        vacuum: bool = True,
        progress: Callable[[SweepReport], None] | None = None,
    ) -> SweepReport:
        """Apply the retention policies once (see :mod:`tether.lifecycle`).

        Args:
            dry_run: delete nothing; report what would be deleted.
            batch: the most threads a TTL transaction deletes, and the page
                of the thread index read at a time. A transaction also holds
                at most 200 checkpoints (a larger thread goes alone) or, on
                SQLite, as many as its last one's rate says take about 5 ms,
                since every writer of the file waits for it
                (:class:`tether.lifecycle.Pace`). A thread pruned is one
                transaction of its own; no thread is ever split.
            max_seconds: stop after the batch that ends past this budget
                (``report.finished`` is then ``False``; run it again to go on).
            now: the time the policies are applied at (an aware datetime;
                default: the clock), for a dry run of a future date.
            vacuum: SQLite: give the freed pages back to the file system
                afterwards (incremental vacuum).
            progress: called with the report so far after each batch.

        Raises:
            ConfigError: a bad argument.
        """
        from tether._sweep_sync import sweep

        return sweep(
            self,
            dry_run=dry_run,
            batch=batch,
            max_seconds=max_seconds,
            now=now,
            vacuum=vacuum,
            progress=progress,
        )

    async def asweep(
        self,
        *,
        dry_run: bool = False,
        batch: int = 100,
        max_seconds: float | None = None,
        now: Any = None,
        vacuum: bool = True,
        progress: Callable[[SweepReport], None] | None = None,
    ) -> SweepReport:
        """Async :meth:`sweep`."""
        from tether._sweep_async import asweep

        return await asweep(
            self,
            dry_run=dry_run,
            batch=batch,
            max_seconds=max_seconds,
            now=now,
            vacuum=vacuum,
            progress=progress,
        )

    # --- shared, concrete -----------------------------------------------------------

    def get(self, config: Config) -> Checkpoint | None:
        """Just the checkpoint of :meth:`get_tuple`."""
        tup = self.get_tuple(config)
        return tup.checkpoint if tup else None

    async def aget(self, config: Config) -> Checkpoint | None:
        """Async :meth:`get`."""
        tup = await self.aget_tuple(config)
        return tup.checkpoint if tup else None

    def delta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        """What LangGraph rebuilds ``channels`` of a checkpoint from, in one round trip.

        See ``delta_history`` in the module docstring. ``None``: this backend
        has no such answer, and the caller walks :meth:`get_tuple` instead.

        Raises:
            StorageError: a parent on the walk, or a value an ancestor names, is gone.
            DecodeError: a write or a value cannot be decoded.
        """
        return None

    async def adelta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        """Async :meth:`delta_history`."""
        return None

    def get_next_version(self, current: ChannelVersion | None, channel: Any = None) -> str:
        """The version after ``current``: padded ``major.random`` strings (S2.5).

        Every tether backend keeps channel values apart from checkpoints, so
        the random suffix is what keeps two forks of one checkpoint from
        writing the same blob key.
        """
        return next_str_version(current)

    def with_allowlist(self, extra: Collection[tuple[str, ...]]) -> Self:
        """A shallow copy whose serializer also allows ``extra`` (module, name) types.

        Storage (connections, pools, locks, in-memory maps) is shared with the
        original; only the serializer differs. Returns ``self`` when the
        serializer has no allowlist.
        """
        with_allow = getattr(self.serde, "with_allowlist", None)
        if with_allow is None:
            return self
        serde = with_allow(extra)
        if serde is self.serde:
            return self
        clone = copy.copy(self)
        clone.serde = serde
        return clone

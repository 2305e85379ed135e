"""How a backend without an async driver serves async callers.

Two ways, both from one implementation (the sync methods), so the two paths
cannot drift:

* :class:`InlineAsyncMixin` — for backends that do no I/O (in-memory). The
  async methods call the sync ones directly. Their critical sections are
  short, CPU-only and never held across an ``await``, so this cannot block
  the loop for long nor deadlock.
* :class:`ThreadedAsyncMixin` — for a blocking driver (sqlite3, and psycopg's
  sync API when a Postgres saver was given no async resource). The async
  methods run the sync ones in a worker thread (``asyncio.to_thread``), never
  on the event loop thread; ``alist`` advances the sync iterator a page at a
  time in worker threads, so the iterator must not keep thread-bound state
  between items (the SQLite backend pages by key for this reason).

There is deliberately no sync-over-async bridge (a sync method that waits on
the event loop): that is what deadlocked the reference async SQLite saver.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.checkpoint import (
    ChannelHistory,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    StoredWrite,
)

if TYPE_CHECKING:
    from tether.base import PruneStrategy
    from tether.lifecycle import Retention
    from tether.threads import ThreadOrder, ThreadPage

__all__ = ["InlineAsyncMixin", "ThreadedAsyncMixin"]

_PAGE = 64


class _SyncMethods:
    """The sync half the mixins delegate to (typing aid only)."""

    if TYPE_CHECKING:

        def get_tuple(self, config: Config) -> CheckpointTuple | None: ...
        def list(
            self,
            config: Config | None,
            *,
            filter: Mapping[str, Any] | None = None,
            before: Config | None = None,
            limit: int | None = None,
        ) -> Iterator[CheckpointTuple]: ...
        def put(
            self,
            config: Config,
            checkpoint: Checkpoint,
            metadata: CheckpointMetadata,
            new_versions: ChannelVersions,
        ) -> dict[str, Any]: ...
        def put_writes(
            self,
            config: Config,
            writes: Sequence[tuple[str, Any]],
            task_id: str,
            task_path: str = "",
        ) -> None: ...
        def get_writes(self, config: Config) -> builtins.list[StoredWrite]: ...
        def delta_history(
            self, config: Config, channels: Sequence[str]
        ) -> Mapping[str, ChannelHistory] | None: ...
        def delete_thread(self, thread_id: str) -> None: ...
        def delete_for_runs(self, run_ids: Sequence[str]) -> None: ...
        def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None: ...
        def prune(
            self,
            thread_ids: Sequence[str],
            *,
            strategy: PruneStrategy = "keep_latest",
            keep: int = 1,
        ) -> None: ...
        def set_retention(self, thread_id: str, policy: Retention | None) -> None: ...
        def get_retention(self, thread_id: str) -> Retention | None: ...
        def _retention_rows(self) -> builtins.list[tuple[str, Any]]: ...
        def _sweep_expired(
            self, due: Sequence[tuple[str, int]], dry_run: bool
        ) -> builtins.list[tuple[str, int, int]]: ...
        def _sweep_prune(
            self, thread_id: str, keep: int, active_before: int, dry_run: bool
        ) -> tuple[int, int] | None: ...
        def _sweep_vacuum(self) -> int: ...
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
        ) -> ThreadPage: ...


class InlineAsyncMixin(_SyncMethods):
    """Async methods that run the sync implementation inline (no I/O backends)."""

    async def aget_tuple(self, config: Config) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def aget_writes(self, config: Config) -> builtins.list[StoredWrite]:
        return self.get_writes(config)

    async def adelta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        return self.delta_history(config, channels)

    async def alist(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        self.prune(thread_ids, strategy=strategy, keep=keep)

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
        return self.threads(
            status=status,
            metadata=metadata,
            updated_before=updated_before,
            updated_after=updated_after,
            order=order,
            limit=limit,
            cursor=cursor,
        )

    async def aset_retention(self, thread_id: str, policy: Retention | None) -> None:
        self.set_retention(thread_id, policy)

    async def aget_retention(self, thread_id: str) -> Retention | None:
        return self.get_retention(thread_id)

    async def _aretention_rows(self) -> builtins.list[tuple[str, Any]]:
        return self._retention_rows()

    async def _asweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        return self._sweep_expired(due, dry_run)

    async def _asweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        return self._sweep_prune(thread_id, keep, active_before, dry_run)

    async def _asweep_vacuum(self) -> int:
        return self._sweep_vacuum()


def _next_page(it: Iterator[CheckpointTuple], n: int) -> list[CheckpointTuple]:
    page = []
    for item in it:
        page.append(item)
        if len(page) >= n:
            break
    return page


class ThreadedAsyncMixin(_SyncMethods):
    """Async methods that run the sync implementation in worker threads."""

    #: Items ``alist`` takes from the sync iterator per worker-thread hop; a
    #: backend that lists by pages sets its page size, one query per hop.
    _alist_page: int = _PAGE

    async def aget_tuple(self, config: Config) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def aget_writes(self, config: Config) -> builtins.list[StoredWrite]:
        return await asyncio.to_thread(self.get_writes, config)

    async def adelta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        return await asyncio.to_thread(self.delta_history, config, channels)

    async def alist(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # Build the iterator in a thread too: validation errors surface here,
        # and a backend may do I/O when the iterator is created.
        it = await asyncio.to_thread(
            lambda: iter(self.list(config, filter=filter, before=before, limit=limit))
        )
        try:
            while True:
                page = await asyncio.to_thread(_next_page, it, self._alist_page)
                for item in page:
                    yield item
                if len(page) < self._alist_page:
                    return
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                await asyncio.to_thread(close)

    async def aput(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy, keep=keep)

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
        return await asyncio.to_thread(
            functools.partial(
                self.threads,
                status=status,
                metadata=metadata,
                updated_before=updated_before,
                updated_after=updated_after,
                order=order,
                limit=limit,
                cursor=cursor,
            )
        )

    async def aset_retention(self, thread_id: str, policy: Retention | None) -> None:
        await asyncio.to_thread(self.set_retention, thread_id, policy)

    async def aget_retention(self, thread_id: str) -> Retention | None:
        return await asyncio.to_thread(self.get_retention, thread_id)

    async def _aretention_rows(self) -> builtins.list[tuple[str, Any]]:
        return await asyncio.to_thread(self._retention_rows)

    async def _asweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        return await asyncio.to_thread(self._sweep_expired, due, dry_run)

    async def _asweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        return await asyncio.to_thread(self._sweep_prune, thread_id, keep, active_before, dry_run)

    async def _asweep_vacuum(self) -> int:
        return await asyncio.to_thread(self._sweep_vacuum)

"""``PostgresSaver``'s lifecycle methods (#15): a thread's own policy and the sweep's
primitives, each a call into the core of the flavour asked (the statements are
:mod:`._sweep`'s, the I/O ``_async.py``'s and its generated twin's)."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from tether.contract import check_thread_id
from tether.lifecycle import Retention, check_retention, no_thread, stored_policy

if TYPE_CHECKING:
    from tether.backends.postgres._async import _AsyncPostgresCore
    from tether.backends.postgres._sync import _PostgresCore

__all__ = ["LifecycleMixin"]


class LifecycleMixin:
    """Mixed into :class:`~tether.backends.postgres.PostgresSaver`."""

    if TYPE_CHECKING:

        def _sync_core(self) -> _PostgresCore: ...
        async def _aio_core(self) -> _AsyncPostgresCore | None: ...

    def set_retention(self, thread_id: str, policy: Retention | None) -> None:
        tid = check_thread_id(thread_id, bounded=False)
        found = check_retention(policy, "policy")
        if not self._sync_core().set_retention(tid, None if found is None else found.to_json()):
            raise no_thread(tid)

    def get_retention(self, thread_id: str) -> Retention | None:
        found = self._sync_core().get_retention(check_thread_id(thread_id, bounded=False))
        return None if found is None else stored_policy(thread_id, found)

    def _touch(self, thread_id: str, now: int) -> None:
        self._sync_core().touch(thread_id, now)

    async def _atouch(self, thread_id: str, now: int) -> None:
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self._touch, thread_id, now)
        await core.atouch(thread_id, now)

    def _retention_rows(self) -> builtins.list[tuple[str, Any]]:
        return [(str(t), p) for t, p in self._sync_core().retention_rows()]

    def _sweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        return self._sync_core().sweep_expired(due, dry_run)

    def _sweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        return self._sync_core().sweep_prune(thread_id, keep, active_before, dry_run)

    def sweep_lock(self) -> AbstractContextManager[bool]:
        """Whether this process may sweep now: ``with saver.sweep_lock() as mine: ...``.

        One sweeper per schema at a time: a session advisory lock, released
        when the block ends or by the server when the process dies. The
        background sweeper (``sweep_interval``) takes it around each round;
        ``sweep()`` itself needs none (every batch checks its threads again).
        """
        return self._sync_core().sweep_lock()

    async def aset_retention(self, thread_id: str, policy: Retention | None) -> None:
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self.set_retention, thread_id, policy)
        tid = check_thread_id(thread_id, bounded=False)
        found = check_retention(policy, "policy")
        if not await core.aset_retention(tid, None if found is None else found.to_json()):
            raise no_thread(tid)

    async def aget_retention(self, thread_id: str) -> Retention | None:
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self.get_retention, thread_id)
        found = await core.aget_retention(check_thread_id(thread_id, bounded=False))
        return None if found is None else stored_policy(thread_id, found)

    async def _aretention_rows(self) -> builtins.list[tuple[str, Any]]:
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self._retention_rows)
        return [(str(t), p) for t, p in await core.aretention_rows()]

    async def _asweep_expired(
        self, due: Sequence[tuple[str, int]], dry_run: bool
    ) -> builtins.list[tuple[str, int, int]]:
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self._sweep_expired, due, dry_run)
        return await core.asweep_expired(due, dry_run)

    async def _asweep_prune(
        self, thread_id: str, keep: int, active_before: int, dry_run: bool
    ) -> tuple[int, int] | None:
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(
                self._sweep_prune, thread_id, keep, active_before, dry_run
            )
        return await core.asweep_prune(thread_id, keep, active_before, dry_run)

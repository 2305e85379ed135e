"""One generic adapter: any tether saver as a LangGraph ``BaseCheckpointSaver``.

The LangGraph runtime accepts only subclasses of its own base class, so the
drop-in savers are thin wrappers that hold a tether saver and translate each
call. Little needs translating: tether's data model *is* LangGraph's v4
format (checkpoint dicts, configs, metadata), so a call passes through and
only tether's ``CheckpointTuple`` is rebuilt as LangGraph's (same fields, a
different NamedTuple class). Both halves are tether's, so every instance
serves ``invoke`` and ``ainvoke`` alike. The method table is inherited: the
async half is written in ``_adapter_async.py``, the sync half generated from
it (``_adapter_sync.py``, by ``tools/gen_sync.py``); the translations are in
``_convert.py``.

What the LangGraph runtime expects beyond the method table:

* ``put_writes`` declares ``task_path``: the runtime inspects the signature
  and passes the task's path only when it is there; tether orders pending
  writes by it.
* ``with_allowlist`` (strict-msgpack mode) shallow-copies the saver and
  extends its serializer. LangGraph's own implementation only knows its
  ``JsonPlusSerializer``; the override routes the graph's schema types to
  tether's serializer, while storage stays shared with the original.
* ``get_next_version`` returns tether's string versions (S2.5).
* exceptions in task writes (``__error__``) are stored as their ``repr``, as
  LangGraph's serializer does: an exception object is not data.
* ``prune`` and ``delete_for_runs`` keep ``DeltaChannel`` values readable
  (see :mod:`tether._delta_chains`): a prune keeps the checkpoints a kept
  one rebuilds its delta channels from, and a deletion that would cut such a
  chain is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Self

from tether import base as tether_base
from tether.langgraph._adapter_async import _AsyncAdapter
from tether.langgraph._adapter_sync import _Adapter
from tether.lifecycle import Retention, SweepReport, check_retention
from tether.threads import ThreadOrder, ThreadPage

__all__ = ["TetherLangGraphSaver"]


class TetherLangGraphSaver(tether_base.Closable, _Adapter, _AsyncAdapter):
    """A tether saver seen through LangGraph's ``BaseCheckpointSaver`` interface.

    The public classes in :mod:`tether.langgraph` are subclasses with the
    official savers' constructors; use this one directly to wrap any other
    tether backend.

    Args:
        saver: the tether saver that stores everything. Its serializer is the
            one used (exposed as ``serde``).
    """

    saver: tether_base.BaseCheckpointSaver

    def __init__(self, saver: tether_base.BaseCheckpointSaver) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver

    # --- closing: the wrapped saver's (a context manager closes it) ----------------------

    def close(self) -> None:
        """Close the wrapped saver (what it opened; a resource it was given stays open)."""
        self.saver.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        await self.saver.aclose()

    # --- the thread index (#15): the wrapped saver's ----------------------------------

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
        """One page of the thread index (:meth:`tether.base.BaseCheckpointSaver.threads`)."""
        return self.saver.threads(
            status=status,
            metadata=metadata,
            updated_before=updated_before,
            updated_after=updated_after,
            order=order,
            limit=limit,
            cursor=cursor,
        )

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
        return await self.saver.athreads(
            status=status,
            metadata=metadata,
            updated_before=updated_before,
            updated_after=updated_after,
            order=order,
            limit=limit,
            cursor=cursor,
        )

    # --- lifecycle (#15): the wrapped saver's ----------------------------------------

    @property
    def retention(self) -> Retention | None:
        """The retention policy :meth:`sweep` applies (the wrapped saver's ``retention``)."""
        return self.saver.retention

    @retention.setter
    def retention(self, policy: Retention | None) -> None:
        self.saver.retention = check_retention(policy)

    def sweep(self, **options: Any) -> SweepReport:
        """Apply retention once (:meth:`tether.base.BaseCheckpointSaver.sweep`); the
        checkpoints a kept one rebuilds a ``DeltaChannel`` from stay."""
        return self.saver.sweep(**options)

    async def asweep(self, **options: Any) -> SweepReport:
        """Async :meth:`sweep`."""
        return await self.saver.asweep(**options)

    def set_retention(self, thread_id: str, policy: Retention | None) -> None:
        """Store a thread's own policy (:meth:`tether.base.BaseCheckpointSaver.set_retention`)."""
        self.saver.set_retention(thread_id, policy)

    async def aset_retention(self, thread_id: str, policy: Retention | None) -> None:
        """Async :meth:`set_retention`."""
        await self.saver.aset_retention(thread_id, policy)

    def get_retention(self, thread_id: str) -> Retention | None:
        """A thread's own retention policy, ``None`` when the saver's applies."""
        return self.saver.get_retention(thread_id)

    async def aget_retention(self, thread_id: str) -> Retention | None:
        """Async :meth:`get_retention`."""
        return await self.saver.aget_retention(thread_id)

    # --- LangGraph runtime hooks ------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        return self.saver.get_next_version(current)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Self:
        saver = self.saver.with_allowlist(extra_allowlist)
        if saver is self.saver:
            return self
        clone = copy.copy(self)
        clone.saver = saver
        clone.serde = saver.serde
        return clone

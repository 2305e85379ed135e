"""One generic adapter: any tether saver as a LangGraph ``BaseCheckpointSaver``.

The LangGraph runtime accepts only subclasses of its own base class, so the
drop-in savers are thin wrappers that hold a tether saver and translate each
call. Little needs translating: tether's data model *is* LangGraph's v4
format (checkpoint dicts, configs, metadata), so a call passes through and
only tether's ``CheckpointTuple`` is rebuilt as LangGraph's (same fields, a
different NamedTuple class). Both halves are tether's, so every instance
serves ``invoke`` and ``ainvoke`` alike.

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
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from typing import Any, Self, cast, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from tether import base as tether_base
from tether import checkpoint as tether_checkpoint
from tether._delta_chains_async import adelete_runs_keeping_chains, aprune_keeping_chains
from tether._delta_chains_sync import delete_runs_keeping_chains, prune_keeping_chains
from tether.base import PruneStrategy
from tether.errors import ConfigError

__all__ = ["TetherLangGraphSaver"]

_STRATEGIES: tuple[str, ...] = get_args(PruneStrategy)


def _to_langgraph(tup: tether_checkpoint.CheckpointTuple) -> CheckpointTuple:
    return CheckpointTuple(
        cast(RunnableConfig, tup.config),
        tup.checkpoint,
        cast(CheckpointMetadata, tup.metadata),
        cast(RunnableConfig | None, tup.parent_config),
        tup.pending_writes,
    )


def _plain_writes(writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    if any(isinstance(value, BaseException) for _, value in writes):
        return [
            (channel, repr(value) if isinstance(value, BaseException) else value)
            for channel, value in writes
        ]
    return writes


def _strategy(strategy: str) -> PruneStrategy:
    if strategy not in _STRATEGIES:
        raise ConfigError(
            f"unknown prune strategy {strategy!r}; use one of {', '.join(map(repr, _STRATEGIES))}"
        )
    return cast(PruneStrategy, strategy)


class TetherLangGraphSaver(BaseCheckpointSaver[str]):
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

    # --- sync ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = self.saver.get_tuple(config)
        return _to_langgraph(tup) if tup is not None else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for tup in self.saver.list(config, filter=filter, before=before, limit=limit):
            yield _to_langgraph(tup)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return cast(
            RunnableConfig,
            self.saver.put(
                config,
                checkpoint,
                cast(tether_checkpoint.CheckpointMetadata, metadata),
                new_versions,
            ),
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.saver.put_writes(config, _plain_writes(writes), task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs' checkpoints, unless a checkpoint that stays needs them.

        Raises:
            ConfigError: a remaining checkpoint rebuilds a ``DeltaChannel``
                from the writes or snapshot of a checkpoint of these runs
                (nothing is deleted then).
        """
        delete_runs_keeping_chains(self.saver, run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.saver.copy_thread(source_thread_id, target_thread_id)

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1
    ) -> None:
        """Drop old checkpoints; LangGraph's strategies plus tether's ``"keep_last"``.

        A thread whose graph uses a LangGraph ``DeltaChannel`` keeps more than
        asked: a kept checkpoint rebuilds such a channel from its ancestors'
        writes back to the last stored snapshot, so those ancestors stay. What
        is kept is the newest N of each namespace, N as small as that allows:
        on a straight thread, about one snapshot interval more than asked; a
        fork from an old checkpoint can keep everything since it, because N
        counts checkpoints by age, not by branch. Finding N reads each thread
        once before pruning it. A run writing to the thread meanwhile can
        still outgrow what was kept: prune threads that are at rest.

        Args:
            thread_ids: the threads to prune.
            strategy: ``"keep_latest"`` (the newest checkpoint of each
                namespace), ``"keep_last"`` (the newest ``keep``) or
                ``"delete"`` (everything).
            keep: how many to keep with ``"keep_last"``.
        """
        prune_keeping_chains(self.saver, thread_ids, strategy=_strategy(strategy), keep=keep)

    # --- async --------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = await self.saver.aget_tuple(config)
        return _to_langgraph(tup) if tup is not None else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for tup in self.saver.alist(config, filter=filter, before=before, limit=limit):
            yield _to_langgraph(tup)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return cast(
            RunnableConfig,
            await self.saver.aput(
                config,
                checkpoint,
                cast(tether_checkpoint.CheckpointMetadata, metadata),
                new_versions,
            ),
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.saver.aput_writes(config, _plain_writes(writes), task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await adelete_runs_keeping_chains(self.saver, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.saver.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1
    ) -> None:
        """Async :meth:`prune`."""
        await aprune_keeping_chains(self.saver, thread_ids, strategy=_strategy(strategy), keep=keep)

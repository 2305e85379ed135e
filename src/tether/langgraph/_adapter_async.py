"""The LangGraph saver methods, each passed on to the tether saver (see :mod:`._adapter`).

``_adapter_async.py`` is written by hand; ``_adapter_sync.py`` is generated
from it by ``tools/gen_sync.py``, and :class:`~._adapter.TetherLangGraphSaver`
inherits both. The async methods' short docstrings end in ``# ASYNC``: the
string after each is the sync method's docstring.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from tether import base as tether_base
from tether import checkpoint as tether_checkpoint
from tether._delta_chains_async import adelete_runs_keeping_chains, aprune_keeping_chains
from tether.langgraph._convert import plain_writes, prune_strategy, to_langgraph

__all__ = ["_AsyncAdapter"]


class _AsyncAdapter(BaseCheckpointSaver[str]):
    # A subclass of LangGraph's base, as TetherLangGraphSaver is: its methods
    # without a docstring of their own show the base method's (inspect.getdoc).

    saver: tether_base.BaseCheckpointSaver

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = await self.saver.aget_tuple(config)
        return to_langgraph(tup) if tup is not None else None

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async :meth:`get_delta_channel_history`."""  # ASYNC
        """The writes and seeds that ``DeltaChannel`` values are rebuilt from, in one query.

        LangGraph's default walks ``get_tuple`` once per ancestor; tether's
        backends answer the walk in one round trip (the official savers'
        override does it in two). The result is the default's, except that a
        parent missing from the walk (a prune that knew nothing of the graph
        cut the chain) raises ``StorageError`` instead of reading the channel
        back short.
        """
        if not channels:
            return {}
        found = await self.saver.adelta_history(config, channels)
        if found is None:  # a backend without a one-query walk
            return await super().aget_delta_channel_history(config=config, channels=channels)
        return found

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for tup in self.saver.alist(config, filter=filter, before=before, limit=limit):
            yield to_langgraph(tup)

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
        await self.saver.aput_writes(config, plain_writes(writes), task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.saver.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""  # ASYNC
        """Delete the runs' checkpoints, unless a checkpoint that stays needs them.

        Raises:
            ConfigError: a remaining checkpoint rebuilds a ``DeltaChannel``
                from the writes or snapshot of a checkpoint of these runs
                (nothing is deleted then).
        """
        await adelete_runs_keeping_chains(self.saver, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.saver.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1
    ) -> None:
        """Async :meth:`prune`."""  # ASYNC
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
        await aprune_keeping_chains(
            self.saver, thread_ids, strategy=prune_strategy(strategy), keep=keep
        )

# GENERATED FILE: do not edit. Source: src/tether/langgraph/_adapter_async.py
# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.
"""The LangGraph saver methods, each passed on to the tether saver (see :mod:`._adapter`).

``_adapter_async.py`` is written by hand; ``_adapter_sync.py`` is generated
from it by ``tools/gen_sync.py``, and :class:`~._adapter.TetherLangGraphSaver`
inherits both. The async methods' short docstrings end in ``# ASYNC``: the
string after each is the sync method's docstring.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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
from tether._delta_chains_sync import delete_runs_keeping_chains, prune_keeping_chains
from tether.langgraph._convert import plain_writes, prune_strategy, to_langgraph

__all__ = ["_Adapter"]


class _Adapter(BaseCheckpointSaver[str]):
    # A subclass of LangGraph's base, as TetherLangGraphSaver is: its methods
    # without a docstring of their own show the base method's (inspect.getdoc).

    saver: tether_base.BaseCheckpointSaver

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        tup = self.saver.get_tuple(config)
        return to_langgraph(tup) if tup is not None else None

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
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
        found = self.saver.delta_history(config, channels)
        if found is None:  # a backend without a one-query walk
            return super().get_delta_channel_history(config=config, channels=channels)
        return found

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for tup in self.saver.list(config, filter=filter, before=before, limit=limit):
            yield to_langgraph(tup)

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
        self.saver.put_writes(config, plain_writes(writes), task_id, task_path)

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
        prune_keeping_chains(self.saver, thread_ids, strategy=prune_strategy(strategy), keep=keep)

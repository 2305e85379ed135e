"""What the LangGraph adapter translates between tether's and LangGraph's types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple

from tether import checkpoint as tether_checkpoint
from tether.base import PruneStrategy
from tether.errors import ConfigError

__all__ = ["plain_writes", "prune_strategy", "to_langgraph"]

_STRATEGIES: tuple[str, ...] = get_args(PruneStrategy)


def to_langgraph(tup: tether_checkpoint.CheckpointTuple) -> CheckpointTuple:
    return CheckpointTuple(
        cast(RunnableConfig, tup.config),
        tup.checkpoint,
        cast(CheckpointMetadata, tup.metadata),
        cast(RunnableConfig | None, tup.parent_config),
        tup.pending_writes,
    )


def plain_writes(writes: Sequence[tuple[str, Any]]) -> Sequence[tuple[str, Any]]:
    if any(isinstance(value, BaseException) for _, value in writes):
        return [
            (channel, repr(value) if isinstance(value, BaseException) else value)
            for channel, value in writes
        ]
    return writes


def prune_strategy(strategy: str) -> PruneStrategy:
    if strategy not in _STRATEGIES:
        raise ConfigError(
            f"unknown prune strategy {strategy!r}; use one of {', '.join(map(repr, _STRATEGIES))}"
        )
    return cast(PruneStrategy, strategy)

"""Building checkpoints the way a graph runtime does, for the SQLite tests."""

from __future__ import annotations

from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import copy_checkpoint, empty_checkpoint
from tether.ids import uuid6


def step(
    saver: BaseCheckpointSaver,
    config: dict[str, Any],
    prev: Any,
    values: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    """Put a child of ``prev`` (None = first) that changes ``values``; returns (config, ckpt)."""
    ckpt = empty_checkpoint() if prev is None else copy_checkpoint(prev)
    ckpt["id"] = str(uuid6())
    new_versions = {}
    for channel, value in values.items():
        version = saver.get_next_version(ckpt["channel_versions"].get(channel))
        ckpt["channel_versions"][channel] = version
        ckpt["channel_values"][channel] = value
        new_versions[channel] = version
    ckpt["updated_channels"] = sorted(values)
    out = saver.put(config, ckpt, metadata or {"source": "loop", "step": 0}, new_versions)
    return out, ckpt


def thread(tid: str, ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}

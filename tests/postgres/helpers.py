"""Shared helpers: drive a saver through its sync or its async methods alike."""

from __future__ import annotations

from typing import Any

from tether import PostgresSaver, empty_checkpoint, make_config
from tether.checkpoint import Checkpoint, CheckpointTuple
from tether.ids import uuid6

MODES = ["sync", "async"]


async def call(mode: str, saver: PostgresSaver, name: str, *args: Any, **kwargs: Any) -> Any:
    if mode == "sync":
        return getattr(saver, name)(*args, **kwargs)
    return await getattr(saver, "a" + name)(*args, **kwargs)


async def listing(
    mode: str, saver: PostgresSaver, *args: Any, **kwargs: Any
) -> list[CheckpointTuple]:
    if mode == "sync":
        return list(saver.list(*args, **kwargs))
    return [t async for t in saver.alist(*args, **kwargs)]


def checkpoint(values: dict[str, Any], versions: dict[str, str]) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6())
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    return cp


async def chain(
    mode: str,
    saver: PostgresSaver,
    thread_id: str,
    n: int,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """``n`` checkpoints in a row, each appending to a list channel and bumping a counter."""
    config: dict[str, Any] = make_config(thread_id, ns)
    configs = []
    messages: list[str] = []
    for i in range(n):
        messages = [*messages, f"m{i}"]
        version = f"{i + 1:032}.0"
        cp = checkpoint({"messages": messages, "step": i}, {"messages": version, "step": version})
        meta = {"step": i, **(metadata or {})}
        config = await call(
            mode, saver, "put", config, cp, meta, {"messages": version, "step": version}
        )
        configs.append(config)
    return configs

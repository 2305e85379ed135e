"""The viewer's edits (``tether ui --allow-edit``): fork a checkpoint with edited values.

A fork is what LangGraph's ``update_state`` puts for plain values, built
without the graph: a new checkpoint whose parent is the chosen one, with the
chosen one's channel versions and ``versions_seen``, a new version
(``saver.get_next_version``) for each edited channel and its new value, and
metadata ``{"source": "fork", "step": step + 1, "parents": ...}``. It goes
through the saver's public ``put``, so only the edited channels are written;
the others are the parent's stored values. The versions the parent's nodes
saw are unchanged, so resuming the fork runs what the parent would have run
next, on the edited state. The fork carries no pending writes. An edited
value replaces the channel's value as it is: without the graph there is no
reducer to apply (``update_state`` would append to an ``operator.add`` list).

Copy and delete are the savers' ``copy_thread`` and ``delete_thread``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import CHECKPOINT_VERSION, Checkpoint, CheckpointTuple, make_config
from tether.errors import ConfigError
from tether.ids import uuid6

__all__ = ["fork", "parse_edits"]


def parse_edits(given: Mapping[str, str], current: Mapping[str, Any]) -> dict[str, Any]:
    """The channels whose JSON text in ``given`` reads as another value than ``current``'s.

    Args:
        given: channel -> the JSON text the form sent.
        current: channel -> the checkpoint's value (the editable channels).

    Raises:
        ConfigError: a text that is not JSON, or a channel that is not editable.
    """
    edits: dict[str, Any] = {}
    for channel, text in given.items():
        if channel not in current:
            raise ConfigError(f"channel {channel!r} cannot be edited here (not a plain value)")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"the value of {channel!r} is not JSON: {exc}") from None
        old = current[channel]
        if type(value) is not type(old) or value != old:
            edits[channel] = value
    return edits


def fork(saver: BaseCheckpointSaver, parent: CheckpointTuple, edits: Mapping[str, Any]) -> str:
    """Put a ``source="fork"`` child of ``parent`` with ``edits`` applied; returns its id.

    Raises:
        ConfigError: nothing to change, or ``parent`` is not in the root
            namespace (a subgraph's checkpoint is resumed through its parent
            graph's, so a fork of it alone would never run).
    """
    if not edits:
        raise ConfigError("no value was changed: edit at least one channel to fork")
    conf = parent.config["configurable"]
    if conf.get("checkpoint_ns"):
        raise ConfigError("only checkpoints of the root graph can be forked, not a subgraph's")
    base = parent.checkpoint
    versions = dict(base.get("channel_versions") or {})
    new_versions = {ch: saver.get_next_version(versions.get(ch), None) for ch in edits}
    versions.update(new_versions)
    step = parent.metadata.get("step")
    next_step = step + 1 if isinstance(step, int) and not isinstance(step, bool) else 0
    checkpoint = Checkpoint(
        v=CHECKPOINT_VERSION,
        id=str(uuid6(clock_seq=next_step)),
        ts=datetime.now(UTC).isoformat(),
        channel_values=dict(edits),
        channel_versions=versions,
        versions_seen={k: dict(v) for k, v in (base.get("versions_seen") or {}).items()},
        updated_channels=sorted(edits),
    )
    metadata: dict[str, Any] = {
        "source": "fork",
        "step": next_step,
        "parents": dict(parent.metadata.get("parents") or {}),
    }
    config = make_config(conf["thread_id"], "", base["id"])
    stored = saver.put(config, checkpoint, metadata, new_versions)  # type: ignore[arg-type]
    return str(stored["configurable"]["checkpoint_id"])

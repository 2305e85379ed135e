"""What a store holds, read without decoding stored values: the inspection records.

Each backend answers these questions over its own tables
(``sqlite/_inspect.py``, ``postgres/_inspect.py``): which threads exist, the
checkpoints of a thread without their values, rows and bytes per table,
pending writes whose checkpoint is gone. The CLI (``tether threads``,
``history``, ``stats``, ``verify``) only asks; it never names a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["HeadInfo", "OrphanWrites", "TableStats", "ThreadInfo"]


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """One thread as ``tether threads`` shows it."""

    thread_id: str
    checkpoints: int
    namespaces: int
    latest_id: str
    latest_step: Any
    latest_ts: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "checkpoints": self.checkpoints,
            "namespaces": self.namespaces,
            "latest_checkpoint_id": self.latest_id,
            "latest_step": self.latest_step,
            "latest_ts": self.latest_ts,
        }


@dataclass(frozen=True, slots=True)
class HeadInfo:
    """One checkpoint without its channel values, as ``tether history`` shows it.

    Read with no value decoded, so a history lists whatever types the thread
    holds (allowed or not) at the cost of the rows' metadata only.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint: dict[str, Any]  # the checkpoint without channel_values
    metadata: dict[str, Any]
    parent_id: str | None
    pending_writes: int

    @property
    def checkpoint_id(self) -> str:
        return str(self.checkpoint["id"])


@dataclass(frozen=True, slots=True)
class OrphanWrites:
    """Pending writes stored for a checkpoint the store does not hold (``tether verify``).

    Every saver deletes a checkpoint's writes with it, so these are left by
    rows deleted outside tether (or lost): damage.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    writes: int


@dataclass(frozen=True, slots=True)
class TableStats:
    """Rows and bytes of one table (``bytes`` is ``None`` where the engine cannot tell)."""

    table: str
    rows: int
    bytes: int | None

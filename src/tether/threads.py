"""The thread index (#15): one row per thread, kept by every saver as it writes.

``saver.threads(...)`` (and ``await saver.athreads(...)``) answers "which
conversations are waiting for a human?" from an index the saver keeps up to
date in the same transaction as each ``put`` and ``put_writes``, instead of
scanning the checkpoints:

>>> from tether import InMemorySaver, make_config, empty_checkpoint
>>> saver = InMemorySaver()
>>> _ = saver.put(make_config("t1"), empty_checkpoint(), {"source": "input", "step": -1}, {})
>>> [(t.thread_id, t.status, t.checkpoints) for t in saver.threads()]
[('t1', 'idle', 1)]

A thread is every namespace of one ``thread_id``: subgraph namespaces add
checkpoints (and ``namespaces``) to their thread, never a thread of their
own. The latest checkpoint, step and status are those of the root namespace
``""``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ThreadOrder", "ThreadPage", "ThreadStatus", "ThreadSummary"]

ThreadStatus = Literal["idle", "interrupted", "pending", "error"]
"""``idle``: finished, nothing left to run. ``interrupted``: a task called
``interrupt()`` and waits for ``Command(resume=...)``. ``pending``: nodes are
left to run (a run in progress, stopped before a node, or one that crashed).
``error``: a task failed and its error is saved."""

ThreadOrder = Literal["updated", "-updated", "thread_id"]
"""``"updated"``: most recently updated first (the default); ``"-updated"``:
least recently updated first (what a retention sweep wants); ``"thread_id"``:
by id."""


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """One thread as the index holds it.

    Attributes:
        thread_id: the thread.
        status: of its latest root checkpoint and that checkpoint's pending
            writes (:data:`ThreadStatus`); ``None`` when the thread has no
            root checkpoint (only a subgraph's), or when the index was rebuilt
            from a latest checkpoint whose values this saver cannot decode
            (a type the allowlist refuses).
        created_at: when the saver first wrote the thread (UTC). Stores
            migrated from before the index take the thread's oldest
            checkpoint's ``ts``.
        updated_at: when the saver last wrote a checkpoint or pending write
            of the thread (UTC); migrated stores: the newest ``ts``.
        checkpoints: its checkpoints in every namespace.
        namespaces: its namespaces (the root and each subgraph's).
        bytes: approximately what its rows hold: the sum of the payloads
            written (heads, metadata, values, writes) as the saver encoded
            them. Values written again, and rows shared by copies, count each
            time they were written; pruning and deleting recount. Not the
            space on disk (indexes, pages and compression of the engine).
        latest_checkpoint_id: the newest checkpoint of the root namespace.
        latest_step: its ``metadata["step"]``.
        latest_ts: its ``ts``.
        metadata: its metadata without the runtime's own keys (``source``,
            ``step``, ``parents``): the run's ``metadata`` and configurable
            keys, which ``threads(metadata=...)`` filters on.
    """

    thread_id: str
    status: ThreadStatus | None
    created_at: datetime.datetime
    updated_at: datetime.datetime
    checkpoints: int
    namespaces: int
    bytes: int
    latest_checkpoint_id: str | None
    latest_step: Any
    latest_ts: str | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ThreadPage:
    """One page of ``threads()``: its rows, and the cursor of the next page.

    Iterating a page iterates its rows. ``next_cursor`` is ``None`` on the
    last page; pass it as ``threads(cursor=...)`` with the same filters and
    order to get the next one. It is opaque text (safe in a URL).
    """

    items: list[ThreadSummary]
    next_cursor: str | None

    def __iter__(self) -> Iterator[ThreadSummary]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

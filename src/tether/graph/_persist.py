"""How a run's checkpoints and task writes reach the saver: the durability modes (S4).

=========== ======================================================================
``sync``     every ``put`` finishes before the next superstep starts; task writes
             are stored by the task's thread as the task finishes (S4.1, S4.4).
``async``    ``put`` and ``put_writes`` go to one background lane and are run
             there strictly in submission order: each waits for the previous
             one, so storage never sees step 2 before step 1, nor a task's
             writes before the checkpoint they belong to (S4.2). The first
             failure is kept, every later operation is skipped, and the run
             raises it at the next step boundary or at exit: a failed
             background write is never silent.
``exit``     nothing is written while the graph runs; at exit (normal end,
             error or interrupt) the last checkpoint is put once, with the id it
             already has, followed by the pending writes of its open superstep,
             so an interrupted or failed run can still be resumed (S4.3).
=========== ======================================================================

The modes are applied by ``AsyncPersister`` (``_persist_async.py``, written
by hand) and ``SyncPersister`` (``_persist_sync.py``, generated from it by
``tools/gen_sync.py``). What differs is here, the lane: the sync one is a
per-run FIFO drained by one thread at a time from a small shared pool
(threads are reused, and with them a saver's per-thread connections); the
async one is a chain of asyncio tasks, each awaiting the previous one first.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeAlias

from tether.base import BaseCheckpointSaver
from tether.checkpoint import ChannelVersions, Checkpoint, CheckpointMetadata, Config
from tether.errors import ConfigError

__all__ = ["Durability", "check_durability"]

Durability: TypeAlias = Literal["sync", "async", "exit"]


def check_durability(value: str) -> Durability:
    if value not in ("sync", "async", "exit"):
        raise ConfigError(f"durability must be 'sync', 'async' or 'exit', got {value!r}")
    return value  # type: ignore[return-value]


class _Base:
    """What both persisters hold: the saver, the mode, the first failure, exit mode's checkpoint."""

    def __init__(self, saver: BaseCheckpointSaver | None, durability: Durability) -> None:
        self.saver = saver
        self.durability = durability
        self.error: BaseException | None = None
        # exit mode: the latest checkpoint and the writes of its open step
        self.held: tuple[Config, Checkpoint, CheckpointMetadata, ChannelVersions] | None = None
        self.held_writes: list[tuple[Config, list[tuple[str, Any]], str, str]] = []
        self._lock = threading.Lock()

    def raise_failure(self) -> None:
        if self.error is not None:
            raise self.error

    def _hold(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        versions: ChannelVersions,
    ) -> None:
        # A new checkpoint replaces the held one; blobs of every channel that
        # changed since the last stored checkpoint are kept in its new_versions.
        if self.held is not None:
            merged = {**self.held[3], **versions}
            config = self.held[0]
        else:
            merged = dict(versions)
        self.held = (config, checkpoint, metadata, merged)
        self.held_writes = []


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads shared by every run's lane: reused, so a saver's per-thread connections are too."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(8, thread_name_prefix="tether-put")
        return _POOL


class _Lane:
    """A FIFO of one run's writes, drained by one pool thread at a time (strict order)."""

    def __init__(self) -> None:
        self._queue: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._running = False

    def submit(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._queue.append(fn)
            if self._running:
                return  # the draining thread will get to it, after everything before it
            self._running = True
            self._idle.clear()
        _pool().submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    self._idle.set()
                    return
                fn = self._queue.popleft()
            fn()

    def wait(self) -> None:
        self._idle.wait()


class _AsyncLane:
    """The asyncio lane: each write is a task that first awaits the one before (strict order)."""

    def __init__(self) -> None:
        self._last: asyncio.Task[None] | None = None

    def submit(self, fn: Callable[[], Awaitable[None]]) -> None:
        previous = self._last

        async def run() -> None:
            if previous is not None:
                await previous  # never raises: the persister keeps failures
            await fn()

        self._last = asyncio.get_running_loop().create_task(run())

    async def wait(self) -> None:
        if self._last is not None:
            await asyncio.shield(self._last)
            self._last = None

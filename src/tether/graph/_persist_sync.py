# GENERATED FILE: do not edit. Source: src/tether/graph/_persist_async.py
# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.
"""The durability modes (:mod:`._persist`) as one run applies them, through its lane.

``_persist_async.py`` is written by hand; ``_persist_sync.py`` is generated
from it by ``tools/gen_sync.py``. The lanes, which differ, are in
:mod:`._persist`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import ChannelVersions, Checkpoint, CheckpointMetadata, Config
from tether.graph._persist import Durability, _Base, _Lane

__all__ = ["SyncPersister"]


class SyncPersister(_Base):
    """The durability modes for one run, every write through the run's own lane."""

    def __init__(self, saver: BaseCheckpointSaver | None, durability: Durability) -> None:
        super().__init__(saver, durability)
        self._lane = _Lane()

    def _submit(self, write: Callable[[], Any]) -> None:
        def run() -> None:
            if self.error is not None:
                return  # an earlier write failed: never store anything after it
            try:
                write()
            except BaseException as exc:
                self.error = exc

        self._lane.submit(run)

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        versions: ChannelVersions,
    ) -> None:
        saver = self.saver
        if saver is None:
            return
        if self.durability == "sync":
            saver.put(config, checkpoint, metadata, versions)
        elif self.durability == "async":
            self.raise_failure()
            self._submit(lambda: saver.put(config, checkpoint, metadata, versions))
        else:
            self._hold(config, checkpoint, metadata, versions)

    def put_writes(
        self, config: Config, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> None:
        saver = self.saver
        if saver is None:
            return
        batch = list(writes)
        if self.durability == "sync":
            saver.put_writes(config, batch, task_id, task_path)
        elif self.durability == "async":
            with self._lock:  # a sync run's tasks finish on several threads; one at a time
                self._submit(lambda: saver.put_writes(config, batch, task_id, task_path))
        else:
            with self._lock:
                self.held_writes.append((config, batch, task_id, task_path))

    def close(self) -> None:
        """Finish every write; raises the first failure."""
        saver = self.saver
        self._lane.wait()
        self.raise_failure()
        if saver is not None and self.held is not None:
            config, checkpoint, metadata, versions = self.held
            self.held = None
            saver.put(config, checkpoint, metadata, versions)
        if saver is not None:
            for wconfig, batch, tid, path in self.held_writes:
                saver.put_writes(wconfig, batch, tid, path)
            self.held_writes = []

"""Helpers the contract suite drives a saver with; also useful in a backend's own tests."""

from __future__ import annotations

import builtins
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import (
    Checkpoint,
    CheckpointTuple,
    Config,
    StoredWrite,
    empty_checkpoint,
    make_config,
)
from tether.ids import uuid6
from tether.lifecycle import Retention, SweepReport
from tether.threads import ThreadPage

__all__ = [
    "MODES",
    "RECORD_TYPE",
    "UNKNOWN_ID",
    "ContractRecord",
    "Driver",
    "Line",
    "cid",
    "new_checkpoint",
]

#: The two ways every test drives the saver.
MODES = ("sync", "async")

#: A checkpoint id no test ever stores.
UNKNOWN_ID = "1ef00000-0000-6000-8000-000000000000"


@dataclass(frozen=True)
class ContractRecord:
    """A user type for the allowlist test (importable, so it can be rebuilt)."""

    name: str
    when: datetime
    tags: frozenset[str]


RECORD_TYPE = (ContractRecord.__module__, ContractRecord.__qualname__)


def new_checkpoint(
    values: Mapping[str, Any], versions: Mapping[str, Any], **extra: Any
) -> Checkpoint:
    """A checkpoint with a fresh id holding ``values`` at ``versions``."""
    cp = empty_checkpoint()
    cp["id"] = str(uuid6())
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions)
    cp["updated_channels"] = sorted(versions)
    for key, value in extra.items():
        cp[key] = value  # type: ignore[literal-required]
    return cp


def cid(config: Mapping[str, Any]) -> str:
    """The checkpoint id a config names."""
    return str(config["configurable"]["checkpoint_id"])


class Driver:
    """Calls a saver's sync method or awaits its async twin, depending on ``mode``."""

    def __init__(self, saver: BaseCheckpointSaver, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.saver = saver
        self.mode = mode

    def using(self, saver: BaseCheckpointSaver) -> Driver:
        """The same mode over another saver (e.g. a ``with_allowlist`` clone)."""
        return Driver(saver, self.mode)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.saver, name)(*args, **kwargs)
        return await getattr(self.saver, "a" + name)(*args, **kwargs)

    async def put(
        self,
        config: Any,
        checkpoint: Any,
        metadata: Any,
        new_versions: Mapping[str, Any],
    ) -> dict[str, Any]:
        out: dict[str, Any] = await self._call("put", config, checkpoint, metadata, new_versions)
        return out

    async def put_writes(
        self, config: Any, writes: Sequence[Any], task_id: str, task_path: str = ""
    ) -> None:
        await self._call("put_writes", config, writes, task_id, task_path)

    async def get_tuple(self, config: Any) -> CheckpointTuple | None:
        out: CheckpointTuple | None = await self._call("get_tuple", config)
        return out

    async def get(self, config: Config) -> CheckpointTuple:
        """:meth:`get_tuple`, failing the test when nothing is found."""
        tup = await self.get_tuple(config)
        assert tup is not None, f"no checkpoint for {config}"
        return tup

    async def list(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> builtins.list[CheckpointTuple]:
        if self.mode == "sync":
            return list(self.saver.list(config, filter=filter, before=before, limit=limit))
        return [
            t async for t in self.saver.alist(config, filter=filter, before=before, limit=limit)
        ]

    async def ids(self, config: Config | None, **kwargs: Any) -> builtins.list[str]:
        """The checkpoint ids :meth:`list` returns, in order."""
        return [cid(t.config) for t in await self.list(config, **kwargs)]

    async def get_writes(self, config: Any) -> builtins.list[StoredWrite]:
        out: builtins.list[StoredWrite] = await self._call("get_writes", config)
        return out

    async def delete_thread(self, thread_id: str) -> None:
        await self._call("delete_thread", thread_id)

    async def delete_for_runs(self, run_ids: Any) -> None:
        await self._call("delete_for_runs", run_ids)

    async def copy_thread(self, source: str, target: str) -> None:
        await self._call("copy_thread", source, target)

    async def prune(self, thread_ids: Any, *, strategy: str = "keep_latest", keep: int = 1) -> None:
        await self._call("prune", thread_ids, strategy=strategy, keep=keep)

    async def threads(self, **kwargs: Any) -> ThreadPage:
        out: ThreadPage = await self._call("threads", **kwargs)
        return out

    async def sweep(self, **kwargs: Any) -> SweepReport:
        out: SweepReport = await self._call("sweep", **kwargs)
        return out

    async def set_retention(self, thread_id: str, policy: Retention | None) -> None:
        await self._call("set_retention", thread_id, policy)

    async def get_retention(self, thread_id: str) -> Retention | None:
        out: Retention | None = await self._call("get_retention", thread_id)
        return out


class Line:
    """Checkpoints in one (thread, ns), each the child of the last, as a graph loop puts them.

    :meth:`step` bumps the versions of the changed channels, sends only those in
    ``new_versions`` and remembers what every checkpoint should read back.
    """

    def __init__(
        self,
        driver: Driver,
        thread_id: str,
        ns: str = "",
        *,
        config: dict[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        versions: Mapping[str, Any] | None = None,
    ) -> None:
        self.driver = driver
        self.thread_id = thread_id
        self.ns = ns
        self.config: dict[str, Any] = config or make_config(thread_id, ns)
        self.values: dict[str, Any] = copy.deepcopy(dict(values or {}))
        self.versions: dict[str, Any] = dict(versions or {})
        self.configs: list[dict[str, Any]] = []
        #: checkpoint id -> the channel values / versions it must read back
        self.expected: dict[str, dict[str, Any]] = {}
        self.versions_at: dict[str, dict[str, Any]] = {}

    @property
    def ids(self) -> list[str]:
        return [cid(c) for c in self.configs]

    async def step(
        self,
        changes: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        clear: Sequence[str] = (),
    ) -> dict[str, Any]:
        saver = self.driver.saver
        new: dict[str, Any] = {}
        for channel, value in (changes or {}).items():
            new[channel] = saver.get_next_version(self.versions.get(channel), None)
            self.values[channel] = value
        for channel in clear:
            new[channel] = saver.get_next_version(self.versions.get(channel), None)
            self.values.pop(channel, None)
        self.versions.update(new)
        cp = new_checkpoint(self.values, self.versions)
        cfg = await self.driver.put(self.config, cp, dict(metadata or {}), new)
        self.config = cfg
        self.configs.append(cfg)
        self.expected[cid(cfg)] = copy.deepcopy(self.values)
        self.versions_at[cid(cfg)] = dict(self.versions)
        return cfg

    async def steps(self, n: int, metadata: Mapping[str, Any] | None = None) -> list[str]:
        """``n`` steps, each appending to ``messages`` and setting ``count``; returns ids."""
        out = []
        for _ in range(n):
            i = len(self.configs)
            messages = [*self.values.get("messages", []), f"m{i}"]
            out.append(cid(await self.step({"messages": messages, "count": i}, metadata)))
        return out

    def fork(self, config: Mapping[str, Any]) -> Line:
        """A new line continuing from ``config`` (an earlier checkpoint of this line)."""
        at = cid(config)
        return Line(
            self.driver,
            self.thread_id,
            self.ns,
            config=dict(config),
            values=self.expected[at],
            versions=self.versions_at[at],
        )

    async def check(self, driver: Driver | None = None, thread_id: str | None = None) -> None:
        """Every checkpoint of the line reads back its own values."""
        d = driver or self.driver
        for at, values in self.expected.items():
            tup = await d.get(make_config(thread_id or self.thread_id, self.ns, at))
            assert tup.checkpoint["channel_values"] == values, at


# Metadata keys the contract's filter tests filter on: with encryption on,
# every other metadata key is sealed and a filter on it is refused (#17).
_FILTERED_KEYS = (
    "parity",
    "user",
    "n",
    "k",
    "key",
    "x",
    "nested",
    "a",
    "weird",
    "score",
    "missing",
)


def contract_encryption() -> Any:
    """An :class:`~tether.encryption.Encryption` to run the contract suite with (#17).

    Two fixed test keys (the second one only reads), metadata sealed except
    the keys the suite's filter tests name. Not for production: the keys are public.
    """
    from tether.encryption import Encryption
    from tether.testing._contract import INJECTION_KEYS

    return Encryption(
        {"contract-a": b"\x01" * 32, "contract-b": b"\x02" * 32},
        clear_metadata=[*_FILTERED_KEYS, *INJECTION_KEYS],
    )

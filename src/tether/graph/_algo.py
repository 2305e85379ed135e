"""The Pregel algorithm without I/O: which tasks run, how their writes become a checkpoint.

One superstep, as in the chapter:

1. :func:`prepare_tasks` — ``Send`` packets in the ``__pregel_tasks`` topic
   become *push* tasks; a node becomes a *pull* task when one of the channels
   it triggers on is non-empty and has a version newer than the one recorded
   for it in ``versions_seen``. Only nodes listening to ``updated_channels``
   (the channels the previous step changed) are examined.
2. The loop runs the tasks (in parallel) and collects each task's writes.
3. :func:`apply_writes` — barriers the tasks fired on are used up; the writes
   are applied in task-path order (not finish order), so the result is
   deterministic; every channel that changed gets the version after the
   highest current one (``saver.get_next_version``); the channels nobody wrote
   are told a step passed (edge triggers and the send topic clear themselves).
4. :func:`create_checkpoint` snapshots the channels into a v4
   :class:`~tether.checkpoint.Checkpoint`.

Task ids are a hash of (checkpoint id, namespace, step, node, path), so the
tasks prepared again from the same checkpoint after a crash or an interrupt
have the same ids, and the pending writes saved for them can be matched and
replayed instead of running the node again.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tether.checkpoint import (
    CHECKPOINT_VERSION,
    ERROR,
    INTERRUPT,
    RESUME,
    SCHEDULED,
    TASKS,
    ChannelVersion,
    ChannelVersions,
    Checkpoint,
    PendingWrite,
    ns_join,
)
from tether.graph._channels import MISSING, Channel, Ephemeral, Topic
from tether.graph._types import GraphInterrupt, Interrupt, RetryPolicy
from tether.ids import uuid6

if TYPE_CHECKING:
    from tether.base import BaseCheckpointSaver
    from tether.graph._state import StateSchema

__all__ = [
    "NO_WRITES",
    "TASKS",
    "NodeSpec",
    "Program",
    "Task",
    "TaskContext",
    "apply_writes",
    "create_checkpoint",
    "prepare_tasks",
    "restore_channels",
]


NO_WRITES = "__no_writes__"
"""Marker write of a task that finished without writing anything (so it counts as done)."""

SPECIAL = frozenset({ERROR, INTERRUPT, RESUME, SCHEDULED})


def branch_channel(node: str) -> str:
    """The trigger channel an edge writes to start ``node``."""
    return f"branch:to:{node}"


# --- the compiled program ----------------------------------------------------------

Writer = Callable[[Mapping[str, Any], Any], list[tuple[str, Any]]]
"""Edges of a node: given the state after the node's update and its return value, more writes."""


@dataclass(slots=True)
class NodeSpec:
    name: str
    func: Callable[..., Any]
    triggers: list[str]
    is_async: bool = False
    retry: RetryPolicy | None = None
    input_channel: str | None = None  # read this channel instead of the state (START)
    subgraph: Any = None  # a CompiledStateGraph used as this node
    wants_config: bool = False  # declared as fn(state, config)
    writers: list[Writer] = field(default_factory=list)


@dataclass(slots=True)
class Program:
    """What ``StateGraph.compile`` produces for the loop: channels, nodes, triggers."""

    schema: StateSchema
    channel_factories: dict[str, Callable[[], Channel]]
    nodes: dict[str, NodeSpec]
    trigger_to_nodes: dict[str, list[str]]

    def new_channels(self) -> dict[str, Channel]:
        return {name: make() for name, make in self.channel_factories.items()}


# --- tasks -----------------------------------------------------------------------


def task_id(checkpoint_id: str, ns: str, step: int, name: str, path: tuple[Any, ...]) -> str:
    raw = f"{checkpoint_id}\x00{ns}\x00{step}\x00{name}\x00{path!r}".encode()
    h = hashlib.blake2b(raw, digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def interrupt_id(task_ns: str) -> str:
    """The id of the interrupts raised by the task with namespace ``task_ns``."""
    return hashlib.blake2b(task_ns.encode(), digest_size=16).hexdigest()


@dataclass(slots=True)
class Task:
    """One node execution of a superstep."""

    id: str
    name: str
    path: tuple[Any, ...]
    input: Any
    triggers: list[str]
    node: NodeSpec
    ns: str
    writes: list[tuple[str, Any]] = field(default_factory=list)
    done: bool = False  # writes present (run now or replayed from pending writes)


def prepare_tasks(
    program: Program,
    checkpoint: Checkpoint,
    channels: Mapping[str, Channel],
    step: int,
    parent_ns: str,
) -> list[Task]:
    """The tasks of the next superstep, in path order (see the module docstring)."""
    cid = checkpoint["id"]
    tasks: list[Task] = []
    sends = channels[TASKS].get() if TASKS in channels else MISSING
    if sends is not MISSING:
        for idx, send in enumerate(sends):
            node = program.nodes.get(send.node)
            if node is None:
                continue
            path: tuple[Any, ...] = ("push", idx)
            tid = task_id(cid, parent_ns, step, send.node, path)
            tasks.append(
                Task(tid, send.node, path, send.arg, [], node, ns_join(parent_ns, send.node, tid))
            )
    versions = checkpoint["channel_versions"]
    seen_all = checkpoint["versions_seen"]
    updated = checkpoint.get("updated_channels")
    if updated is None:
        candidates: Iterable[str] = program.nodes
    else:
        names = {n for ch in updated for n in program.trigger_to_nodes.get(ch, ())}
        candidates = [n for n in program.nodes if n in names]
    state_view: dict[str, Any] | None = None
    for name in candidates:
        node = program.nodes[name]
        seen = seen_all.get(name, {})
        fired = [
            ch
            for ch in node.triggers
            if channels[ch].is_available() and _newer(versions.get(ch), seen.get(ch))
        ]
        if not fired:
            continue
        if node.input_channel is not None:
            value = channels[node.input_channel].get()
        else:
            if state_view is None:
                state_view = read_state(program, channels)
            value = program.schema.node_input(state_view)
        path = ("pull", name)
        tid = task_id(cid, parent_ns, step, name, path)
        tasks.append(Task(tid, name, path, value, fired, node, ns_join(parent_ns, name, tid)))
    tasks.sort(key=lambda t: _path_key(t.path))
    return tasks


def _path_key(path: tuple[Any, ...]) -> tuple[int, str, int]:
    kind, ref = path
    return (0, str(ref), 0) if kind == "pull" else (1, "", int(ref))


def _newer(version: ChannelVersion | None, seen: ChannelVersion | None) -> bool:
    if version is None:
        return False
    if seen is None:
        return True
    if type(version) is not type(seen):
        return str(version) > str(seen)
    return version > seen  # type: ignore[operator]


def read_state(program: Program, channels: Mapping[str, Channel]) -> dict[str, Any]:
    """The state values (schema keys that hold something)."""
    out = {}
    for key in program.schema.keys:
        ch = channels[key]
        if ch.is_available():
            out[key] = ch.get()
    return out


def state_after(
    program: Program, channels: Mapping[str, Channel], writes: Sequence[tuple[str, Any]]
) -> dict[str, Any]:
    """The state a node's edges see: the current state with that node's own writes applied."""
    state = read_state(program, channels)
    grouped: dict[str, list[Any]] = defaultdict(list)
    for key, value in writes:
        if key in program.schema.hints:
            grouped[key].append(value)
    for key, values in grouped.items():
        ch = channels[key].copy()
        ch.update(values)
        if ch.is_available():
            state[key] = ch.get()
    return state


# --- applying writes -----------------------------------------------------------------


def apply_writes(
    checkpoint: Checkpoint,
    channels: Mapping[str, Channel],
    tasks: Sequence[Task],
    next_version: Callable[[ChannelVersion | None], ChannelVersion],
) -> set[str]:
    """Apply the tasks' writes to the channels; returns the channels that changed.

    Mutates ``checkpoint["channel_versions"]`` and ``["versions_seen"]``.
    """
    versions = checkpoint["channel_versions"]
    for task in tasks:
        if task.triggers:
            seen = checkpoint["versions_seen"].setdefault(task.name, {})
            for ch in task.triggers:
                if ch in versions:
                    seen[ch] = versions[ch]
    top = max(versions.values(), default=None, key=_version_key)
    bump = next_version(top)
    # Barriers a task fired on are used up by running it.
    for ch in {ch for task in tasks for ch in task.triggers}:
        if ch in channels and channels[ch].consume():
            versions[ch] = bump

    grouped: dict[str, list[Any]] = defaultdict(list)
    for task in sorted(tasks, key=lambda t: _path_key(t.path)):
        for ch, value in task.writes:
            if ch in channels:
                grouped[ch].append(value)

    updated: set[str] = set()
    for ch, values in grouped.items():
        if channels[ch].update(values):
            versions[ch] = bump
            if channels[ch].is_available():
                updated.add(ch)
    # A step passed: triggers and the send topic that nobody rewrote clear themselves.
    for name, ch_obj in channels.items():
        if name not in grouped and isinstance(ch_obj, (Ephemeral, Topic)) and ch_obj.update([]):
            versions[name] = bump
    return updated


def _version_key(v: ChannelVersion) -> tuple[int, str]:
    if isinstance(v, str):
        head, _, tail = v.partition(".")
        return (int(head), tail)
    return (int(v), "")


def restore_channels(program: Program, checkpoint: Checkpoint) -> dict[str, Channel]:
    channels = program.new_channels()
    for key, value in checkpoint["channel_values"].items():
        if key in channels:
            channels[key].restore(value)
    return channels


def create_checkpoint(
    previous: Checkpoint,
    channels: Mapping[str, Channel],
    step: int,
    updated: Iterable[str] | None,
    *,
    checkpoint_id: str | None = None,
) -> Checkpoint:
    """A new checkpoint holding the channels' values (``checkpoint_id`` reuses an id)."""
    return Checkpoint(
        v=CHECKPOINT_VERSION,
        id=checkpoint_id or str(uuid6(clock_seq=step)),
        ts=datetime.now(UTC).isoformat(),
        channel_values={
            k: v for k, ch in channels.items() if (v := ch.checkpoint()) is not MISSING
        },
        channel_versions=dict(previous["channel_versions"]),
        versions_seen={k: dict(v) for k, v in previous["versions_seen"].items()},
        updated_channels=sorted(updated) if updated is not None else None,
    )


def new_versions(before: ChannelVersions, after: ChannelVersions) -> ChannelVersions:
    """The channels whose version changed since the last stored checkpoint."""
    return {k: v for k, v in after.items() if before.get(k) != v}


# --- pending writes ---------------------------------------------------------------------


@dataclass(slots=True)
class PendingState:
    """The pending writes of one checkpoint, read by task."""

    done: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)
    interrupts: dict[str, list[Interrupt]] = field(default_factory=dict)
    resume: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    @classmethod
    def read(cls, writes: Iterable[PendingWrite]) -> PendingState:
        out = cls()
        for tid, ch, value in writes:
            if ch == ERROR:
                out.errors[tid] = value
            elif ch == INTERRUPT:
                out.interrupts[tid] = [Interrupt(i["value"], i["id"]) for i in value]
            elif ch == RESUME:
                out.resume[tid] = {k: list(v) for k, v in value.items()}
            elif ch not in SPECIAL:
                out.done.setdefault(tid, []).append((ch, value))
        return out

    def add(self, task_id_: str, writes: Sequence[tuple[str, Any]]) -> None:
        for ch, value in writes:
            if ch == ERROR:
                self.errors[task_id_] = value
            elif ch == INTERRUPT:
                self.interrupts[task_id_] = [Interrupt(i["value"], i["id"]) for i in value]
            elif ch == RESUME:
                self.resume[task_id_] = value
            else:
                self.done.setdefault(task_id_, []).append((ch, value))

    def open_interrupts(self) -> dict[str, list[Interrupt]]:
        """Interrupts of tasks that have not finished since, by task id."""
        return {tid: its for tid, its in self.interrupts.items() if tid not in self.done}


def encode_interrupts(interrupts: Sequence[Interrupt]) -> list[dict[str, Any]]:
    return [{"value": i.value, "id": i.id} for i in interrupts]


def encode_error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__qualname__, "message": str(exc)}


# --- what a running node can reach ----------------------------------------------------------


@dataclass(slots=True)
class TaskContext:
    """Set in a context variable while a node runs: what ``interrupt()`` and subgraphs use."""

    task: Task
    resume: dict[str, list[Any]]
    saver: BaseCheckpointSaver | None
    thread_id: str | None
    durability: str
    parents: dict[str, str]  # namespace -> checkpoint id of every enclosing graph
    replaying: bool = False  # the parent re-runs a past step: subgraphs start afresh
    counter: int = 0

    def next_resume(self, value: Any) -> Any:
        iid = interrupt_id(self.task.ns)
        answers = self.resume.get(iid, [])
        index = self.counter
        self.counter += 1
        if index < len(answers):
            return answers[index]
        raise GraphInterrupt([Interrupt(value, iid)])

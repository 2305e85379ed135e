"""The run loop: load a checkpoint, then superstep after superstep until nothing triggers.

::

    load the latest (or the addressed) checkpoint and its pending writes
    apply the input: new input -> an "input" checkpoint (step -1 on a new thread)
                     Command(resume=...) -> RESUME writes for the interrupted tasks
                     None -> continue where the thread stopped
    while tasks := prepare_tasks(...):
        stop if the step budget (recursion_limit) is spent, or on interrupt_before
        run the tasks in parallel; tasks whose writes were already saved for this
        checkpoint are not run, their writes are replayed; each finished task's
        writes are saved at once (put_writes)
        stop if a task raised (ERROR write) or interrupted (INTERRUPT write)
        apply the writes, create the next "loop" checkpoint, put it
        stop on interrupt_after
    exit: finish the background writes (exit mode: the one put)

:class:`Run` holds the state of one run and every step that does no I/O.
The two thin drivers that do the I/O are ``run_async`` (``_loop_async.py``,
written by hand) and ``run_sync`` (``_loop_sync.py``, generated from it by
``tools/gen_sync.py``); each talks to the saver through its
:mod:`~tether.graph._persist` lane. What really differs between them is
here: :class:`TaskRunner` runs a step's tasks on threads, and
:class:`AsyncTaskRunner` as asyncio tasks (sync nodes in worker threads).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tether.checkpoint import (
    ERROR,
    INTERRUPT,
    Address,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)
from tether.errors import ConfigError
from tether.graph._algo import (
    NO_WRITES,
    TASKS,
    PendingState,
    Task,
    TaskContext,
    apply_writes,
    branch_channel,
    create_checkpoint,
    encode_error,
    encode_interrupts,
    new_versions,
    prepare_tasks,
    read_state,
    restore_channels,
    state_after,
)
from tether.graph._persist import Durability
from tether.graph._types import (
    END,
    START,
    Command,
    GraphInterrupt,
    GraphRecursionError,
    Interrupt,
    Send,
)

if TYPE_CHECKING:
    from tether.base import BaseCheckpointSaver
    from tether.graph._pregel import CompiledStateGraph

__all__ = [
    "AsyncTaskRunner",
    "Run",
    "TaskRunner",
    "failure_writes",
    "goto_writes",
    "node_args",
    "stream_modes",
    "task_path",
]

INTERRUPT_SEEN = INTERRUPT  # versions_seen key: channel versions at the last interrupt


class Run:
    """One invocation of a compiled graph: the loop's bookkeeping, no I/O."""

    def __init__(
        self,
        graph: CompiledStateGraph,
        config: Mapping[str, Any] | None,
        *,
        saver: BaseCheckpointSaver | None,
        durability: Durability,
        parents: dict[str, str] | None = None,
    ) -> None:
        self.graph = graph
        self.program = graph.program
        self.saver = saver
        self.durability = durability
        config = dict(config or {})
        self.user_config = config
        addr = Address.optional(config)
        if saver is not None and addr is None:
            raise ConfigError(
                "this graph has a checkpointer, so every run needs a thread: pass "
                'config={"configurable": {"thread_id": "..."}}'
            )
        self.thread_id = addr.thread_id if addr else None
        self.ns = addr.checkpoint_ns if addr else ""
        self.requested_id = addr.checkpoint_id if addr else None
        limit = config.get("recursion_limit", 25)
        if not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"recursion_limit must be a positive int, got {limit!r}")
        self.recursion_limit = limit
        self.parents = dict(parents or {})
        self.metadata_extra = dict(config.get("metadata") or {})
        # the checkpoint being built on and the config of the last one stored
        self.checkpoint: Checkpoint = empty_checkpoint()
        self.metadata: CheckpointMetadata = {}
        self.saved_config: dict[str, Any] | None = None
        self.stored_versions: dict[str, Any] = {}
        self.channels = self.program.new_channels()
        self.step = -2  # a new thread's input checkpoint is step -1, its first loop step 0
        self.stop = 0
        self.pending = PendingState()
        self.tasks: list[Task] = []
        self.interrupts: list[Interrupt] = []
        self.errors: dict[str, BaseException] = {}  # task id -> what it raised
        self.interrupted_by: str | None = None  # "before" / "after" / "node"
        self.replaying = False
        self.as_subgraph = False  # run by a task of a parent graph
        self.fresh = False  # as a subgraph: start empty even if the namespace has checkpoints

    # --- loading and input -----------------------------------------------------

    def address(self, checkpoint_id: str | None = None) -> dict[str, Any]:
        # without a checkpointer there is no thread; the config is then never stored
        return Address(self.thread_id or "", self.ns, checkpoint_id).to_config()

    def load(self, saved: CheckpointTuple | None, latest_id: str | None) -> None:
        """Start from ``saved``; its pending writes count only if it is the thread's latest."""
        if saved is None:
            if self.requested_id is not None:
                from tether.errors import CheckpointNotFound

                raise CheckpointNotFound(
                    f"thread {self.thread_id!r} has no checkpoint {self.requested_id!r} "
                    f"in namespace {self.ns!r}; list them with get_state_history()"
                )
            return
        self.checkpoint = saved.checkpoint
        self.metadata = saved.metadata
        self.saved_config = self.address(saved.checkpoint["id"])
        self.stored_versions = dict(saved.checkpoint["channel_versions"])
        self.channels = restore_channels(self.program, saved.checkpoint)
        self.step = int(saved.metadata.get("step", -2))
        if latest_id is None or latest_id == saved.checkpoint["id"]:
            self.pending = PendingState.read(saved.pending_writes or [])
        else:
            # Re-running a past checkpoint: a new branch, so its saved task results
            # are not replayed and subgraphs run again instead of continuing.
            self.replaying = True

    def prepare_input(self, input: Any) -> list[tuple[str, Any]] | None:
        """New input: the writes of the "input" step; resume/continue: ``None``."""
        if isinstance(input, Command):
            if input.update is not None or input.goto:
                raise ConfigError(
                    "Command(update=..., goto=...) is what a node returns; resume a run with "
                    "Command(resume=value), or use update_state() to change the state"
                )
            return None
        if input is None:
            if self.saved_config is None:
                raise ConfigError(
                    f"thread {self.thread_id!r} has no checkpoint to continue from; "
                    "pass an input to start it"
                )
            return None
        self.pending = PendingState()  # a new input abandons the unfinished step
        return [(START, input)]

    def resume_writes(self, command: Command) -> list[tuple[str, dict[str, list[Any]]]]:
        """``Command(resume=...)`` -> ``(task_id, resume map)`` per interrupted task."""
        open_ = self.pending.open_interrupts()
        owner = {i.id: tid for tid, its in open_.items() for i in its}
        if not owner:
            raise ConfigError(
                f"thread {self.thread_id!r} has no pending interrupt to resume; "
                "invoke with an input (or None) instead"
            )
        value = command.resume
        if isinstance(value, Mapping) and value and all(k in owner for k in value):
            answers = dict(value)
        elif len(owner) == 1:
            answers = {next(iter(owner)): value}
        else:
            raise ConfigError(
                f"thread {self.thread_id!r} has {len(owner)} pending interrupts; resume them "
                f"by id with Command(resume={{id: value, ...}}); ids: {', '.join(owner)}"
            )
        out: dict[str, dict[str, list[Any]]] = {}
        for iid, answer in answers.items():
            tid = owner[iid]
            current = out.get(tid) or {
                k: list(v) for k, v in self.pending.resume.get(tid, {}).items()
            }
            current.setdefault(iid, []).append(answer)
            out[tid] = current
        for tid, resume in out.items():
            self.pending.resume[tid] = resume
        return list(out.items())

    def forwarded_resume(self, resume: Mapping[str, list[Any]]) -> list[tuple[str, Any]]:
        """A subgraph's share of its parent task's resume map (full answer lists by id)."""
        open_ = self.pending.open_interrupts()
        owner = {i.id: tid for tid, its in open_.items() for i in its}
        out: dict[str, dict[str, list[Any]]] = {}
        for iid, answers in resume.items():
            tid = owner.get(iid)
            if tid is None:
                continue
            current = out.get(tid) or {
                k: list(v) for k, v in self.pending.resume.get(tid, {}).items()
            }
            if current.get(iid) != list(answers):
                current[iid] = list(answers)
                out[tid] = current
        for tid, r in out.items():
            self.pending.resume[tid] = r
        return list(out.items())

    def mark_resuming(self) -> None:
        """Continuing a stopped run: interrupt_before/after must not fire again at once."""
        self.checkpoint["versions_seen"][INTERRUPT_SEEN] = dict(self.checkpoint["channel_versions"])

    def input_step(self, writes: list[tuple[str, Any]]) -> tuple[Any, ...]:
        """Apply the input writes; returns the (config, checkpoint, metadata, versions) to put."""
        task = Task("", START, ("input", 0), None, [], self.program.nodes[START], "", writes)
        updated = apply_writes(self.checkpoint, self.channels, [task], self._next_version)
        self.step += 1
        return self._next_checkpoint("input", updated)

    def _next_version(self, current: Any) -> Any:
        if self.saver is not None:
            return self.saver.get_next_version(current)
        return (int(current) if current is not None else 0) + 1

    def _next_checkpoint(self, source: str, updated: set[str] | None) -> tuple[Any, ...]:
        self.checkpoint = create_checkpoint(self.checkpoint, self.channels, self.step, updated)
        metadata: CheckpointMetadata = {
            **self.metadata_extra,  # type: ignore[typeddict-item]
            "source": source,  # type: ignore[typeddict-item]
            "step": self.step,
            "parents": dict(self.parents),
        }
        self.metadata = metadata
        versions = new_versions(self.stored_versions, self.checkpoint["channel_versions"])
        self.stored_versions = dict(self.checkpoint["channel_versions"])
        parent = self.saved_config or self.address()
        self.saved_config = self.address(self.checkpoint["id"])
        self.pending = PendingState()
        # The saver gets its own dicts: the next step mutates versions in place, and in
        # async mode the put runs later. Only the changed channels' values are stored.
        cp = self.checkpoint
        values = cp["channel_values"]
        stored = Checkpoint(
            v=cp["v"],
            id=cp["id"],
            ts=cp["ts"],
            channel_values={k: values[k] for k in versions if k in values},
            channel_versions=dict(cp["channel_versions"]),
            versions_seen={k: dict(v) for k, v in cp["versions_seen"].items()},
            updated_channels=cp["updated_channels"],
        )
        return (parent, stored, metadata, versions)

    # --- one superstep ------------------------------------------------------------

    def next_tasks(self, interrupt_before: Sequence[str]) -> list[Task] | None:
        """The tasks to run now, or ``None`` when the run is over (done or interrupted)."""
        tasks = prepare_tasks(self.program, self.checkpoint, self.channels, self.step + 1, self.ns)
        if not tasks:
            return None
        if self.step + 1 > self.stop:
            raise GraphRecursionError(
                f"thread {self.thread_id!r} reached the recursion limit of "
                f"{self.recursion_limit} supersteps without finishing; raise it with "
                'config={"recursion_limit": N} or check the graph for a cycle without an exit'
            )
        if interrupt_before and self._should_interrupt(tasks, interrupt_before):
            self.tasks = tasks
            self.interrupted_by = "before"
            return None
        for task in tasks:
            done = self.pending.done.get(task.id)
            if done is not None:
                task.writes = list(done)
                task.done = True
        self.tasks = tasks
        return tasks

    def _should_interrupt(self, tasks: Sequence[Task], nodes: Sequence[str]) -> bool:
        seen = self.checkpoint["versions_seen"].get(INTERRUPT_SEEN, {})
        changed = any(
            seen.get(ch) is None or str(v) > str(seen[ch])
            for ch, v in self.checkpoint["channel_versions"].items()
        )
        return changed and any(t.name in nodes or "*" in nodes for t in tasks)

    def context(self, task: Task) -> TaskContext:
        parents = dict(self.parents)
        parents[self.ns] = self.checkpoint["id"]
        return TaskContext(
            task=task,
            resume=self.pending.resume.get(task.id, {}),
            saver=self.saver,
            thread_id=self.thread_id,
            durability=self.durability,
            parents=parents,
            replaying=self.replaying,
        )

    def node_config(self, task: Task) -> dict[str, Any]:
        """What a node declared as ``fn(state, config)`` receives."""
        config = dict(self.user_config)
        config["configurable"] = {
            **(self.user_config.get("configurable") or {}),
            "thread_id": self.thread_id,
            "checkpoint_ns": task.ns,
            "task_id": task.id,
            "step": self.step + 1,
            "node": task.name,
        }
        return config

    def task_writes(self, task: Task, ret: Any) -> list[tuple[str, Any]]:
        """A node's return value (dict, Command or None) and its edges as writes."""
        schema = self.program.schema
        node = task.node
        goto: list[Any] = []
        if isinstance(ret, Command):
            update = ret.update
            goto = [ret.goto] if isinstance(ret.goto, (str, Send)) else list(ret.goto)
        else:
            update = ret
        if node.subgraph is not None and isinstance(update, Mapping):
            update = {k: v for k, v in update.items() if k in schema.hints}
        writes = schema.read_update(task.name, update)
        if node.writers or goto:
            after = schema.node_input(state_after(self.program, self.channels, writes))
            for writer in node.writers:
                writes.extend(writer(after, ret))
            writes.extend(goto_writes(goto))
        for ch, value in writes:
            if ch not in self.program.channel_factories or (
                ch == TASKS and value.node not in self.program.nodes
            ):
                target = value.node if ch == TASKS else ch.removeprefix("branch:to:")
                raise ConfigError(
                    f"node {task.name!r} routed to unknown node {target!r}; "
                    f"nodes: {', '.join(n for n in self.program.nodes if n != START)}"
                )
        return writes or [(NO_WRITES, None)]

    def record(self, task: Task, writes: list[tuple[str, Any]]) -> None:
        task.writes = writes
        self.pending.add(task.id, writes)

    @property
    def failure(self) -> BaseException | None:
        """The error of the first failed task in path order (deterministic)."""
        for t in self.tasks:
            if t.id in self.errors:
                return self.errors[t.id]
        return None

    def finish_step(self, interrupt_after: Sequence[str]) -> tuple[Any, ...] | None:
        """After the tasks ran: stop on errors/interrupts, else the next checkpoint to put."""
        failed = [t for t in self.tasks if any(ch == ERROR for ch, _ in t.writes)]
        stopped = [t for t in self.tasks if any(ch == INTERRUPT for ch, _ in t.writes)]
        if failed or stopped:
            for t in stopped:
                self.interrupts.extend(self.pending.interrupts.get(t.id, []))
            if stopped:
                self.interrupted_by = "node"
            return None
        updated = apply_writes(self.checkpoint, self.channels, self.tasks, self._next_version)
        self.step += 1
        put = self._next_checkpoint("loop", updated)
        if interrupt_after and any(t.name in interrupt_after for t in self.tasks):
            self.interrupted_by = "after"
        return put

    def updates(self) -> list[dict[str, Any]]:
        """One ``{node: update}`` chunk per task that finished this step, in path order."""
        out: list[dict[str, Any]] = []
        for t in self.tasks:
            if t.name == START or any(ch in (ERROR, INTERRUPT) for ch, _ in t.writes):
                continue
            vals = {ch: v for ch, v in t.writes if ch in self.program.schema.hints}
            out.append({t.name: vals or None})
        return out

    def output(self) -> dict[str, Any]:
        values = read_state(self.program, self.channels)
        if self.interrupts:
            values["__interrupt__"] = list(self.interrupts)
        return values


def stream_modes(stream_mode: str | Sequence[str]) -> tuple[list[str], bool]:
    """The modes a run yields chunks of, and whether one was named on its own (bare chunks)."""
    modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode)
    for m in modes:
        if m not in ("values", "updates"):
            raise ConfigError(f"stream_mode must be 'values' or 'updates', got {m!r}")
    return modes, isinstance(stream_mode, str)


def goto_writes(goto: Sequence[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for target in goto:
        if isinstance(target, Send):
            out.append((TASKS, target))
        elif target != END:
            out.append((branch_channel(target), None))
    return out


# --- running one task ---------------------------------------------------------------


def failure_writes(exc: BaseException) -> list[tuple[str, Any]]:
    if isinstance(exc, GraphInterrupt):
        return [(INTERRUPT, encode_interrupts(exc.interrupts))]
    return [(ERROR, encode_error(exc))]


def node_args(run: Run, task: Task) -> tuple[Any, ...]:
    """What the node function is called with: the state, and the config if it declares one."""
    if task.node.wants_config:
        return (task.input, run.node_config(task))
    return (task.input,)


def task_path(task: Task) -> str:
    return f"{task.path[0]}:{task.path[1]}"


class TaskRunner:
    """How a sync run runs a step's tasks: one inline, several on threads of a pool of its own."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def run(self, work: Callable[[Task], None], tasks: Sequence[Task]) -> None:
        if len(tasks) == 1:
            work(tasks[0])
        elif tasks:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(thread_name_prefix="tether-task")
            futures = [self._pool.submit(contextvars.copy_context().run, work, t) for t in tasks]
            for f in futures:
                f.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class AsyncTaskRunner:
    """How an async run runs a step's tasks: as asyncio tasks, all awaited."""

    async def run(self, work: Callable[[Task], Awaitable[None]], tasks: Sequence[Task]) -> None:
        if tasks:
            await asyncio.gather(*(work(t) for t in tasks))

    def close(self) -> None:
        """Nothing to release (the sync runner's pool is what needs closing)."""

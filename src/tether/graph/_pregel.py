"""``CompiledStateGraph``: run a graph, read its state, rewind and fork it.

Running is in :mod:`tether.graph._loop`. This module adds what a caller does
between runs, all expressed as checkpoints (S6):

* ``get_state`` — the values of a checkpoint and the tasks its next superstep
  would run (with their saved results, errors and interrupts);
* ``get_state_history`` — the same for every checkpoint of the thread,
  newest first (``filter``, ``before``, ``limit`` as the saver's ``list``);
* ``update_state(config, values, as_node=...)`` — a new ``source="update"``
  checkpoint on top of the addressed one, as if node ``as_node`` had
  returned ``values`` (its edges fire); ``as_node="__copy__"`` puts a
  ``source="fork"`` copy beside it instead. Either way the old checkpoints are
  untouched, and invoking from the new one continues on a new branch.

At compile time the saver is swapped for ``saver.with_allowlist(...)`` with
the state schema's classes (and those of its subgraphs), so user types stored
in the state round-trip under the strict serializer without configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import INTERRUPT, Address, CheckpointTuple, Config, ns_split
from tether.errors import CheckpointNotFound, ConfigError
from tether.graph._algo import (
    PendingState,
    Program,
    Task,
    apply_writes,
    create_checkpoint,
    prepare_tasks,
    read_state,
    restore_channels,
)
from tether.graph._loop import Run
from tether.graph._persist import Durability, check_durability
from tether.graph._pregel_async import _AsyncPregel
from tether.graph._pregel_sync import _Pregel
from tether.graph._state import as_dict, schema_types
from tether.graph._types import (
    START,
    Send,
    StateSnapshot,
    TaskInfo,
    current_task,
)

__all__ = ["CompiledStateGraph"]

COPY = "__copy__"


def _program_types(program: Program, out: list[type]) -> None:
    out.extend(schema_types(program.schema))
    for node in program.nodes.values():
        if node.subgraph is not None:
            _program_types(node.subgraph.program, out)


class CompiledStateGraph(_Pregel, _AsyncPregel):
    """A runnable graph; made by :meth:`StateGraph.compile`."""

    def __init__(
        self,
        program: Program,
        checkpointer: BaseCheckpointSaver | None,
        *,
        interrupt_before: list[str],
        interrupt_after: list[str],
        name: str,
    ) -> None:
        self.program = program
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.name = name
        if checkpointer is not None:
            types: list[type] = [Send]
            _program_types(program, types)
            checkpointer = checkpointer.with_allowlist(
                sorted({(t.__module__, t.__qualname__) for t in types})
            )
        self.checkpointer = checkpointer

    # --- running -----------------------------------------------------------------

    def _new_run(
        self, config: Config | None, durability: str | None
    ) -> tuple[Run, dict[str, list[Any]] | None]:
        mode: Durability = check_durability(durability or "async")
        conf = config or {}
        ctx = current_task.get()
        has_thread = Address.optional(conf) is not None
        if ctx is not None and not has_thread:
            # Called from inside a node (or run as a node): a subgraph of that task.
            saver = self.checkpointer or ctx.saver
            sub_conf: dict[str, Any] = dict(conf)
            if ctx.thread_id is not None and saver is not None:
                sub_conf["configurable"] = {
                    "thread_id": ctx.thread_id,
                    "checkpoint_ns": ctx.task.ns,
                }
            else:
                saver = None
            run = Run(
                self,
                sub_conf,
                saver=saver,
                durability=check_durability(durability or ctx.durability),
                parents=ctx.parents,
            )
            run.as_subgraph = True
            # a past step re-run: the subgraph starts again instead of continuing
            run.fresh = ctx.replaying
            return run, ctx.resume
        return Run(self, conf, saver=self.checkpointer, durability=mode), None

    def _subgraph_input(self, input: Any) -> Any:
        """What a subgraph run as a node receives: the parent's state, narrowed to its keys."""
        if input is None:
            return None
        return {k: v for k, v in as_dict(input).items() if k in self.program.schema.hints}

    # --- reading state -------------------------------------------------------------

    def _saver(self) -> BaseCheckpointSaver:
        if self.checkpointer is None:
            raise ConfigError("this graph has no checkpointer; compile(checkpointer=...) first")
        return self.checkpointer

    def _snapshot(
        self, saved: CheckpointTuple, *, latest: bool = True
    ) -> tuple[StateSnapshot, list[Task]]:
        program = self.program
        checkpoint = saved.checkpoint
        channels = restore_channels(program, checkpoint)
        pending = PendingState.read(saved.pending_writes or [])
        addr = Address.from_config(saved.config)
        step = int(saved.metadata.get("step", -1))
        tasks = prepare_tasks(program, checkpoint, channels, step + 1, addr.checkpoint_ns)
        infos = []
        for t in tasks:
            done = pending.done.get(t.id)
            err = pending.errors.get(t.id) if done is None else None
            its = tuple(pending.interrupts.get(t.id, [])) if done is None else ()
            state = None
            if t.node.subgraph is not None:
                state = Address(addr.thread_id, t.ns).to_config()
            infos.append(
                TaskInfo(
                    t.id,
                    t.name,
                    t.path,
                    error=err["message"] if isinstance(err, Mapping) else err,
                    interrupts=its,
                    state=state,
                    result={k: v for k, v in done if k in program.schema.hints}
                    if done is not None
                    else None,
                )
            )
        interrupts = tuple(i for info in infos for i in info.interrupts)
        snap = StateSnapshot(
            values=read_state(program, channels),
            # the latest checkpoint's next excludes tasks already done; history shows all
            next=tuple(info.name for info in infos if info.result is None or not latest),
            config=saved.config,
            metadata=dict(saved.metadata),
            created_at=checkpoint["ts"],
            parent_config=saved.parent_config,
            tasks=tuple(infos),
            interrupts=interrupts,
        )
        return snap, tasks

    @staticmethod
    def _empty(config: Config) -> StateSnapshot:
        return StateSnapshot({}, (), dict(config), None, None, None, ())

    def _owner(self, config: Config) -> CompiledStateGraph:
        """The (sub)graph whose checkpoints live in the namespace ``config`` names."""
        graph = self
        for node, _ in ns_split(Address.from_config(config).checkpoint_ns):
            spec = graph.program.nodes.get(node)
            if spec is None or spec.subgraph is None:
                break  # a subgraph invoked from inside a node function: unknown here
            graph = spec.subgraph._with_saver(self._saver())
        return graph

    def _history_scope(self, config: Config) -> tuple[CompiledStateGraph, Config]:
        """The graph whose snapshots ``config``'s history holds, and the config to list it by."""
        return self._owner(config), _one_namespace(config)

    def _with_saver(self, saver: BaseCheckpointSaver) -> CompiledStateGraph:
        if self.checkpointer is not None:
            return self
        clone = CompiledStateGraph.__new__(CompiledStateGraph)
        clone.__dict__.update(self.__dict__)
        clone.checkpointer = saver
        return clone

    # --- changing state --------------------------------------------------------------

    def _update_plan(
        self, config: Config, saved: CheckpointTuple | None, values: Any, as_node: str | None
    ) -> tuple[Any, ...]:
        """The ``(parent config, checkpoint, metadata, new_versions)`` update_state puts."""
        addr = Address.from_config(config)
        if as_node == COPY:
            if saved is None:
                raise CheckpointNotFound(
                    f"thread {addr.thread_id!r} has no checkpoint to copy; "
                    "pass the config of an existing one"
                )
            step = int(saved.metadata.get("step", -1))
            channels = restore_channels(self.program, saved.checkpoint)
            copy = create_checkpoint(
                saved.checkpoint, channels, step, saved.checkpoint.get("updated_channels")
            )
            copy["channel_values"] = {}
            parent = saved.parent_config or Address(addr.thread_id, addr.checkpoint_ns).to_config()
            metadata = {
                "source": "fork",
                "step": step + 1,
                "parents": dict(saved.metadata.get("parents", {})),
            }
            return (parent, copy, metadata, {})
        run = Run(
            self,
            Address(addr.thread_id, addr.checkpoint_ns).to_config(),
            saver=self.checkpointer,
            durability="sync",
        )
        run.load(saved, None)
        if as_node is None:
            as_node = _last_node(saved)
        node = self.program.nodes.get(as_node)
        if node is None:
            raise ConfigError(
                f"update_state: no node {as_node!r}; nodes: {', '.join(self.program.nodes)}"
            )
        task = Task("update", as_node, ("update", 0), None, [], node, addr.checkpoint_ns)
        task.writes = run.task_writes(task, values)
        changed = apply_writes(run.checkpoint, run.channels, [task], run._next_version)
        # The update is the superstep the pending tasks would have been (edge triggers
        # clear, as in LangGraph), but a full barrier survives it: keep the base's
        # updated channels as candidates, or the next run would not look at its node.
        base: list[str] | None = saved.checkpoint.get("updated_channels") if saved else []
        updated = None if base is None else changed | set(base)
        run.step += 1
        parents = dict(saved.metadata.get("parents", {})) if saved else {}
        run.parents = parents
        return run._next_checkpoint("update", updated)


def _last_node(saved: CheckpointTuple | None) -> str:
    """The node whose trigger was seen at the highest version (the one that ran last)."""
    if saved is None:
        return START
    best: tuple[str, str] | None = None
    for node, seen in saved.checkpoint["versions_seen"].items():
        if node == INTERRUPT or not seen:
            continue
        top = max(str(v) for v in seen.values())
        if best is None or top > best[0]:
            best = (top, node)
    if best is None:
        return START
    return best[1]


def _one_namespace(config: Config) -> Config:
    """``config`` naming its namespace explicitly (``""`` when absent), so ``list`` reads
    that namespace only: a saver lists every namespace of a thread when none is named."""
    conf = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(conf, Mapping) or conf.get("checkpoint_ns") is not None:
        return config
    return {**config, "configurable": {**conf, "checkpoint_ns": ""}}

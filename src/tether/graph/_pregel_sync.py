# GENERATED FILE: do not edit. Source: src/tether/graph/_pregel_async.py
# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.
"""``CompiledStateGraph``'s methods that do I/O: run, read state, update state.

``_pregel_async.py`` is written by hand; ``_pregel_sync.py`` is generated from
it by ``tools/gen_sync.py``, and :class:`~._pregel.CompiledStateGraph`
inherits both, so every sync method and its async twin share one body. The
async methods' short docstrings end in ``# ASYNC``: the string after each is
the sync method's docstring.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether.checkpoint import CheckpointTuple, Config
from tether.graph._algo import Task
from tether.graph._loop import Run, stream_modes
from tether.graph._loop_sync import run_sync
from tether.graph._types import GraphInterrupt, StateSnapshot

if TYPE_CHECKING:
    from tether.base import BaseCheckpointSaver
    from tether.graph._pregel import CompiledStateGraph

__all__ = ["_Pregel"]


class _Pregel:
    if TYPE_CHECKING:
        # What these methods use of CompiledStateGraph (the I/O-free part, in _pregel.py).

        def _new_run(
            self, config: Config | None, durability: str | None
        ) -> tuple[Run, dict[str, list[Any]] | None]: ...
        def _subgraph_input(self, input: Any) -> Any: ...
        def _saver(self) -> BaseCheckpointSaver: ...
        def _owner(self, config: Config) -> CompiledStateGraph: ...
        def _history_scope(self, config: Config) -> tuple[CompiledStateGraph, Config]: ...
        def _snapshot(
            self, saved: CheckpointTuple, *, latest: bool = True
        ) -> tuple[StateSnapshot, list[Task]]: ...
        @staticmethod
        def _empty(config: Config) -> StateSnapshot: ...
        def _update_plan(
            self, config: Config, saved: CheckpointTuple | None, values: Any, as_node: str | None
        ) -> tuple[Any, ...]: ...

    # --- running -----------------------------------------------------------------

    def stream(
        self,
        input: Any,
        config: Config | None = None,
        *,
        stream_mode: str | Sequence[str] = "values",
        durability: str | None = None,
    ) -> Iterator[Any]:
        """Run the graph, yielding chunks of ``stream_mode`` (``"values"``, ``"updates"``).

        With a list of modes, chunks are ``(mode, chunk)`` pairs.
        """
        modes, single = stream_modes(stream_mode)
        run, resume = self._new_run(config, durability)
        for mode, chunk in self._drive(run, input, modes, resume):
            yield chunk if single else (mode, chunk)

    def _drive(
        self, run: Run, input: Any, modes: list[str], resume: dict[str, list[Any]] | None
    ) -> Iterator[tuple[str, Any]]:
        if run.as_subgraph:
            if (
                not run.fresh
                and run.saver is not None
                and run.saver.get_tuple(run.address()) is not None
            ):
                input = None  # the same task again: continue the subgraph's own checkpoints
            else:
                input = self._subgraph_input(input)
        yield from run_sync(run, input, modes, resume)
        if run.as_subgraph and run.interrupted_by:
            raise GraphInterrupt(run.interrupts)

    def invoke(
        self, input: Any, config: Config | None = None, *, durability: str | None = None
    ) -> dict[str, Any]:
        """Run to the end (or to an interrupt); returns the state values.

        When the run stopped on interrupts they are under ``"__interrupt__"``.

        Args:
            input: the input state, ``None`` to continue the thread, or
                ``Command(resume=...)`` to answer pending interrupts.
            config: ``{"configurable": {"thread_id": ...}}`` and optionally
                ``checkpoint_id`` (run from that checkpoint: a new branch) and
                ``recursion_limit`` (default 25 supersteps).
            durability: ``"sync"``, ``"async"`` (default) or ``"exit"`` (S4).
        """
        run, resume = self._new_run(config, durability)
        for _ in self._drive(run, input, [], resume):
            pass
        return run.output()

    # --- reading state -------------------------------------------------------------

    def get_state(self, config: Config, *, subgraphs: bool = False) -> StateSnapshot:
        """The state at the checkpoint ``config`` names (the latest when it names none).

        With ``subgraphs=True`` a task that runs a subgraph carries that
        subgraph's own snapshot in ``task.state``.
        """
        if (owner := self._owner(config)) is not self:
            return owner.get_state(config, subgraphs=subgraphs)
        saver = self._saver()
        saved = saver.get_tuple(config)
        if saved is None:
            return self._empty(config)
        snap, tasks = self._snapshot(saved)
        if subgraphs:
            infos = list(snap.tasks)
            for i, (info, task) in enumerate(zip(infos, tasks, strict=True)):
                sub = task.node.subgraph
                if sub is not None and isinstance(info.state, dict):
                    inner = sub._with_saver(saver).get_state(info.state, subgraphs=True)
                    if inner.metadata is not None:
                        infos[i] = info._replace(state=inner)
            snap = snap._replace(tasks=tuple(infos))
        return snap

    def get_state_history(
        self,
        config: Config,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """Every checkpoint of the config's namespace (the root graph's by default), newest first.

        As in LangGraph, a subgraph's checkpoints are not the parent graph's
        history: they are listed by passing the subgraph's own config (its
        ``checkpoint_ns``), as ``get_state(subgraphs=True)`` returns it.
        """
        owner, scoped = self._history_scope(config)
        for saved in self._saver().list(scoped, filter=filter, before=before, limit=limit):
            yield owner._snapshot(saved, latest=False)[0]

    # --- changing state --------------------------------------------------------------

    def update_state(
        self, config: Config, values: Any, as_node: str | None = None
    ) -> dict[str, Any]:
        """Put a new checkpoint as if ``as_node`` had returned ``values``; returns its config.

        ``as_node="__copy__"`` puts an unchanged ``source="fork"`` copy instead.
        Without ``as_node`` the node that ran last is assumed.
        """
        saver = self._saver()
        saved = saver.get_tuple(config)
        return saver.put(*self._update_plan(config, saved, values, as_node))

"""The small public types of the graph runtime: markers, commands, interrupts, snapshots.

Everything a node or a caller holds in its hands lives here; the machinery
that uses them is in :mod:`tether.graph._algo` (I/O-free) and
:mod:`tether.graph._loop` (I/O).

Interrupts are control flow, not errors: :class:`GraphInterrupt` derives from
:class:`Exception` (so it crosses a node's frames) but not from
:class:`~tether.errors.TetherError`. A run that stops on one returns normally
with the interrupts under ``"__interrupt__"``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.graph._algo import TaskContext

__all__ = [
    "END",
    "START",
    "Command",
    "GraphInterrupt",
    "GraphRecursionError",
    "Interrupt",
    "RetryPolicy",
    "Send",
    "StateSnapshot",
    "TaskInfo",
    "interrupt",
]

START = "__start__"
"""The virtual first node: ``add_edge(START, "a")`` makes ``a`` run on input."""

END = "__end__"
"""The virtual last node: an edge to ``END`` ends that path."""


class GraphRecursionError(TetherError, RecursionError):
    """A run took more supersteps than ``recursion_limit`` allows."""


@dataclass(frozen=True, slots=True)
class Send:
    """Run ``node`` once with ``arg`` as its input, in the next superstep (map-reduce).

    Return a list of them from a conditional edge to fan out. Sends are stored
    in the checkpoint (the ``__pregel_tasks`` channel), so a crash between
    the fan-out and the mapped tasks loses nothing.
    """

    node: str
    arg: Any


@dataclass(frozen=True, slots=True)
class Command:
    """What a node returns to update state and jump, or what a caller passes to resume.

    Args:
        update: state update applied like a node's return value.
        goto: node name(s) or :class:`Send` objects to run next.
        resume: the value an interrupted node's :func:`interrupt` returns; a
            dict ``{interrupt_id: value}`` resumes several interrupts by id.
    """

    update: Any = None
    goto: str | Send | Sequence[str | Send] = ()
    resume: Any = None


@dataclass(frozen=True, slots=True)
class Interrupt:
    """One pending interrupt: the value the node passed and the id to resume it by."""

    value: Any
    id: str


class GraphInterrupt(Exception):
    """Raised by :func:`interrupt` (and by a subgraph that stopped) to stop the task."""

    def __init__(self, interrupts: Sequence[Interrupt]) -> None:
        super().__init__(interrupts)
        self.interrupts = list(interrupts)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and when a failing node is run again within one superstep.

    Args:
        max_attempts: total attempts including the first.
        initial_interval: seconds before the first retry.
        backoff_factor: each wait is the previous one times this.
        max_interval: upper bound of a wait.
        retry_on: exception types to retry, or a predicate on the exception.
    """

    max_attempts: int = 3
    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    retry_on: (
        type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
    ) = Exception

    def should_retry(self, exc: BaseException) -> bool:
        if isinstance(self.retry_on, (type, tuple)):
            return isinstance(exc, self.retry_on)
        return bool(self.retry_on(exc))

    def wait(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return float(
            min(self.max_interval, self.initial_interval * self.backoff_factor ** (attempt - 1))
        )


class TaskInfo(NamedTuple):
    """A task of the next superstep, as shown by ``get_state``."""

    id: str
    name: str
    path: tuple[Any, ...]
    error: str | None = None
    interrupts: tuple[Interrupt, ...] = ()
    state: StateSnapshot | dict[str, Any] | None = None
    result: dict[str, Any] | None = None


class StateSnapshot(NamedTuple):
    """The state of a thread at one checkpoint (``get_state``, ``get_state_history``)."""

    values: dict[str, Any]
    next: tuple[str, ...]
    config: dict[str, Any]
    metadata: dict[str, Any] | None
    created_at: str | None
    parent_config: dict[str, Any] | None
    tasks: tuple[TaskInfo, ...]
    interrupts: tuple[Interrupt, ...] = ()


# --- interrupt() -----------------------------------------------------------------

#: The task running in this thread / asyncio task; set by the loop around each node call.
current_task: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar(
    "tether_graph_task", default=None
)


def interrupt(value: Any) -> Any:
    """Stop the run here and hand ``value`` to the caller; returns the resume value.

    The first time a node reaches the n-th ``interrupt`` call the run stops
    with the interrupt stored in the checkpoint's pending writes. When the
    caller invokes again with ``Command(resume=answer)`` the node runs again
    from its start and this call returns ``answer``; code before it runs
    again too, so keep side effects after the interrupt or make them
    idempotent.

    Raises:
        GraphInterrupt: always, unless a resume value is waiting.
        RuntimeError: called outside a node of a running graph.
    """
    ctx = current_task.get()
    if ctx is None:
        raise RuntimeError("interrupt() was called outside a graph node; call it inside a node")
    return ctx.next_resume(value)

"""Where a thread stands, I/O-free: the rules the status of a checkpoint follows.

Shared by :mod:`tether.history` (the CLI and ``tether ui``, which read a
decoded checkpoint) and the backends' thread index
(:mod:`tether.backends._threads`, which keep a thread's status up to date
inside ``put`` and ``put_writes``). Both answer with the same rules:

* ``error``: a pending write of the checkpoint is an ``__error__``;
* ``interrupted``: a task wrote ``__interrupt__`` and nothing but control
  writes (so a resumed task that finished is no longer waiting);
* ``pending``: :func:`next_nodes` names nodes (a run in progress, stopped
  before a node, or crashed);
* ``idle``: nothing left to run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from tether.checkpoint import ERROR, INTERRUPT, RESUME, SCHEDULED, TASKS

__all__ = [
    "CONTROL_WRITES",
    "START",
    "State",
    "is_trigger",
    "newer",
    "next_nodes",
    "state_of",
    "trigger_available",
    "trigger_target",
]

State = Literal["idle", "interrupted", "pending", "error"]

START = "__start__"
#: Pending writes that are a task's control signals, not the values it wrote.
CONTROL_WRITES = frozenset({ERROR, INTERRUPT, RESUME, SCHEDULED, "__error_source_node__"})


def trigger_target(channel: str) -> str | None:
    """The node a trigger channel starts (``branch:to:X`` / ``join:A+B:X`` -> ``X``)."""
    if channel == START:
        return START
    if channel.startswith("branch:to:"):
        return channel[len("branch:to:") :]
    if channel.startswith("join:"):
        return channel.rpartition(":")[2] or None
    return None


def is_trigger(channel: str) -> bool:
    """Whether a channel's value can make :func:`next_nodes` name a node."""
    return channel == TASKS or trigger_target(channel) is not None


def trigger_available(channel: str, value: Any) -> bool:
    """Whether a stored trigger channel value would fire its node (``is_available``).

    ``branch:to:X`` holds ``None`` (``EphemeralValue``) or, for a deferred
    node, ``(value, finished)`` (``LastValueAfterFinish``); ``join:A+B:X``
    holds the set of names seen (``NamedBarrierValue``, a sorted list in
    tether's runtime) or ``(seen, finished)`` for a deferred node, and fires
    once every name was seen.
    """
    if channel.startswith("join:"):
        names = set(channel[len("join:") :].rpartition(":")[0].split("+"))
        finished = True
        if isinstance(value, tuple | list) and len(value) == 2 and isinstance(value[1], bool):
            value, finished = value
        try:
            return finished and set(value) == names
        except TypeError:
            return False
    if isinstance(value, tuple | list) and len(value) == 2 and isinstance(value[1], bool):
        return value[1]
    return True


def newer(version: Any, seen: Any) -> bool:
    """Whether a channel at ``version`` is news to a node that saw ``seen`` (None: never)."""
    if seen is None:
        return True
    if type(version) is not type(seen):
        return str(version) > str(seen)
    try:
        return bool(version > seen)
    except TypeError:
        return str(version) > str(seen)


def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def next_nodes(checkpoint: Mapping[str, Any]) -> tuple[str, ...]:
    """The nodes the superstep after ``checkpoint`` would run, as LangGraph derives them.

    A node runs when a channel it triggers on (``branch:to:NODE``, a full
    ``join:...:NODE`` barrier, ``__start__`` for the input node) holds a
    value and has a version newer than the one ``versions_seen[NODE]``
    records for it; every ``Send`` in ``__pregel_tasks`` runs its node once
    more. The order is LangGraph's: ``Send`` targets first, in packet order,
    then triggered nodes by name. This is ``StateSnapshot.next`` of
    ``get_state_history``; ``get_state`` on the latest checkpoint also leaves
    out tasks whose writes are already saved (a run cut short mid-step).

    Only the trigger channels' values are read (``channel_values`` must be
    the checkpoint's decoded values).
    """
    values: Mapping[str, Any] = checkpoint.get("channel_values") or {}
    versions: Mapping[str, Any] = checkpoint.get("channel_versions") or {}
    seen_all: Mapping[str, Mapping[str, Any]] = checkpoint.get("versions_seen") or {}
    pushed = [
        node
        for packet in values.get(TASKS) or ()
        if isinstance(node := _field(packet, "node"), str)
    ]
    pulled: set[str] = set()
    for channel, version in versions.items():
        node = trigger_target(channel)
        if node is None or node in pulled or channel not in values:
            continue
        if not trigger_available(channel, values[channel]):
            continue
        if newer(version, (seen_all.get(node) or {}).get(channel)):
            pulled.add(node)
    return (*pushed, *sorted(pulled))


def state_of(writes: Iterable[tuple[str, str]], runnable: bool) -> State:
    """The state of a checkpoint from its pending writes' ``(task_id, channel)`` and
    whether :func:`next_nodes` names nodes (``runnable``).

    The thread index applies this rule in SQL over the write rows' channels
    (``backends/_threads.py``); :func:`tether.history.status` applies it to a
    decoded tuple and also returns the interrupt values and errors.
    """
    interrupted: set[str] = set()
    wrote: set[str] = set()
    for task, channel in writes:
        if channel == ERROR:
            return "error"
        if channel == INTERRUPT:
            interrupted.add(task)
        elif channel not in CONTROL_WRITES:
            wrote.add(task)
    if interrupted - wrote:
        return "interrupted"
    return "pending" if runnable else "idle"

"""Thread operations that keep LangGraph ``DeltaChannel`` state readable.

A ``DeltaChannel`` stores its value only now and then, as a
``_DeltaSnapshot`` in ``channel_values``; in between, a checkpoint stores
nothing for it and LangGraph rebuilds the value by walking the parent chain
(``get_delta_channel_history``): the writes stored on each ancestor, back to
the nearest one that holds a value for the channel (the seed). Deleting any
checkpoint on that walk loses its writes or the seed, and the channel then
reads back short or empty, with no error. tether's own ``prune`` and
``delete_for_runs`` know nothing about graphs, so the drop-in adapter checks
before calling them:

* which channels a checkpoint rebuilds is in its metadata:
  ``counters_since_delta_snapshot`` names the delta channels, and those with a
  version but no stored value are walked (what LangGraph's runtime walks for
  the same checkpoint; a channel it snapshotted there has its value stored);
* ``prune`` keeps enough checkpoints: the smallest ``keep_last`` count (one
  for all namespaces of the thread, as tether's ``keep_last`` takes) under
  which every kept checkpoint still has its whole walk: the first of the safe
  options in LangGraph's ``prune`` docs. The second, writing a fresh
  ``_DeltaSnapshot`` on the kept checkpoint, would need the channel's
  reducer to fold the walked writes, and only the graph has it;
* ``delete_for_runs`` is refused with a ``ConfigError`` when a checkpoint
  that stays would walk through one that goes (the caller chose what to
  delete; keeping it anyway would not be what was asked).

``copy_thread`` copies every checkpoint with its writes and parent links, so
the copy rebuilds the same values and needs nothing here.

The I/O (read the threads, then prune or delete) is in
``_delta_chains_async.py`` and the ``_delta_chains_sync.py`` generated from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from tether.checkpoint import CheckpointTuple
from tether.errors import ConfigError

__all__ = ["ThreadChains", "describe_conflicts", "refuse_cut_runs"]

_COUNTERS = "counters_since_delta_snapshot"


class _Node(NamedTuple):
    parent: str | None
    needs: frozenset[str]  # delta channels this checkpoint rebuilds by walking
    stored: frozenset[str]  # channels with a value stored here (a seed stops a walk)
    run_id: str | None


def _needs(tup: CheckpointTuple) -> frozenset[str]:
    counters = (tup.metadata or {}).get(_COUNTERS)
    if not isinstance(counters, Mapping) or not counters:
        return frozenset()
    checkpoint = tup.checkpoint
    versions = checkpoint.get("channel_versions") or {}
    values = checkpoint.get("channel_values") or {}
    return frozenset(k for k in counters if k in versions and k not in values)


class ThreadChains:
    """The parent links of one thread's checkpoints (every namespace) and their walks."""

    def __init__(self, tuples: Iterable[CheckpointTuple] = ()) -> None:
        self.spaces: dict[str, dict[str, _Node]] = {}
        self.uses_delta = False
        for tup in tuples:
            self.add(tup)

    def add(self, tup: CheckpointTuple) -> None:
        """Record one checkpoint (only its links and channel names are kept, not values)."""
        conf = tup.config["configurable"]
        parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        needs = _needs(tup)
        self.uses_delta = self.uses_delta or bool(needs)
        run_id = (tup.metadata or {}).get("run_id")
        self.spaces.setdefault(conf.get("checkpoint_ns", ""), {})[conf["checkpoint_id"]] = _Node(
            parent or None,
            needs,
            frozenset(tup.checkpoint.get("channel_values") or ()),
            None if run_id is None else str(run_id),
        )

    def walk(self, ns: str, checkpoint_id: str) -> list[str]:
        """The ancestors whose writes or values rebuilding ``checkpoint_id`` reads.

        As ``BaseCheckpointSaver.get_delta_channel_history`` walks: parent by
        parent, until every walked channel met a stored value, or the chain
        ends (the root, or a parent that is already gone).
        """
        nodes = self.spaces[ns]
        node = nodes[checkpoint_id]
        needs = node.needs
        cursor = node.parent
        out: list[str] = []
        while needs and cursor is not None:
            ancestor = nodes.get(cursor)
            if ancestor is None:
                break
            out.append(cursor)
            needs = needs - ancestor.stored
            cursor = ancestor.parent
        return out

    def keep_count(self, keep: int) -> int:
        """The smallest ``keep_last`` count >= ``keep`` after which no kept walk is cut.

        ``keep_last`` keeps the newest N of *each* namespace, so one N serves
        them all; growing it for one namespace keeps more checkpoints in the
        others, whose walks are then checked too.
        """
        if not self.uses_delta:
            return keep
        orders = {ns: sorted(nodes, reverse=True) for ns, nodes in self.spaces.items()}
        positions = {ns: {cid: i for i, cid in enumerate(order)} for ns, order in orders.items()}
        done = dict.fromkeys(orders, 0)
        n = keep
        grown = True
        while grown:
            grown = False
            for ns, order in orders.items():
                while done[ns] < min(n, len(order)):
                    walked = self.walk(ns, order[done[ns]])
                    done[ns] += 1
                    if walked:
                        deepest = max(positions[ns][cid] for cid in walked) + 1
                        if deepest > n:
                            n = deepest
                            grown = True
        return n

    def delete_conflicts(self, runs: set[str]) -> list[tuple[str, str, str, str]]:
        """``(ns, kept checkpoint, deleted ancestor, its run)`` for every cut walk."""
        out: list[tuple[str, str, str, str]] = []
        if not self.uses_delta:
            return out
        for ns, nodes in self.spaces.items():
            for cid, node in sorted(nodes.items()):
                if node.run_id in runs:
                    continue
                for ancestor in self.walk(ns, cid):
                    run = nodes[ancestor].run_id
                    if run in runs:
                        out.append((ns, cid, ancestor, str(run)))
                        break
        return out


def describe_conflicts(thread_id: str, conflicts: list[tuple[str, str, str, str]]) -> str:
    ns, kept, gone, run = conflicts[0]
    where = f"namespace {ns!r}, " if ns else ""
    more = f" (and {len(conflicts) - 1} more checkpoints)" if len(conflicts) > 1 else ""
    return (
        f"thread {thread_id!r} ({where}checkpoint {kept!r}{more}) rebuilds a LangGraph "
        f"DeltaChannel from the writes of checkpoint {gone!r} of run {run!r}"
    )


def refuse_cut_runs(run_ids: list[str], problems: list[str]) -> None:
    """Raise what ``delete_for_runs`` says when it would cut a walk (``problems``, one a thread)."""
    if problems:
        raise ConfigError(
            f"delete_for_runs({run_ids!r}) would cut LangGraph DeltaChannel history: "
            + "; ".join(problems)
            + ". Deleted, those checkpoints would silently read such a channel back short "
            "or empty, so nothing was deleted. Delete the later runs of the thread along with "
            "these, delete the whole thread (delete_thread), or keep these runs; "
            "prune(strategy='keep_latest') keeps what the latest checkpoint needs."
        )

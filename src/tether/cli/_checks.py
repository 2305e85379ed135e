"""What ``tether verify`` checks, read-only, through the saver and the inspection queries.

No table is named here. Each checkpoint is read back whole with the saver's
``get_tuple``, which already refuses what a damaged store holds: a row whose
checksum does not match, a value whose row is gone (``the checkpoint names
it and its row is gone``), an append tail whose snapshot is gone, a pending
write that does not decode. On top of that, from the backend's inspection
queries: every parent a checkpoint names is in the store, and every stored
pending write belongs to a checkpoint the store holds.

A parent older than every checkpoint left in its namespace is what
``tether prune`` leaves (it keeps the newest), so it is a note, not damage;
a missing parent newer than that is a hole in the history. A value of a type
the allowlist refuses is reported apart from damage: the checkpoint may be
fine, this reader just may not build it (``--allow``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.cli._stores import HeadInfo, Store
from tether.errors import DecodeError, TetherError, describe, shown

__all__ = ["Finding", "Report", "verify_store"]

Kind = Literal["unreadable", "refused-type", "missing-parent", "orphan-writes", "pruned-parent"]

#: Kinds that mean the store is damaged (exit code 1).
DAMAGE = frozenset({"unreadable", "refused-type", "missing-parent", "orphan-writes"})


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``verify`` found, with where it is."""

    kind: Kind
    message: str
    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None

    @property
    def damage(self) -> bool:
        return self.kind in DAMAGE

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "damage": self.damage,
            "thread_id": self.thread_id,
            "checkpoint_ns": self.checkpoint_ns,
            "checkpoint_id": self.checkpoint_id,
            "message": self.message,
        }


@dataclass(slots=True)
class Report:
    """What ``verify`` read and found."""

    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        return any(f.damage for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": not self.damaged,
            "threads": self.threads,
            "checkpoints": self.checkpoints,
            "writes": self.writes,
            "problems": sum(f.damage for f in self.findings),
            "findings": [f.to_json() for f in self.findings],
        }


def verify_store(store: Store, progress: Callable[[int, int], None] | None = None) -> Report:
    """Read every checkpoint of ``store`` and report what is damaged (see the module docstring).

    ``progress(done, total)`` is called after each checkpoint. Never raises
    for a damaged store: a thread whose checkpoints cannot even be listed is
    one finding and the next thread is read.
    """
    report = Report()
    infos = store.threads()
    report.threads = len(infos)
    heads: dict[str, list[HeadInfo]] = {}
    for info in infos:
        try:
            heads[info.thread_id] = store.heads(info.thread_id)
        except TetherError as exc:
            report.findings.append(
                Finding("unreadable", f"listing its checkpoints: {describe(exc)}", info.thread_id)
            )
    total = sum(len(h) for h in heads.values())
    done = 0
    for thread_id, thread_heads in heads.items():
        _parents(report, thread_id, thread_heads)
        for head in thread_heads:
            _read(report, store, head)
            done += 1
            if progress is not None:
                progress(done, total)
    for orphan in store.orphan_writes():
        report.findings.append(
            Finding(
                "orphan-writes",
                f"{orphan.writes} pending write(s) of checkpoint {orphan.checkpoint_id}, "
                "which is not in the store",
                orphan.thread_id,
                orphan.checkpoint_ns,
                orphan.checkpoint_id,
            )
        )
    return report


def _read(report: Report, store: Store, head: HeadInfo) -> None:
    where = (head.thread_id, head.checkpoint_ns, head.checkpoint_id)
    config = {
        "configurable": {
            "thread_id": head.thread_id,
            "checkpoint_ns": head.checkpoint_ns,
            "checkpoint_id": head.checkpoint_id,
        }
    }
    try:
        tup = store.saver.get_tuple(config)
    except DecodeError as exc:
        if exc.type_name:
            module, _, name = exc.type_name.rpartition(".")
            report.findings.append(
                Finding(
                    "refused-type",
                    f"{describe(exc)}; if the type is yours, verify with --allow {module}:{name}",
                    *where,
                )
            )
        else:
            report.findings.append(Finding("unreadable", describe(exc), *where))
        return
    except TetherError as exc:
        report.findings.append(Finding("unreadable", describe(exc), *where))
        return
    if tup is None:  # deleted while verify ran
        return
    report.checkpoints += 1
    report.writes += len(tup.pending_writes or ())


def _parents(report: Report, thread_id: str, heads: list[HeadInfo]) -> None:
    by_ns: dict[str, set[str]] = {}
    for h in heads:
        by_ns.setdefault(h.checkpoint_ns, set()).add(h.checkpoint_id)
    oldest = {ns: min(ids) for ns, ids in by_ns.items()}
    pruned: dict[str, int] = {}
    for h in heads:
        parent = h.parent_id
        if not parent or parent in by_ns[h.checkpoint_ns]:
            continue
        if parent < oldest[h.checkpoint_ns]:
            pruned[h.checkpoint_ns] = pruned.get(h.checkpoint_ns, 0) + 1
            continue
        report.findings.append(
            Finding(
                "missing-parent",
                f"the parent {parent} of checkpoint {h.checkpoint_id} is not in the store, "
                "and older checkpoints of its namespace are: a hole in the history "
                "(a row deleted outside tether, or lost)",
                thread_id,
                h.checkpoint_ns,
                h.checkpoint_id,
            )
        )
    for ns, n in pruned.items():
        where = f" namespace {ns!r}" if ns else " root namespace"
        report.findings.append(
            Finding(
                "pruned-parent",
                f"the history of the{where} of thread {shown(thread_id)} starts at {n} "
                "checkpoint(s) whose parent is older than any kept (pruned)",
                thread_id,
                ns,
            )
        )

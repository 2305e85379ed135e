"""A thread's checkpoints as ``history``, ``show`` and ``diff`` read them (no click).

:class:`ThreadView` lists a thread's checkpoints without their values (the
backend's ``heads``: cheap, numbered ``#1`` newest first as ``history``
prints them, resolved from what a person types with
:func:`tether.history.resolve`), then decodes only the checkpoints a command
shows and their parents, through the saver. What a checkpoint means to a
person (next nodes, status, changes) is :mod:`tether.history`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from tether.checkpoint import CheckpointTuple
from tether.cli._stores import HeadInfo, Store
from tether.errors import CheckpointNotFound, ConfigError, DecodeError, shown
from tether.history import Change, Ref, Status, diff, resolve, short_ids, status, summarize

__all__ = ["Row", "ThreadView"]


@dataclass(slots=True)
class Row:
    """One checkpoint of a history: its head, and its values when they were decoded."""

    n: int  # 1 = the thread's newest (every namespace), as `tether history` numbers rows
    head: HeadInfo
    tup: CheckpointTuple | None = None
    parent: CheckpointTuple | None = None

    @property
    def checkpoint_id(self) -> str:
        return self.head.checkpoint_id

    @property
    def step(self) -> Any:
        return self.head.metadata.get("step")

    @property
    def source(self) -> Any:
        return self.head.metadata.get("source")

    def status(self) -> Status | None:
        return status(self.tup) if self.tup is not None else None

    def values(self) -> dict[str, Any]:
        return dict(self.tup.checkpoint.get("channel_values") or {}) if self.tup else {}

    def parent_values(self) -> dict[str, Any]:
        return dict(self.parent.checkpoint.get("channel_values") or {}) if self.parent else {}


class ThreadView:
    """The checkpoints of one thread (one namespace, or all), newest first.

    Args:
        ns: only this namespace (``None``: every namespace, as ``history``
            lists them by default).
    """

    def __init__(self, store: Store, thread_id: str, ns: str | None = None) -> None:
        self.store = store
        self.thread_id = thread_id
        self.ns = ns
        # No value is decoded here: a thread of any types is listed. Rows are
        # numbered over every namespace, so #N names the same checkpoint
        # whatever --ns a command was given.
        self.all_heads = store.heads(thread_id)
        if not self.all_heads and store.thread(thread_id) is None:
            raise CheckpointNotFound(
                f"thread {shown(thread_id)} not found in {store.url}; "
                f"`tether threads {store.url}` lists the threads"
            )
        self.heads = [h for h in self.all_heads if ns is None or h.checkpoint_ns == ns]
        self._by_id = {h.checkpoint_id: h for h in self.all_heads}
        self._n = {h.checkpoint_id: n for n, h in enumerate(self.all_heads, 1)}

    # --- naming checkpoints --------------------------------------------------------------

    def where(self) -> str:
        ns = f" (namespace {self.ns!r})" if self.ns else ""
        return f"thread {shown(self.thread_id)}{ns}"

    def refs(self) -> list[Ref]:
        return [
            Ref(h.checkpoint_id, _int(h.metadata.get("step")), h.checkpoint_ns)
            for h in self.all_heads
        ]

    def resolve(self, ref: str) -> HeadInfo:
        """The checkpoint ``ref`` names: an id prefix, ``#N`` or ``step:S``.

        ``#N`` and prefixes over the whole thread; ``step:S`` in the view's
        namespace (the root graph's when none was given).
        """
        step_ns = "" if self.ns is None else self.ns
        return self._by_id[resolve(self.refs(), ref, where=self.where(), step_ns=step_ns)]

    def row_number(self, checkpoint_id: str | None) -> int | None:
        return self._n.get(checkpoint_id) if checkpoint_id else None

    def short_ids(self) -> dict[str, str]:
        return short_ids(self._by_id)

    def head(self, checkpoint_id: str) -> HeadInfo | None:
        return self._by_id.get(checkpoint_id)

    # --- decoding --------------------------------------------------------------------------

    def rows(self, offset: int = 0, limit: int | None = None) -> list[Row]:
        """Rows ``offset .. offset+limit`` of the view (newest first), undecoded."""
        end = None if limit is None else offset + limit
        return [Row(self._n[h.checkpoint_id], h) for h in self.heads[offset:end]]

    def decode(self, rows: list[Row]) -> None:
        """Decode the rows' checkpoints and their parents (the parent is what a row changed).

        Reads the saver's ``list`` from the newest row down to the oldest
        parent needed, so a page costs its own checkpoints, not the thread's.

        Raises:
            DecodeError: a value of a type that is not allowed (and damage).
        """
        if not rows:
            return
        wanted = {r.checkpoint_id for r in rows}
        wanted |= {r.head.parent_id for r in rows if r.head.parent_id in self._by_id}
        found = self._load(wanted, before=self._newer_than(rows[0].checkpoint_id))
        for r in rows:
            r.tup = found.get(r.checkpoint_id)
            parent = r.head.parent_id
            r.parent = found.get(parent) if parent else None

    def tuple(self, head: HeadInfo) -> CheckpointTuple:
        tup = self.store.saver.get_tuple(
            {
                "configurable": {
                    "thread_id": head.thread_id,
                    "checkpoint_ns": head.checkpoint_ns,
                    "checkpoint_id": head.checkpoint_id,
                }
            }
        )
        if tup is None:  # deleted since the heads were read
            raise CheckpointNotFound(
                f"checkpoint {head.checkpoint_id} of {self.where()} is gone from {self.store.url}"
            )
        return tup

    def _newer_than(self, checkpoint_id: str) -> str | None:
        """The id listed just before ``checkpoint_id`` in the view (``list``'s ``before``)."""
        i = next(k for k, h in enumerate(self.heads) if h.checkpoint_id == checkpoint_id)
        return self.heads[i - 1].checkpoint_id if i else None

    def _load(self, wanted: Collection[str], before: str | None) -> dict[str, CheckpointTuple]:
        found: dict[str, CheckpointTuple] = {}
        missing = set(wanted)
        for tup in self._list(before):
            cid = tup.checkpoint["id"]
            if cid in missing:
                found[cid] = tup
                missing.discard(cid)
                if not missing:
                    break
        for cid in missing:  # not in the listing's order: asked one by one
            head = self._by_id.get(cid)
            if head is not None:
                found[cid] = self.tuple(head)
        return found

    def _list(self, before: str | None) -> Iterator[CheckpointTuple]:
        conf: dict[str, Any] = {"thread_id": self.thread_id}
        if self.ns is not None:
            conf["checkpoint_ns"] = self.ns
        before_conf = {"configurable": {"checkpoint_id": before}} if before else None
        return iter(self.store.saver.list({"configurable": conf}, before=before_conf))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def changed_channels(head: HeadInfo, parent: HeadInfo | None) -> list[str]:
    """The channels a checkpoint changed, by name (internal ones too): its
    ``updated_channels``, or the versions that differ from its parent's."""
    updated = head.checkpoint.get("updated_channels")
    if updated is not None:
        return sorted(updated)
    mine = head.checkpoint.get("channel_versions", {})
    theirs = parent.checkpoint.get("channel_versions", {}) if parent else {}
    return sorted(c for c, v in mine.items() if theirs.get(c) != v)


def row_json(view: ThreadView, row: Row, *, internal: bool, width: int = 80) -> dict[str, Any]:
    """A history row as ``tether history --json`` prints it (docs/cli.md)."""
    h = row.head
    parent_head = view.head(h.parent_id) if h.parent_id else None
    out: dict[str, Any] = {
        "n": row.n,
        "checkpoint_id": h.checkpoint_id,
        "checkpoint_ns": h.checkpoint_ns,
        "step": row.step,
        "source": row.source,
        "parent_checkpoint_id": h.parent_id,
        "parent_n": view.row_number(h.parent_id),
        "ts": h.checkpoint.get("ts"),
        "changed": changed_channels(h, parent_head),
        "pending_writes": h.pending_writes,
        "next": None,
        "status": None,
        "interrupts": None,
        "changes": None,
        "summary": None,
    }
    st = row.status()
    if st is not None:
        changes = row_changes(row, internal=internal)
        out.update(
            next=list(st.next),
            status=st.state,
            interrupts=st.to_json()["interrupts"],
            changes=None if changes is None else [c.to_json() for c in changes],
            summary=row_summary(changes, width),
        )
    return out


def row_changes(row: Row, *, internal: bool) -> list[Change] | None:
    """What the row's checkpoint changed from its parent's values.

    A first checkpoint's values are all ``added``; ``None`` when the parent
    is not in the store (pruned), so what changed is not known.
    """
    if row.head.parent_id and row.parent is None:
        return None
    return diff(row.parent_values(), row.values(), internal=internal)


def row_summary(changes: list[Change] | None, width: int) -> str:
    return "(parent pruned)" if changes is None else summarize(changes, width)


def check_limits(limit: int | None, page: int | None) -> tuple[int, int | None]:
    """``(offset, limit)`` of ``--limit N --page P``; a page needs a limit."""
    if page is not None and limit is None:
        raise ConfigError("--page P needs --limit N (the page size)")
    if page is not None and limit is not None:
        return (page - 1) * limit, limit
    return 0, limit


def is_refused_type(exc: DecodeError) -> bool:
    """A value of a type the allowlist refused (not damage): history shows rows without values."""
    return bool(exc.type_name)

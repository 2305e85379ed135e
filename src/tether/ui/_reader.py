"""What the viewer's pages show, read from one open store: plain records, no HTML.

:class:`Viewer` owns the :class:`~tether.cli._stores.Store` the CLI opens
(SQLite file or Postgres URL) and answers each page's question with records
the templates walk. Every call takes one lock: the store's connections are
shared by the server's worker threads, and a local viewer has one user.

Values are read through a copy of the saver whose serializer is
:class:`~tether.ui._values.LenientSerializer` (as ``with_allowlist`` copies a
saver with another serializer), so a value of a class that is not allowed
reads as a placeholder naming the class instead of failing the page. What
the pages say about a checkpoint (next nodes, status, what changed, the fork
tree, short ids) is :mod:`tether.history`, the same as the CLI's.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tether import history
from tether.base import BaseCheckpointSaver
from tether.checkpoint import CheckpointTuple, make_config
from tether.cli._stores import HeadInfo, Store, ThreadInfo
from tether.cli._threads import thread_status
from tether.encryption import SEALED_METADATA
from tether.errors import CheckpointNotFound, ConfigError, DecodeError, shown
from tether.ui import _edit
from tether.ui._values import LenientSerializer, Undecodable, as_plain_json

__all__ = ["Point", "Row", "ThreadRow", "Viewer"]

#: Threads per page of the threads list.
THREADS_PAGE = 50
#: Checkpoints read for a thread's tree (newest first); older ones are a link away.
TREE_PAGE = 1000


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One line of the threads list."""

    info: ThreadInfo
    status: history.Status | None  # None: the latest checkpoint could not be read
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """One checkpoint of a thread's tree."""

    number: int  # #N as `tether history` numbers rows: 1 is the newest
    layout: history.TreeRow
    tup: CheckpointTuple
    short: str
    status: history.Status
    summary: str

    @property
    def checkpoint_id(self) -> str:
        return self.layout.checkpoint_id

    @property
    def step(self) -> Any:
        return self.tup.metadata.get("step")

    @property
    def source(self) -> Any:
        return self.tup.metadata.get("source")


@dataclass(frozen=True, slots=True)
class Point:
    """One checkpoint with everything its page shows."""

    tup: CheckpointTuple
    status: history.Status
    parent_id: str | None
    children: list[str]
    problem: str | None = None  # a value whose reading failed the whole tuple

    @property
    def checkpoint_id(self) -> str:
        return str(self.tup.checkpoint["id"])

    @property
    def ns(self) -> str:
        return str(self.tup.config["configurable"].get("checkpoint_ns", ""))


class Viewer:
    """The open store behind one app; every method is safe to call from any thread."""

    def __init__(self, store: Store, *, allow_edit: bool) -> None:
        self.store = store
        self.allow_edit = allow_edit
        self._lock = threading.Lock()
        reader = copy.copy(store.saver)
        reader.serde = LenientSerializer(store.saver.serde)
        self._reader: BaseCheckpointSaver = reader

    @property
    def name(self) -> str:
        return str(self.store.url)

    # --- threads -----------------------------------------------------------------------

    def threads(self, query: str = "", page: int = 1) -> tuple[list[ThreadRow], int, int]:
        """One page of threads matching ``query`` (a substring of the id, any case),
        most recently updated first; with the number of matches and of pages."""
        with self._lock:
            infos = self.store.threads()
        needle = query.casefold()
        found = [i for i in infos if needle in i.thread_id.casefold()]
        found.sort(key=lambda i: (i.latest_ts or "", i.thread_id), reverse=True)
        pages = max(1, -(-len(found) // THREADS_PAGE))
        page = min(max(page, 1), pages)
        chunk = found[(page - 1) * THREADS_PAGE : page * THREADS_PAGE]
        return [self._thread_row(i) for i in chunk], len(found), pages

    def _thread_row(self, info: ThreadInfo) -> ThreadRow:
        # As `tether threads` reads it: a thread whose latest state holds a class
        # the allowlist refuses has no status, and the row says why.
        try:
            with self._lock:
                found = thread_status(self.store, info)
        except DecodeError as exc:
            return ThreadRow(info, None, str(exc))
        return ThreadRow(info, found, None if found else "no checkpoint to read")

    def thread(self, thread_id: str) -> ThreadInfo:
        with self._lock:
            info = self.store.thread(thread_id)
        if info is None:
            raise CheckpointNotFound(f"thread {shown(thread_id)} not found in {self.name}")
        return info

    def namespaces(self, thread_id: str) -> dict[str, int]:
        """The thread's namespaces (``""`` first) with their checkpoint counts."""
        with self._lock:
            heads = self.store.heads(thread_id)
        counts: dict[str, int] = {}
        for h in heads:
            counts[h.checkpoint_ns] = counts.get(h.checkpoint_ns, 0) + 1
        return dict(sorted(counts.items()))

    # --- a thread's tree ---------------------------------------------------------------

    def tree(
        self, thread_id: str, ns: str, before: str | None = None
    ) -> tuple[list[Row], str | None]:
        """The fork tree of the newest :data:`TREE_PAGE` checkpoints of ``ns``
        (older than ``before`` if given), oldest first; and the id to page on from."""
        config = make_config(thread_id, ns)
        before_conf = make_config(thread_id, ns, before) if before else None
        try:
            with self._lock:
                tuples = list(self._reader.list(config, before=before_conf, limit=TREE_PAGE + 1))
        except DecodeError as exc:
            # Metadata or a value the lenient reading cannot stand in for (sealed,
            # and the store was opened without its key): the heads, values as placeholders.
            tuples = self._heads_only(thread_id, ns, before, exc)
        older = None
        if len(tuples) > TREE_PAGE:
            tuples = tuples[:TREE_PAGE]
            older = str(tuples[-1].checkpoint["id"])
        by_id = {str(t.checkpoint["id"]): t for t in tuples}
        number = {cid: n for n, cid in enumerate(by_id, 1)}
        layout = history.tree((cid, _parent_id(t)) for cid, t in reversed(by_id.items()))
        shorts = history.short_ids(by_id)
        rows = []
        for lay in layout:
            tup = by_id[lay.checkpoint_id]
            was, now = _changed_values(self._parent(tup, by_id), tup)
            rows.append(
                Row(
                    number[lay.checkpoint_id],
                    lay,
                    tup,
                    shorts[lay.checkpoint_id],
                    history.status(tup),
                    history.summarize(history.diff(was, now), 100),
                )
            )
        return rows, older

    def _parent(
        self, tup: CheckpointTuple, known: Mapping[str, CheckpointTuple]
    ) -> CheckpointTuple | None:
        parent = _parent_id(tup)
        if parent is None:
            return None
        found = known.get(parent)
        if found is None:  # the oldest of a page: its parent is on the next one
            conf = tup.config["configurable"]
            with self._lock:
                found = self._reader.get_tuple(
                    make_config(conf["thread_id"], conf.get("checkpoint_ns", ""), parent)
                )
        return found

    # --- one checkpoint -----------------------------------------------------------------

    def point(self, thread_id: str, ns: str, checkpoint_id: str | None) -> Point:
        """The checkpoint ``checkpoint_id`` of ``ns`` (the latest when ``None``)."""
        tup = self._get(thread_id, ns, checkpoint_id)
        children = self._children(thread_id, ns, str(tup.checkpoint["id"]))
        return Point(tup, history.status(tup), _parent_id(tup), children)

    def _get(self, thread_id: str, ns: str, checkpoint_id: str | None) -> CheckpointTuple:
        config = make_config(thread_id, ns, checkpoint_id)
        try:
            with self._lock:
                tup = self._reader.get_tuple(config)
        except DecodeError as exc:
            # A value the lenient reading could not stand in for (an appended
            # list whose older part is refused): the checkpoint without values.
            tup = self._head_only(thread_id, ns, checkpoint_id, exc)
        if tup is None:
            self.thread(thread_id)  # an unknown thread says so
            what = f"checkpoint {checkpoint_id}" if checkpoint_id else "no checkpoint"
            where = f" in namespace {ns!r}" if ns else ""
            raise CheckpointNotFound(f"{what} of thread {shown(thread_id)}{where} not found")
        return tup

    def _head_only(
        self, thread_id: str, ns: str, checkpoint_id: str | None, exc: DecodeError
    ) -> CheckpointTuple | None:
        with self._lock:
            heads = self.store.heads(thread_id, ns, checkpoint_id=checkpoint_id, limit=1)
        return _without_values(thread_id, ns, heads[0], exc) if heads else None

    def _heads_only(
        self, thread_id: str, ns: str, before: str | None, exc: DecodeError
    ) -> list[CheckpointTuple]:
        """A tree page's checkpoints without their values, newest first (as ``list``)."""
        with self._lock:
            heads = self.store.heads(thread_id, ns)
        if before is not None:
            heads = [h for h in heads if h.checkpoint_id < before]
        return [_without_values(thread_id, ns, h, exc) for h in heads[: TREE_PAGE + 1]]

    def _children(self, thread_id: str, ns: str, checkpoint_id: str) -> list[str]:
        with self._lock:
            heads = self.store.heads(thread_id, ns)
        return sorted(h.checkpoint_id for h in heads if h.parent_id == checkpoint_id)

    def diff(
        self, thread_id: str, ns: str, a: str | None, b: str
    ) -> tuple[Point | None, Point, list[history.Change]]:
        """What changed from checkpoint ``a`` (default: ``b``'s parent) to ``b``."""
        new = self.point(thread_id, ns, b)
        a = a or new.parent_id
        old = self.point(thread_id, ns, a) if a else None
        changes = history.diff(_values(old.tup) if old else {}, _values(new.tup))
        return old, new, changes

    # --- edits (--allow-edit) ---------------------------------------------------------------

    def editable(self, point: Point) -> dict[str, Any]:
        """The channels of ``point`` a fork can edit as JSON: the user's plain values."""
        values = _values(point.tup)
        return {
            ch: v
            for ch, v in sorted(values.items())
            if not history.is_internal(ch) and as_plain_json(v) is not None
        }

    def fork(self, thread_id: str, checkpoint_id: str, given: Mapping[str, str]) -> str:
        """Fork ``checkpoint_id`` (root namespace) with the JSON texts ``given``; the new id.

        The parent is read leniently: only its versions and the edited
        channels' new values are written, never a value read (a placeholder
        included), so a state holding a class the allowlist refuses can be
        forked in its other channels.
        """
        self._edit_allowed()
        parent = self._get(thread_id, "", checkpoint_id)
        point = Point(parent, history.status(parent), _parent_id(parent), [])
        edits = _edit.parse_edits(given, self.editable(point))
        with self._lock:
            return _edit.fork(self.store.saver, parent, edits)

    def fork_changes(
        self, thread_id: str, checkpoint_id: str, given: Mapping[str, str]
    ) -> list[history.Change]:
        """What :meth:`fork` would change, for its confirmation page."""
        point = self.point(thread_id, "", checkpoint_id)
        current = self.editable(point)
        edits = _edit.parse_edits(given, current)
        return history.diff(current, {**current, **edits})

    def copy_thread(self, source: str, target: str) -> None:
        self._edit_allowed()
        self.thread(source)
        if not target:
            raise ConfigError("name the thread to copy to")
        with self._lock:
            existing = self.store.thread(target)
            if existing is not None:
                raise _exists(target, existing.checkpoints)
            self.store.saver.copy_thread(source, target)

    def check_copy_target(self, target: str) -> None:
        with self._lock:
            existing = self.store.thread(target)
        if existing is not None:
            raise _exists(target, existing.checkpoints)

    def delete_thread(self, thread_id: str) -> None:
        self._edit_allowed()
        self.thread(thread_id)
        with self._lock:
            self.store.saver.delete_thread(thread_id)

    def _edit_allowed(self) -> None:
        if not self.allow_edit:  # pragma: no cover - read-only apps have no edit routes
            raise PermissionError("the viewer is read-only")

    def close(self) -> None:
        with self._lock:
            self.store.close()


def _exists(target: str, count: int) -> ConfigError:
    return ConfigError(
        f"thread {shown(target)} already has {count} checkpoint(s); choose a new thread id"
    )


_NOT_READ = (
    "not read: this checkpoint does not decode as a whole (an encrypted store opened "
    "without its key does not: set TETHER_KEYS)"
)


def _without_values(thread_id: str, ns: str, head: HeadInfo, exc: DecodeError) -> CheckpointTuple:
    """A checkpoint as its head row has it, each value a placeholder.

    A placeholder names the value's version, not the error (which names its
    checkpoint), so two checkpoints' placeholders differ where their versions
    do and the tree and diff pages show what changed. Sealed metadata (#17)
    shows its clear keys only.
    """
    checkpoint = dict(head.checkpoint)
    why = _NOT_READ if exc.type_name is None else str(exc)
    checkpoint["channel_values"] = {
        ch: Undecodable(exc.type_name, f"{why} (version {version})")
        for ch, version in (checkpoint.get("channel_versions") or {}).items()
    }
    metadata = {k: v for k, v in head.metadata.items() if k != SEALED_METADATA}
    parent = make_config(thread_id, ns, head.parent_id) if head.parent_id else None
    return CheckpointTuple(
        make_config(thread_id, ns, head.checkpoint_id),
        checkpoint,  # type: ignore[arg-type]
        metadata,  # type: ignore[arg-type]
        parent,
        [],
    )


def _parent_id(tup: CheckpointTuple) -> str | None:
    parent = tup.parent_config
    return str(parent["configurable"]["checkpoint_id"]) if parent else None


def _changed_values(
    parent: CheckpointTuple | None, tup: CheckpointTuple
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values of ``parent`` and ``tup`` in the channels whose versions differ.

    A channel at the same version holds the same value, so leaving it out
    changes no diff and spares comparing it (a long unchanged document).
    """
    old = _values(parent) if parent is not None else {}
    new = _values(tup)
    if parent is None:
        return old, new
    was = parent.checkpoint.get("channel_versions") or {}
    now = tup.checkpoint.get("channel_versions") or {}
    same = {ch for ch, v in now.items() if ch in was and was[ch] == v}
    return (
        {k: v for k, v in old.items() if k not in same},
        {k: v for k, v in new.items() if k not in same},
    )


def _values(tup: CheckpointTuple) -> dict[str, Any]:
    return dict(tup.checkpoint.get("channel_values") or {})

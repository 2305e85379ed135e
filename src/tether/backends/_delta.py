"""Append deltas: a growing list channel stored without rewriting its history (SPEC S7).

The reference savers store a message list again, whole, at every step: a
conversation of N messages costs O(N²) bytes. tether stores such a channel as
an immutable **snapshot** plus, per version, the **tail** appended since the
snapshot. This module is the I/O-free half every backend shares: it decides
what to write (:class:`AppendTracker`) and puts values back together
(:func:`join_append`). Backends store what it plans as ordinary blob rows.

Rows (the blob table of every backend):

* a snapshot is a blob row under a version of its own, ``"~"`` followed by 32
  hex digits (:func:`is_snapshot_version`), never a channel version. Nothing
  ever writes that key again, so a snapshot cannot change under the tails
  that refer to it, whatever happens to the channel's real versions (a re-put
  of a version overwrites that version's row only).
* a channel version stored as a tail has ``base`` = the snapshot's version and
  a payload that is a complete MessagePack array of the appended elements. The
  value is ``snapshot + tail`` (list concatenation). Every other row has
  ``base`` NULL and holds its whole value, as before.

Tails are cumulative (relative to the snapshot, not to the previous version),
so reading any version costs at most two rows and one join, and a tail never
depends on another tail. Garbage collection keeps the rows checkpoints refer
to plus their ``base`` snapshots: one level, no recursion.

When to start a new snapshot: at the first write the tracker sees for a
channel, when the list no longer starts with the snapshot's elements (an
element was edited or removed), when the tail grew larger than the snapshot,
and when ``tail_bytes * tails_written > 2 * snapshot_bytes``. For a list
growing by ``g`` bytes a step, that last rule takes a snapshot every
``sqrt(2 S / g)`` steps, which minimises bytes written per step (snapshot
amortised plus average tail, ``sqrt(2 g S)``): a 1,000-message history costs
about 45 messages a step instead of 1,000.

What is eligible: values the saver's :class:`~tether.serde.MsgpackSerializer`
encodes as a top-level MessagePack array (lists) of at least ``min_bytes``
(:func:`supports` says whether a serializer is one whose decoding of an array
is the list of its decoded elements; other serializers store values whole).
Detection compares *bytes*, never object identity: the new value's encoding
must start with the snapshot's element bytes, so a caller mutating an old
message in place simply gets a new snapshot, never a wrong tail.

The tracker only remembers snapshots *this process* wrote; a backend checks
inside the writing transaction that the snapshot row still exists (another
process may have pruned the thread) and otherwise writes the whole value
(:attr:`ChannelPlan.fallback`). Postgres enforces the same with a foreign key.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from tether.errors import ConfigError, DecodeError
from tether.serde.msgpack import MsgpackSerializer

__all__ = [
    "DEFAULT_MIN_BYTES",
    "AppendTracker",
    "ChannelPlan",
    "Row",
    "array_header",
    "is_snapshot_version",
    "join_append",
    "split_array",
    "supports",
]

#: Lists whose encoding is shorter than this are always stored whole.
DEFAULT_MIN_BYTES = 4096

#: Bytes of snapshot data a tracker remembers before it forgets the least recent.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024

_SNAPSHOT_PREFIX = "~"


def supports(serde: object) -> bool:
    """Whether values of ``serde`` may be stored as snapshot + tail (tether's MessagePack)."""
    return isinstance(serde, MsgpackSerializer)


def is_snapshot_version(version: str) -> bool:
    """Whether a blob row's version names a snapshot (not a channel version)."""
    return version.startswith(_SNAPSHOT_PREFIX) and len(version) == 33


def new_snapshot_version() -> str:
    """A fresh snapshot key: ``~`` and 32 hex digits, unique per write."""
    return _SNAPSHOT_PREFIX + uuid.uuid4().hex


def split_array(data: bytes) -> tuple[int, int] | None:
    """``(element count, offset of the first element)`` of a MessagePack array, else None."""
    if not data:
        return None
    first = data[0]
    if 0x90 <= first <= 0x9F:
        return first & 0x0F, 1
    if first == 0xDC and len(data) >= 3:
        return (data[1] << 8) | data[2], 3
    if first == 0xDD and len(data) >= 5:
        count: int = struct.unpack_from(">I", data, 1)[0]
        return count, 5
    return None


def array_header(count: int) -> bytes:
    """The MessagePack header of an array of ``count`` elements."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 0x10000:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


class Row(NamedTuple):
    """One blob row to write: ``data`` is the serializer's bytes (not yet compressed).

    ``base`` is the snapshot version a tail extends, or ``None`` for a whole value.
    (Named tuples: a plan is built for every channel of every put.)
    """

    version: str
    tag: str
    data: bytes
    base: str | None = None


class ChannelPlan(NamedTuple):
    """The rows one channel's value becomes.

    ``rows`` go to storage in order (a new snapshot before the tail that
    refers to it). When ``fallback`` is set, ``rows`` extend a snapshot written
    by an earlier put (``needs``); a backend that no longer finds that
    snapshot writes ``fallback`` (the whole value) instead.
    """

    rows: tuple[Row, ...]
    needs: str | None = None
    fallback: Row | None = None


@dataclass(slots=True)
class _Snapshot:
    version: str
    data: bytes  # the snapshot's full encoding (header included)
    offset: int  # where its elements start in ``data``
    count: int
    tails: int = 0  # tails written against it so far

    @property
    def body(self) -> int:
        return len(self.data) - self.offset


class AppendTracker:
    """Remembers, per (thread, namespace, channel), the snapshot new tails extend.

    Thread-safe; one per saver (clones made by ``with_allowlist`` share it).

    Args:
        min_bytes: lists encoded shorter than this are stored whole.
        cache_bytes: snapshot bytes kept in memory at most (least recently
            used channels are forgotten first; their next write starts a new
            snapshot).
    """

    def __init__(
        self, *, min_bytes: int = DEFAULT_MIN_BYTES, cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        self.min_bytes = min_bytes
        self.cache_bytes = cache_bytes
        self._lock = threading.Lock()
        self._snapshots: OrderedDict[tuple[str, str, str], _Snapshot] = OrderedDict()
        self._held = 0

    @classmethod
    def create(cls, min_bytes: int | None) -> AppendTracker | None:
        """A tracker for a saver's ``delta_threshold`` option (``None``: deltas off)."""
        if min_bytes is None:
            return None
        if isinstance(min_bytes, bool) or not isinstance(min_bytes, int) or min_bytes < 1:
            raise ConfigError(f"delta_threshold must be a positive int or None, got {min_bytes!r}")
        return cls(min_bytes=min_bytes)

    def plan(self, key: tuple[str, str, str], version: str, tag: str, data: bytes) -> ChannelPlan:
        """The rows for ``data`` (the serializer's ``(tag, data)``) at ``version`` of ``key``."""
        if tag != "msgpack" or len(data) < self.min_bytes:
            return ChannelPlan((Row(version, tag, data),))
        shape = split_array(data)
        if shape is None:
            return ChannelPlan((Row(version, tag, data),))
        count, offset = shape
        with self._lock:
            snap = self._snapshots.get(key)
            if snap is not None:
                self._snapshots.move_to_end(key)
        if snap is not None and count >= snap.count:
            tail = len(data) - offset - snap.body
            if (
                tail <= snap.body
                and tail * (snap.tails + 1) <= 2 * snap.body
                and data.startswith(memoryview(snap.data)[snap.offset :], offset)
            ):
                snap.tails += 1
                start = offset + snap.body
                payload = array_header(count - snap.count) + data[start:]
                return ChannelPlan(
                    (Row(version, tag, payload, snap.version),),
                    needs=snap.version,
                    fallback=Row(version, tag, data),
                )
        snap = _Snapshot(new_snapshot_version(), data, offset, count)
        self._remember(key, snap)
        return ChannelPlan(
            (Row(snap.version, tag, data), Row(version, tag, array_header(0), snap.version))
        )

    def _remember(self, key: tuple[str, str, str], snap: _Snapshot) -> None:
        with self._lock:
            old = self._snapshots.pop(key, None)
            if old is not None:
                self._held -= len(old.data)
            if len(snap.data) > self.cache_bytes:
                return
            self._snapshots[key] = snap
            self._held += len(snap.data)
            while self._held > self.cache_bytes:
                _, dropped = self._snapshots.popitem(last=False)
                self._held -= len(dropped.data)

    def known(self, key: tuple[str, str, str], version: str) -> bytes | None:
        """The serializer's bytes of snapshot ``version`` of ``key``, if this process wrote it.

        Snapshots never change, so these bytes are what storage holds: a
        reader may use them instead of decompressing the stored payload (the
        latest checkpoint of a running thread is read at every invoke).
        """
        snap = self._snapshots.get(key)
        if snap is not None and snap.version == version:
            return snap.data
        return None

    def forget(self, key: tuple[str, str, str]) -> None:
        """Drop what is known of one channel (its snapshot was not found in storage)."""
        with self._lock:
            old = self._snapshots.pop(key, None)
            if old is not None:
                self._held -= len(old.data)

    def forget_threads(self, thread_ids: Iterable[str] | None = None) -> None:
        """Drop what is known of these threads (all when ``None``), after deleting rows."""
        with self._lock:
            if thread_ids is None:
                self._snapshots.clear()
                self._held = 0
                return
            doomed = set(thread_ids)
            for key in [k for k in self._snapshots if k[0] in doomed]:
                self._held -= len(self._snapshots.pop(key).data)

    @property
    def held_bytes(self) -> int:
        """Snapshot bytes currently remembered."""
        return self._held


def join_append(snapshot: Any, tail: Any, *, where: str) -> list[Any]:
    """A channel value from its decoded snapshot and tail (a new list every call).

    The elements of ``snapshot`` are not copied: tuples built from one cached
    snapshot share them (see the backends' notes on ``list``).

    Raises:
        DecodeError: either part did not decode to a list (a damaged store).
    """
    if type(snapshot) is not list or type(tail) is not list:
        raise DecodeError(
            f"append-encoded value {where} does not decode to a list (snapshot "
            f"{type(snapshot).__name__}, tail {type(tail).__name__}); the store is damaged"
        )
    return snapshot + tail

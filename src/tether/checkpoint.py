"""The checkpoint data model (SPEC S1).

Field names and shapes are LangGraph's current (v4) format, so that values
cross the LangGraph adapter without translation: a :class:`Checkpoint` is a
plain ``dict`` (a ``TypedDict``), a :class:`CheckpointTuple` a ``NamedTuple``.

A config is a mapping like LangGraph's ``RunnableConfig``:
``{"configurable": {"thread_id": ..., "checkpoint_ns": ..., "checkpoint_id": ...}}``
and may carry any number of unrelated keys, which tether ignores.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, NotRequired, TypeAlias, TypedDict

from tether.errors import ConfigError, shown
from tether.ids import EMPTY_CLOCK_SEQ, uuid6

__all__ = [
    "CHECKPOINT_VERSION",
    "ERROR",
    "INTERRUPT",
    "MAX_NAME_BYTES",
    "MAX_NS_BYTES",
    "NS_END",
    "NS_SEP",
    "RESUME",
    "SCHEDULED",
    "TASKS",
    "WRITES_IDX_MAP",
    "Address",
    "ChannelHistory",
    "ChannelVersions",
    "Checkpoint",
    "CheckpointMetadata",
    "CheckpointTuple",
    "Config",
    "PendingWrite",
    "StoredWrite",
    "address_fields",
    "check_text",
    "copy_checkpoint",
    "empty_checkpoint",
    "make_config",
    "ns_join",
    "ns_parent",
    "ns_split",
    "text_problem",
    "thread_id_text",
    "write_index",
]

#: Format version of the checkpoints tether writes (LangGraph's ``LATEST_VERSION``).
CHECKPOINT_VERSION = 4

Config: TypeAlias = Mapping[str, Any]
"""A run config: ``{"configurable": {...}, "metadata": {...}, ...}``."""

ChannelVersion: TypeAlias = str | int | float
ChannelVersions: TypeAlias = dict[str, ChannelVersion]

PendingWrite: TypeAlias = tuple[str, str, Any]
"""``(task_id, channel, value)``, one intermediate write of a task (S1.4)."""


class Checkpoint(TypedDict):
    """State snapshot of a graph at one step (S1.1)."""

    v: int
    id: str
    ts: str
    channel_values: dict[str, Any]
    channel_versions: ChannelVersions
    versions_seen: dict[str, ChannelVersions]
    updated_channels: list[str] | None


class CheckpointMetadata(TypedDict, total=False):
    """Metadata stored beside a checkpoint (S1.3); user keys are allowed and filterable."""

    source: Literal["input", "loop", "update", "fork"]
    step: int
    parents: dict[str, str]
    run_id: str


class StoredWrite(NamedTuple):
    """One pending write as a saver stores it: the :data:`PendingWrite` fields,
    and the task path and index it is kept under (S2.4).

    ``get_tuple`` answers only ``(task_id, channel, value)``, as LangGraph's
    savers do; a tool that copies writes into another store with their
    original keys (``tether export``) reads these with ``get_writes``.
    """

    task_id: str
    channel: str
    value: Any
    task_path: str
    idx: int


class CheckpointTuple(NamedTuple):
    """A checkpoint with everything needed to resume from it (S1.4)."""

    config: dict[str, Any]
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    parent_config: dict[str, Any] | None = None
    pending_writes: list[PendingWrite] | None = None


class ChannelHistory(TypedDict):
    """What one channel's value is rebuilt from when a checkpoint stores none for it.

    LangGraph's ``DeltaChannelHistory`` (``get_delta_channel_history``), field
    for field: ``writes`` are the channel's pending writes on the checkpoint's
    ancestors, oldest checkpoint first and each checkpoint's in S2.4 order,
    back to and including the nearest ancestor that stores a value for the
    channel; ``seed`` is that value, absent when no ancestor stores one.
    """

    writes: list[PendingWrite]
    seed: NotRequired[Any]


# --- special write channels (S2.4) -------------------------------------------

ERROR = "__error__"
SCHEDULED = "__scheduled__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
#: The channel of pending ``Send`` packets (LangGraph's ``langgraph.constants.TASKS``).
TASKS = "__pregel_tasks"

#: Special channels map to fixed negative indexes so they never collide with a
#: task's ordinary writes (0, 1, 2, ...) and a repeat replaces the previous one.
WRITES_IDX_MAP: dict[str, int] = {ERROR: -1, SCHEDULED: -2, INTERRUPT: -3, RESUME: -4}


def write_index(channel: str, position: int) -> int:
    """The stored index of the write at ``position`` of a ``put_writes`` batch."""
    return WRITES_IDX_MAP.get(channel, position)


# --- namespaces (S1.5) ---------------------------------------------------------

NS_SEP = "|"
NS_END = ":"


def ns_split(checkpoint_ns: str) -> list[tuple[str, str]]:
    """``"a:1|b:2"`` -> ``[("a", "1"), ("b", "2")]``; the root namespace is ``[]``."""
    if not checkpoint_ns:
        return []
    parts = []
    for part in checkpoint_ns.split(NS_SEP):
        node, _, task_id = part.partition(NS_END)
        parts.append((node, task_id))
    return parts


def ns_join(parent_ns: str, node: str, task_id: str) -> str:
    """The namespace of subgraph ``node`` run by task ``task_id`` inside ``parent_ns``."""
    if NS_SEP in node or NS_END in node:
        raise ConfigError(
            f"node name {node!r} may not contain {NS_SEP!r} or {NS_END!r}; "
            "they separate levels of a checkpoint namespace"
        )
    child = f"{node}{NS_END}{task_id}"
    return f"{parent_ns}{NS_SEP}{child}" if parent_ns else child


def ns_parent(checkpoint_ns: str) -> str:
    """The enclosing namespace (``""`` for a top-level subgraph or the root)."""
    head, sep, _ = checkpoint_ns.rpartition(NS_SEP)
    return head if sep else ""


# --- addressing (S1.5) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Address:
    """The three-part address of a checkpoint: thread, namespace, id (``None`` = latest)."""

    thread_id: str
    checkpoint_ns: str = ""
    checkpoint_id: str | None = None

    @classmethod
    def from_config(cls, config: Config, *, what: str = "config", bounded: bool = True) -> Address:
        """Read the address from a config; unrelated keys are ignored.

        ``bounded=False`` (reads and deletes) accepts names past the length
        limit, which guards writes: a thread stored before the limit existed
        can still be read and deleted.

        Raises:
            ConfigError: the config has no ``configurable.thread_id`` or a field
                has the wrong type.
        """
        return cls(*address_fields(config, what=what, bounded=bounded))

    @classmethod
    def optional(
        cls, config: Config | None, *, what: str = "config", bounded: bool = True
    ) -> Address | None:
        """Like :meth:`from_config`, but ``None`` or a config without a thread gives ``None``."""
        if config is None:
            return None
        conf = config.get("configurable") if isinstance(config, Mapping) else None
        if not isinstance(conf, Mapping) or conf.get("thread_id") is None:
            return None
        return cls.from_config(config, what=what, bounded=bounded)

    def has_ns(self, config: Config | None) -> bool:
        """Whether the config named a namespace explicitly (``list`` filters only then)."""
        if config is None:
            return False
        conf = config.get("configurable") or {}
        return "checkpoint_ns" in conf and conf["checkpoint_ns"] is not None

    def to_config(self) -> dict[str, Any]:
        """The config that addresses this checkpoint."""
        conf: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": self.checkpoint_ns}
        if self.checkpoint_id is not None:
            conf["checkpoint_id"] = self.checkpoint_id
        return {"configurable": conf}

    def with_id(self, checkpoint_id: str | None) -> Address:
        return Address(self.thread_id, self.checkpoint_ns, checkpoint_id)


#: Longest thread id, checkpoint id, channel name, version or task id, in UTF-8
#: bytes. Names are index keys on every backend, and a Postgres index row holds
#: at most about 2,700 bytes: with these two limits the widest key (a blob's
#: thread, namespace, channel and version) still fits, so a thread any backend
#: stores can be copied or imported into any other.
MAX_NAME_BYTES = 512
#: Longest checkpoint namespace (subgraph levels ``node:task_id`` joined by ``|``).
MAX_NS_BYTES = 1024


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be a stored name (thread, namespace, id, channel, task), or None.

    Every backend refuses the same names: a lone surrogate (not valid Unicode;
    neither UTF-8 nor Postgres text can hold it) and U+0000 (Postgres text
    cannot hold it). One rule for all, so a thread that can be stored in one
    backend can be copied or imported into any other.
    """
    if value.isascii():
        if "\x00" not in value:
            return None
    else:
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            return (
                f"holds a lone surrogate {value[exc.start]!r} at position {exc.start} "
                "(not valid Unicode text; decode the bytes it came from properly)"
            )
        if "\x00" not in value:
            return None
    return f"holds U+0000 (NUL) at position {value.index(chr(0))}"


def thread_id_text(
    value: Any, what: str = "thread_id", *, limit: int | None = MAX_NAME_BYTES
) -> str:
    """A thread id as text (S1.5): a str as is, an int, float or UUID converted.

    (as configs always were: bools and bytes too, as ``str()`` gives them).
    Anything else (None, a list, a dict) is a ConfigError rather than its
    ``str()``, which would name a thread nobody meant. The text is checked
    with :func:`check_text` (``limit=None``: any length, for an id that
    names a stored thread rather than one to write).
    """
    if type(value) is not str:
        if isinstance(value, str):
            value = str.__str__(value)
        elif isinstance(value, int | float) or hasattr(value, "hex"):  # S1.5: converted
            value = str(value)
        else:
            raise ConfigError(
                f"{what} must be a string (or an int or UUID), got {type(value).__name__} {value!r}"
            )
    return check_text(value, what, limit)


def check_text(value: str, what: str, limit: int | None = MAX_NAME_BYTES) -> str:
    """``value`` if it can be a stored name (:func:`text_problem`, at most ``limit``
    bytes in UTF-8; ``None``: any length), else ConfigError."""
    problem = text_problem(value)
    # A char is at most 4 bytes: a shorter value is within the limit at a glance.
    if problem is None and limit is not None and len(value) * 4 > limit:
        size = len(value) if value.isascii() else len(value.encode())
        if size > limit:
            problem = (
                f"is {size:,} bytes long; every backend keeps names as index keys, at most "
                f"{limit:,} bytes (UTF-8); use a shorter name, or a hash of a long one"
            )
            raise ConfigError(f"{what} {value[:40]!r}... {problem}")
    if problem is not None:
        raise ConfigError(f"{what} {shown(value)} {problem}; no backend can store it")
    return value


def address_fields(
    config: Config, *, what: str = "config", bounded: bool = True
) -> tuple[str, str, str | None]:
    """``(thread_id, checkpoint_ns, checkpoint_id)`` of a config, as :meth:`Address.from_config`.

    ``bounded=False``: names past the length limit are accepted (reads and
    deletes of what is stored; the limit guards writes, issue #20.3).

    For savers whose every call starts here and that need the three strings,
    not an :class:`Address` (whose frozen construction costs as much again).

    Raises:
        ConfigError: as :meth:`Address.from_config`.
    """
    if type(config) is dict:
        # The common case (plain dicts of plain strings), read without
        # isinstance checks against the Mapping ABC. Anything else takes the
        # checks below.
        conf = config.get("configurable")
        if type(conf) is dict:
            thread_id = conf.get("thread_id")
            ns = conf.get("checkpoint_ns") or ""
            cid = conf.get("checkpoint_id") or None
            if (
                type(thread_id) is str
                and type(ns) is str
                and (cid is None or type(cid) is str)
                and thread_id.isascii()
                and "\x00" not in thread_id
                and (not ns or (ns.isascii() and "\x00" not in ns))
                and (cid is None or (cid.isascii() and "\x00" not in cid))
                and (
                    not bounded
                    or (
                        len(thread_id) <= MAX_NAME_BYTES
                        and len(ns) <= MAX_NS_BYTES
                        and (cid is None or len(cid) <= MAX_NAME_BYTES)
                    )
                )
            ):
                return thread_id, ns, cid
    elif not isinstance(config, Mapping):
        raise ConfigError(f"{what} must be a mapping, got {type(config).__name__}")
    conf = config.get("configurable")
    if not isinstance(conf, Mapping) or conf.get("thread_id") is None:
        raise ConfigError(
            f"{what} has no thread_id; pass "
            '{"configurable": {"thread_id": "..."}} to address a thread'
        )
    name_limit, ns_limit = (MAX_NAME_BYTES, MAX_NS_BYTES) if bounded else (None, None)
    thread_id = thread_id_text(conf["thread_id"], f"{what}: thread_id", limit=name_limit)
    ns = conf.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise ConfigError(f"{what}: checkpoint_ns must be a string, got {type(ns).__name__}")
    cid = conf.get("checkpoint_id") or None
    if cid is not None and not isinstance(cid, str):
        raise ConfigError(f"{what}: checkpoint_id must be a string, got {type(cid).__name__}")
    # A str subclass (an enum's str mixin, a label type) is addressed by its text.
    ns = check_text(str.__str__(ns), f"{what}: checkpoint_ns", ns_limit)
    if cid is not None:
        cid = check_text(str.__str__(cid), f"{what}: checkpoint_id", name_limit)
    return thread_id, ns, cid


def make_config(
    thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
) -> dict[str, Any]:
    """A config addressing ``thread_id`` (and optionally a namespace and checkpoint)."""
    return Address(thread_id, checkpoint_ns, checkpoint_id).to_config()


# --- construction helpers --------------------------------------------------------


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def empty_checkpoint() -> Checkpoint:
    """A checkpoint with no channels; its id carries the empty sentinel clock_seq (S1.2)."""
    return Checkpoint(
        v=CHECKPOINT_VERSION,
        id=str(uuid6(clock_seq=EMPTY_CLOCK_SEQ)),
        ts=_now_iso(),
        channel_values={},
        channel_versions={},
        versions_seen={},
        updated_channels=None,
    )


def copy_checkpoint(checkpoint: Checkpoint) -> Checkpoint:
    """A copy deep enough that mutating the copy's dicts never touches the original.

    Channel values are deep-copied too: a caller that appends to a stored list
    must not change what the saver holds. Unknown keys are kept.
    """
    out: dict[str, Any] = dict(checkpoint)
    out["channel_values"] = copy.deepcopy(checkpoint.get("channel_values", {}))
    out["channel_versions"] = dict(checkpoint.get("channel_versions", {}))
    out["versions_seen"] = {k: dict(v) for k, v in checkpoint.get("versions_seen", {}).items()}
    updated = checkpoint.get("updated_channels")
    out["updated_channels"] = list(updated) if updated is not None else None
    return out  # type: ignore[return-value]

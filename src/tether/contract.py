"""The saver contract's rules as functions: validation, metadata, writes, filters.

Nothing here touches storage. Every backend calls these, and so do the
contract suite (:mod:`tether.testing`) and the LangGraph drop-ins, so that
the rules :mod:`tether.base` states are written once, not once per backend:
which config keys are merged into metadata, how a filter compares values,
which index a write gets, what a prune strategy keeps, which names and
versions a store accepts. A backend differs only in *how* it stores.

Public so that a saver written outside tether can apply the same rules;
names starting with ``_`` are not part of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import ormsgpack

from tether.checkpoint import (
    MAX_NAME_BYTES,
    Address,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    Config,
    check_text,
    text_problem,
    thread_id_text,
    write_index,
)
from tether.errors import ConfigError, DecodeError
from tether.serde._ext import PASSTHROUGH
from tether.serde.base import SerializerProtocol

__all__ = [
    "EMPTY",
    "EMPTY_TAG",
    "EXCLUDED_METADATA_KEYS",
    "MAX_METADATA_DEPTH",
    "PLAIN_ONLY",
    "WriteRow",
    "before_checkpoint_id",
    "check_channel_names",
    "check_checkpoint",
    "check_filter",
    "check_head",
    "check_limit",
    "check_list_args",
    "check_prune",
    "check_run_id",
    "check_thread_id",
    "check_thread_ids",
    "checkpoint_address",
    "decode_value",
    "dumps_json",
    "index_writes",
    "loads_json",
    "merge_metadata",
    "metadata_matches",
    "prepare_writes",
    "split_channel_values",
]

#: Config keys that address or describe a run step, never copied into metadata.
EXCLUDED_METADATA_KEYS = frozenset(
    {
        "thread_id",
        "checkpoint_id",
        "checkpoint_ns",
        "checkpoint_map",
        "langgraph_step",
        "langgraph_node",
        "langgraph_triggers",
        "langgraph_path",
        "langgraph_checkpoint_ns",
    }
)


def _meta_text(value: str, where: str) -> str:
    """A metadata string as stored: U+0000 dropped (Postgres text and JSONB cannot
    hold it; every backend drops it); a lone surrogate is a ConfigError. A str
    subclass (an enum's str mixin, a label type) is stored as the plain str."""
    if type(value) is not str:
        value = str.__str__(value)
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise ConfigError(
                f"metadata {where} {value!r} holds a lone surrogate {value[exc.start]!r} at "
                f"position {exc.start}: not valid Unicode text, no backend can store it"
            ) from None
    return value.replace("\x00", "") if "\x00" in value else value


_PLAIN_SCALARS = frozenset({int, bool, type(None)})


#: Metadata (and filter values) nested deeper than this is refused: JSON that
#: deep is a mistake, and Python's recursion limit would end the walk anyway.
MAX_METADATA_DEPTH = 64


def _json_safe(value: Any, path: str, depth: int = 0) -> Any:
    """Check that ``value`` is plain JSON (metadata must be queryable in SQL)."""
    kind = type(value)
    if kind in _PLAIN_SCALARS:  # the common case, without isinstance's ABC checks
        return value
    if kind is str:
        return _meta_text(value, f"value at {path}")
    if kind is dict and not value:
        return {}
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"metadata value at {path} is {value!r}; JSON has no NaN/inf")
        return value
    if isinstance(value, str):
        return _meta_text(value, f"value at {path}")
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_METADATA_DEPTH:
        where = path if len(path) <= 200 else path[:200] + "..."
        raise ConfigError(
            f"metadata at {where} is nested more than {MAX_METADATA_DEPTH} levels deep; "
            "store a flatter value"
        )
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"metadata key {k!r} at {path} must be a string")
            out[_meta_text(k, f"key at {path}")] = _json_safe(v, f"{path}.{k}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_json_safe(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    raise ConfigError(
        f"metadata value at {path} has type {type(value).__name__}; metadata is stored "
        "as JSON, use str, int, float, bool, None, lists or dicts of them"
    )


def merge_metadata(config: Config, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata ``put`` stores (S2.3).

    ``metadata`` as given (checked to be JSON), plus the str/int/float/bool
    entries of ``config["metadata"]`` and ``config["configurable"]`` that are
    not internal (addressing keys, keys starting with ``__``); given keys win.
    A ``"writes"`` key (a legacy LangGraph field) is dropped.
    """
    out = _plain_metadata(metadata) if type(metadata) is dict else None
    if out is None:
        if not isinstance(metadata, Mapping):
            raise ConfigError(f"metadata must be a mapping, got {type(metadata).__name__}")
        out = _json_safe(dict(metadata), "$")
    if "writes" in out:
        del out["writes"]
    for source in (config.get("metadata"), config.get("configurable")):
        if not source:
            continue
        for key, v in source.items():
            if (
                not isinstance(key, str)
                or key in out
                or key in EXCLUDED_METADATA_KEYS
                or key.startswith("__")
            ):
                continue
            kind = type(v)
            if kind is str or isinstance(v, str):
                key = _meta_text(key, "key from the config")
                out[key] = _meta_text(v, f"value of config key {key!r}")
            elif (
                kind is int
                or kind is bool
                or isinstance(v, bool | int)
                or (isinstance(v, float) and math.isfinite(v))
            ):
                out[_meta_text(key, "key from the config")] = v
    run_id = out.get("run_id")
    if run_id is not None:
        check_run_id(run_id)
    return out


def check_run_id(run_id: Any) -> None:
    """A metadata ``run_id`` every backend can store: at most :data:`MAX_NAME_BYTES`.

    It is an index key as names are (Postgres indexes ``metadata ->> 'run_id'``
    for ``delete_for_runs``; SQLite its ``run_id`` column), so the same limit
    holds on every backend (issue #20.3): before it, memory and SQLite stored a
    run_id Postgres refused. A value that is not a string is measured as the
    JSON text Postgres indexes.
    """
    if type(run_id) is str:
        if len(run_id) * 4 > MAX_NAME_BYTES:  # a char is at most 4 bytes
            check_text(run_id, "metadata run_id")
        return
    text = json.dumps(run_id, ensure_ascii=False)
    size = len(text.encode())
    if size > MAX_NAME_BYTES:
        raise ConfigError(
            f"metadata run_id {text[:40]}... is {size:,} bytes long as JSON; every backend "
            f"keeps run_id as an index key, at most {MAX_NAME_BYTES:,} bytes (UTF-8); use a "
            "shorter run_id, or a hash of a long one"
        )


def _plain_metadata(metadata: Mapping[Any, Any]) -> dict[str, Any] | None:
    """``_json_safe(dict(metadata), "$")`` for the common case, else None.

    ``put`` runs this at every step. The general walk builds a path string per
    key; here only values that are not plain scalars take it. ``None`` (a key
    that is not a string or holds NUL) sends the caller to the general walk,
    which raises or merges exactly as before.
    """
    out: dict[str, Any] = {}
    for k, v in metadata.items():
        if type(k) is not str or "\x00" in k or not k.isascii():
            return None
        kind = type(v)
        if kind is str:
            out[k] = _meta_text(v, f"value at $.{k}")
        elif kind in _PLAIN_SCALARS:
            out[k] = v
        elif kind is dict and not v:
            out[k] = {}
        else:
            out[k] = _json_safe(v, f"$.{k}", 1)
    return out


def check_limit(limit: int | None) -> int | None:
    """``None`` = all, ``0`` = none; a negative or non-integer limit is a ConfigError."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ConfigError(f"limit must be an int or None, got {limit!r}")
    if limit < 0:
        raise ConfigError(f"limit must be >= 0 (0 lists nothing, None lists all), got {limit}")
    return limit


def check_list_args(
    config: Config | None,
    filter: Mapping[str, Any] | None,
    before: Config | None,
    limit: int | None,
) -> tuple[Address | None, dict[str, Any], str | None, int | None]:
    """Validate ``list`` arguments: ``(address, filter, before_id, limit)``.

    Every backend calls this when ``list`` is called (not at the first item),
    so bad input fails at the call.
    """
    addr = Address.optional(config, bounded=False)  # a read: any stored id (#20.3)
    want = check_filter(filter)
    limit = check_limit(limit)
    before_id = None if before is None else before_checkpoint_id(before)
    return addr, want, before_id, limit


def before_checkpoint_id(before: Config) -> str:
    """The checkpoint id a ``list(before=...)`` config names: the cursor to list below.

    Only ``configurable.checkpoint_id`` matters, as for LangGraph's savers:
    LangGraph's own replay of a graph with subgraphs passes
    ``{"configurable": {"checkpoint_id": X}}`` with no thread. Ids are
    time-ordered across threads, so the bound means the same whatever thread
    or namespace ``before`` names; those keys, and any others, are ignored.

    Raises:
        ConfigError: ``before`` is not a config, has no checkpoint id, or the id
            is not text any backend can store.
    """
    conf = before.get("configurable") if isinstance(before, Mapping) else None
    if not isinstance(conf, Mapping):
        raise ConfigError(
            "before must be a config naming a checkpoint, "
            '{"configurable": {"checkpoint_id": "..."}} (the cursor to list below), '
            f"got {before!r:.100}"
        )
    cid = conf.get("checkpoint_id")
    if not cid:
        raise ConfigError("before must name a checkpoint_id (the cursor to list below)")
    if not isinstance(cid, str):
        raise ConfigError(
            f"before: checkpoint_id must be a string, got {type(cid).__name__} {cid!r:.100}"
        )
    return check_text(str.__str__(cid), "before: checkpoint_id")


def check_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate a ``list`` metadata filter; returns a JSON-safe copy.

    Keys are user input: they are only ever passed to SQL as bound
    parameters, but they must at least be strings.
    """
    if not filter:
        return {}
    if not isinstance(filter, Mapping):
        raise ConfigError(f"filter must be a mapping of metadata keys, got {filter!r}")
    out = {}
    for k, v in filter.items():
        if not isinstance(k, str):
            raise ConfigError(f"filter key {k!r} must be a string (a top-level metadata key)")
        # As stored metadata keys: NUL dropped, a lone surrogate refused.
        out[_meta_text(k, "filter key")] = _json_safe(v, f"filter[{k!r}]", 1)
    return out


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value, bool only equals bool."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """The reference semantics of ``list(filter=...)`` (SQL backends must agree)."""
    for key, want in filter.items():
        if key not in metadata or not _json_equal(metadata[key], want):
            return False
    return True


_NO_VALUES: Mapping[str, Any] = {}


def check_checkpoint(checkpoint: Checkpoint, new_versions: ChannelVersions) -> None:
    """Reject a checkpoint a backend could store but never read back consistently."""
    # type(x) is dict first: put runs this at every step, and isinstance against
    # the Mapping ABC is the slow part for the plain dicts callers pass.
    if type(checkpoint) is not dict and not isinstance(checkpoint, Mapping):
        raise ConfigError(f"checkpoint must be a mapping, got {type(checkpoint).__name__}")
    cid = checkpoint.get("id")
    if not isinstance(cid, str) or not cid:
        raise ConfigError(f"checkpoint has no string 'id' (got {cid!r}); build it with tether")
    versions = checkpoint.get("channel_versions")
    if type(versions) is not dict and not isinstance(versions, Mapping):
        raise ConfigError(f"checkpoint {cid}: 'channel_versions' must be a mapping")
    values = checkpoint.get("channel_values", _NO_VALUES)
    if type(values) is not dict and not isinstance(values, Mapping):
        raise ConfigError(f"checkpoint {cid}: 'channel_values' must be a mapping")
    if type(new_versions) is not dict and not isinstance(new_versions, Mapping):
        raise ConfigError(f"checkpoint {cid}: new_versions must be a mapping")
    if not (cid.isascii() and "\x00" not in cid and len(cid) <= MAX_NAME_BYTES):
        check_text(cid, "checkpoint id")
    check_channel_names(new_versions, cid)
    if new_versions.items() <= versions.items():
        return  # every new version is the checkpoint's (the common case, checked in C)
    for channel, version in new_versions.items():
        have = versions.get(channel)
        if have is not None and have != version:
            raise ConfigError(
                f"checkpoint {cid}: new_versions[{channel!r}] = {version!r} but "
                f"channel_versions[{channel!r}] = {have!r}; the value would be stored "
                "under a version the checkpoint never reads"
            )


#: ormsgpack options under which packb accepts only exact dict, list, str (no
#: lone surrogates), int (64 bits), float, bool, None and bytes-like values,
#: with str keys: what tether's serializer writes as plain MessagePack, byte
#: for byte, and reads back as the same values (no ext types to decode).
#: Anything else raises TypeError.
PLAIN_ONLY = ormsgpack.OPT_PASSTHROUGH_SUBCLASS | PASSTHROUGH


def check_head(head: Mapping[str, Any], cid: str) -> bytes | None:
    """Check that a checkpoint without its channel values is plain JSON (S1).

    Every backend stores these fields where SQL can read them (Postgres
    JSONB) or in the same shape, so all of them refuse what JSON cannot hold:
    other types (sets, tuples, datetimes, enums, str subclasses), NaN and
    infinities, non-str keys, lone surrogates and U+0000 in strings.

    Returns the fields packed as plain MessagePack (what the in-memory saver
    stores), or None for a plain head ormsgpack cannot pack (an int beyond
    64 bits). The common head costs one ``packb`` in C; only a head whose
    bytes could hide a problem (a float, a bin, a 0 byte) or that ormsgpack
    refuses is walked in Python.

    Raises:
        ConfigError: naming the field, its path and its type.
    """
    try:
        data = ormsgpack.packb(head, option=PLAIN_ONLY)
    except TypeError:
        _check_json(head, "checkpoint", cid, 0)
        return None
    if 0xCB in data or 0 in data or 0xC4 in data or 0xC5 in data or 0xC6 in data:
        _check_json(head, "checkpoint", cid, 0)
    return data


def _check_json(value: Any, path: str, cid: str, depth: int) -> None:
    kind = type(value)
    if kind is str:
        problem = text_problem(value)
        if problem is not None:
            raise ConfigError(
                f"checkpoint {cid}: {path} {value!r} {problem}; no backend can store it"
            )
        return
    if value is None or kind is int or kind is bool:
        return
    if kind is float:
        if not math.isfinite(value):
            raise ConfigError(f"checkpoint {cid}: {path} is {value!r}; JSON has no NaN or infinity")
        return
    if depth >= MAX_METADATA_DEPTH and (kind is dict or kind is list):
        raise ConfigError(f"checkpoint {cid}: {path} is nested too deep")
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ConfigError(
                    f"checkpoint {cid}: {path} has the key {key!r} ({type(key).__name__}); "
                    "keys of a checkpoint's fields must be str"
                )
            problem = text_problem(key)
            if problem is not None:
                raise ConfigError(
                    f"checkpoint {cid}: {path} has the key {key!r}, which {problem}; no "
                    "backend can store it"
                )
            _check_json(item, f"{path}.{key}", cid, depth + 1)
        return
    if kind is list:
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", cid, depth + 1)
        return
    raise ConfigError(
        f"checkpoint {cid}: {path} is {kind.__name__} {value!r:.80}; a checkpoint's fields other "
        "than channel_values must be plain JSON values (str, int, float, bool, None, lists, "
        "dicts with str keys), as every backend stores them"
    )


def _plain_name(value: Any) -> bool:
    """Whether ``value`` is a name every backend stores as it is, at a glance (ASCII)."""
    return (
        type(value) is str
        and value.isascii()
        and "\x00" not in value
        and len(value) <= MAX_NAME_BYTES
    )


def _check_name(value: Any, what: str) -> None:
    """The slow path of a name check: a str any backend can store, else ConfigError."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {type(value).__name__} {value!r}")
    check_text(value, what)


def check_channel_names(new_versions: ChannelVersions, cid: str) -> None:
    """Channel names and versions a put stores as keys: strings any backend can store."""
    for channel, version in new_versions.items():
        if not _plain_name(channel):
            _check_name(channel, f"checkpoint {cid}: channel name")
        kind = type(version)
        if isinstance(version, str):
            if not (version.isascii() and "\x00" not in version and len(version) <= MAX_NAME_BYTES):
                check_text(version, f"checkpoint {cid}: version of channel {channel!r}")
        elif kind is not int and kind is not float:
            raise ConfigError(
                f"checkpoint {cid}: version of channel {channel!r} must be an int, float or "
                f"str (as get_next_version returns), got {kind.__name__} {version!r}"
            )


def split_channel_values(
    checkpoint: Checkpoint, new_versions: ChannelVersions
) -> tuple[dict[str, Any], dict[str, tuple[str, Any]]]:
    """The checkpoint without ``channel_values``, and the values to write as blobs.

    Returns ``(head, blobs)`` where ``blobs`` maps channel -> (version, value)
    for every channel in ``new_versions``; a channel in ``new_versions`` but
    not in ``channel_values`` (a cleared channel) maps to ``_EMPTY``. Unknown
    keys of the checkpoint stay in ``head``.
    """
    head: dict[str, Any] = dict(checkpoint)
    values = head.pop("channel_values", None)
    if type(head["id"]) is not str:  # a str subclass (check_checkpoint allowed it)
        head["id"] = str.__str__(head["id"])
    blobs: dict[str, tuple[str, Any]] = {}
    for channel, version in new_versions.items():
        blobs[channel] = (str(version), values.get(channel, EMPTY) if values else EMPTY)
    return head, blobs


class _Empty:
    """Marks a channel written as empty: stored as tag ``"empty"``, read back as absent."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY: Any = _Empty()
EMPTY_TAG = "empty"


@dataclass(frozen=True, slots=True)
class WriteRow:
    """One write as stored: its index is the batch position or a special slot."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Any

    @property
    def replaces(self) -> bool:
        """Special writes (negative idx) replace; ordinary ones are insert-or-ignore."""
        return self.idx < 0


def checkpoint_address(config: Config, what: str) -> Address:
    """The address of one stored checkpoint; ``what`` (a method) needs its id in ``config``.

    For reads (``get_writes``): a name past the length limit is accepted, as
    a thread stored before the limit existed may have one (#20.3).
    """
    addr = Address.from_config(config, bounded=False)
    if addr.checkpoint_id is None:
        raise ConfigError(
            f"{what} for thread {addr.thread_id!r} needs the config of a checkpoint "
            "(configurable.checkpoint_id), as returned by put() or list()"
        )
    return addr


def prepare_writes(
    writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
) -> list[WriteRow]:
    """Check a ``put_writes`` batch and assign indexes (S2.4).

    When a batch names the same special channel twice, the last one wins, as
    it would if the two were sent in separate batches.
    """
    return [
        WriteRow(task_id, task_path, idx, channel, value)
        for idx, channel, value in index_writes(writes, task_id, task_path)
    ]


def index_writes(
    writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
) -> list[tuple[int, str, Any]]:
    """:func:`prepare_writes` as ``(idx, channel, value)`` tuples, the same rows in order.

    For a backend that stores tuples anyway (in-memory): a frozen
    :class:`WriteRow` per write costs about as much as serializing a small value.
    """
    if not isinstance(task_id, str) or not task_id:
        raise ConfigError(f"task_id must be a non-empty string, got {task_id!r}")
    if not isinstance(task_path, str):
        raise ConfigError(f"task_path must be a string, got {task_path!r}")
    if not _plain_name(task_id):
        check_text(task_id, "task_id")
    if task_path and not (task_path.isascii() and "\x00" not in task_path):
        check_text(task_path, f"task_path of task {task_id!r}")
    # One task per batch, so the index alone is the row's key (task_id, idx).
    rows: dict[int, tuple[int, str, Any]] = {}
    try:
        items = enumerate(writes)
    except TypeError:
        raise ConfigError(
            f"writes of task {task_id!r} must be a sequence of (channel, value) pairs, "
            f"got {type(writes).__name__}"
        ) from None
    for position, item in items:
        try:
            channel, value = item
        except (TypeError, ValueError):
            raise ConfigError(
                f"write #{position} of task {task_id!r} must be a (channel, value) pair, "
                f"got {item!r}"
            ) from None
        if not _plain_name(channel):
            _check_name(channel, f"write #{position} of task {task_id!r}: channel")
        idx = write_index(channel, position)
        rows[idx] = (idx, channel, value)
    return list(rows.values())


def check_thread_ids(
    thread_ids: Sequence[str], what: str = "thread_ids", *, bounded: bool = True
) -> list[str]:
    """A list of thread ids; a bare string is refused (it would be split into chars).

    ``bounded=False`` (prune, delete_for_runs: deleting what is stored) accepts
    ids past the length limit, which guards writes (#20.3).
    """
    if isinstance(thread_ids, str | bytes):
        raise ConfigError(f"{what} must be a sequence of ids, got the string {thread_ids!r}")
    if isinstance(thread_ids, Mapping) or not isinstance(thread_ids, Iterable):
        raise ConfigError(
            f"{what} must be a sequence of ids, got {type(thread_ids).__name__} {thread_ids!r}"
        )
    limit = MAX_NAME_BYTES if bounded else None
    return [thread_id_text(t, f"{what}: id", limit=limit) for t in thread_ids]


def check_thread_id(thread_id: Any, what: str = "thread_id", *, bounded: bool = True) -> str:
    """A thread id given on its own (delete_thread, copy_thread): as text, checked.

    ``bounded=False`` (delete_thread, the source of copy_thread) accepts an id
    past the length limit: a thread stored before the limit existed can still
    be read and deleted; the limit guards writes (#20.3).
    """
    return thread_id_text(thread_id, what, limit=MAX_NAME_BYTES if bounded else None)


def check_prune(strategy: str, keep: int) -> int:
    """How many newest checkpoints per namespace a prune keeps (0 = delete all)."""
    if strategy == "keep_latest":
        return 1
    if strategy == "delete":
        return 0
    if strategy == "keep_last":
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"prune(strategy='keep_last') needs keep >= 1, got {keep!r}")
        return keep
    raise ConfigError(
        f"unknown prune strategy {strategy!r}; use 'keep_latest', 'keep_last' (with keep=N) "
        "or 'delete'"
    )


def decode_value(
    serde: SerializerProtocol,
    tag: str,
    data: bytes,
    *,
    address: Address | None = None,
    checkpoint_id: str | None = None,
    channel: str | None = None,
    task_id: str | None = None,
) -> Any:
    """Decode a stored value; a failure names thread, checkpoint and channel."""
    try:
        return serde.loads_typed((tag, data))
    except DecodeError as exc:
        exc.with_context(
            thread_id=address.thread_id if address else None,
            checkpoint_ns=address.checkpoint_ns if address and address.checkpoint_ns else None,
            checkpoint_id=checkpoint_id or (address.checkpoint_id if address else None),
            channel=channel,
            task_id=task_id,
        )
        raise


def dumps_json(value: Any) -> str:
    """Compact JSON for metadata and checkpoint heads stored as text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_decode_json = msgspec.json.Decoder().decode


def loads_json(data: str | bytes | bytearray | memoryview) -> Any:
    """Parse stored JSON (metadata, Postgres JSONB columns).

    msgspec parses the same values as the json module (integers of any size
    stay exact, unlike orjson, which turns ints beyond 64 bits into floats)
    at 3-4x its speed; listing is mostly this. What msgspec refuses and the
    json module accepts (a number beyond float range, a lone surrogate) goes
    to the json module, so nothing reads differently than before.
    """
    try:
        return _decode_json(data)
    except msgspec.DecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview | bytearray) else data)

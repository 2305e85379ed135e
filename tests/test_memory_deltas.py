"""Append deltas in the in-memory saver (SPEC S5.1, S7): what is stored, and when."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

import pytest

from tether import InMemorySaver
from tether.backends._delta import is_snapshot_version
from tether.backends.memory import GROUP
from tether.checkpoint import empty_checkpoint, make_config
from tether.errors import ConfigError, DecodeError
from tether.ids import uuid6
from tether.serde import MsgpackSerializer
from tether.testing._driver import RECORD_TYPE, ContractRecord
from tether.testing._history import message

Grown = tuple[dict[str, Any], dict[str, Any] | None]


def _step(saver: InMemorySaver, start: Grown, values: dict[str, Any], **meta: Any) -> Grown:
    """Put a child of ``start``'s checkpoint changing ``values`` (no deep copy of the history)."""
    config, prev = start
    ckpt: dict[str, Any] = dict(empty_checkpoint() if prev is None else prev)
    ckpt["id"] = str(uuid6())
    ckpt["channel_values"] = {**ckpt["channel_values"], **values}
    ckpt["channel_versions"] = dict(ckpt["channel_versions"])
    new_versions = {}
    for channel in values:
        version = saver.get_next_version(ckpt["channel_versions"].get(channel))
        ckpt["channel_versions"][channel] = version
        new_versions[channel] = version
    out = saver.put(config, ckpt, {"source": "loop", "step": 0, **meta}, new_versions)
    return out, ckpt


def _grow(saver: InMemorySaver, n: int, start: Grown | None = None, **meta: Any) -> Grown:
    at: Grown = start if start is not None else (make_config("t"), None)
    for _ in range(n):
        history = at[1]["channel_values"].get("history", []) if at[1] else []
        at = _step(
            saver, at, {"history": [*history, message(len(history))], "turn": len(history)}, **meta
        )
    return at


class Stored(NamedTuple):
    size: int  # serialized bytes
    base: str | None  # the snapshot a tail extends


def _stored(blob: Any) -> Stored:
    """What the tests look at in a stored blob (the saver's internal layout, read in one place)."""
    _, _, payload, base = blob  # (type, encoding, payload: a 4-byte checksum + data, base)
    return Stored(len(payload) - 4, base)


def _history_rows(saver: InMemorySaver, tid: str = "t", ns: str = "") -> dict[str, Stored]:
    """version -> stored size and base of the ``history`` blobs of one namespace."""
    blobs = saver._threads[tid][ns].blobs
    return {v: _stored(blob) for (ch, v), blob in blobs.items() if ch == "history"}


def _assert_exactly_the_needed_blobs(saver: InMemorySaver) -> None:
    """Every namespace holds the blobs its checkpoints name plus the snapshots those extend."""
    named: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for tup in saver.list(None):
        conf = tup.config["configurable"]
        space = named.setdefault((conf["thread_id"], conf["checkpoint_ns"]), set())
        space.update((ch, str(v)) for ch, v in tup.checkpoint["channel_versions"].items())
    assert set(named) == {(t, n) for t, spaces in saver._threads.items() for n in spaces}
    for (tid, ns_name), keys in named.items():
        blobs = saver._threads[tid][ns_name].blobs
        based = [(ch, _stored(blobs[(ch, v)]).base) for ch, v in keys]
        bases = {(ch, base) for ch, base in based if base is not None}
        assert set(blobs) == keys | bases


def _latest_history(saver: InMemorySaver, tid: str = "t") -> Any:
    tup = saver.get_tuple(make_config(tid))
    assert tup is not None
    return tup.checkpoint["channel_values"]["history"]


def test_a_growing_history_is_stored_as_snapshots_and_tails() -> None:
    saver = InMemorySaver()
    _, last = _grow(saver, 200)
    assert last is not None
    assert _latest_history(saver) == last["channel_values"]["history"]
    rows = _history_rows(saver)
    snapshots = [v for v in rows if is_snapshot_version(v)]
    tails = [b for b in rows.values() if b.base is not None]
    # every step once the history is past the threshold (4 KiB: ten messages)
    assert 185 < len(tails) < 200
    assert 4 < len(snapshots) < 40
    stored = sum(b.size for b in rows.values())
    serde = MsgpackSerializer()
    whole = sum(len(serde.dumps_typed([message(i) for i in range(n)])[1]) for n in range(1, 201))
    # storing the whole history at every step is O(N^2) bytes; snapshots and
    # tails about O(N^1.5): an eighth here at N = 200, less the longer the history
    assert stored < whole / 6
    assert saver.stats()["bytes"] < whole / 5
    listed = list(saver.list(make_config("t")))
    assert len(listed) == 200
    assert [len(t.checkpoint["channel_values"]["history"]) for t in listed] == list(
        range(200, 0, -1)
    )


def test_delta_threshold_none_stores_whole_values() -> None:
    saver = InMemorySaver(delta_threshold=None)
    _grow(saver, 30)
    rows = _history_rows(saver)
    assert len(rows) == 30
    assert all(not is_snapshot_version(v) and blob.base is None for v, blob in rows.items())


class _Delegating:
    """A serializer that is not tether's MsgpackSerializer (same bytes, same tags)."""

    def __init__(self) -> None:
        self._inner = MsgpackSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self._inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self._inner.loads_typed(data)


def test_values_of_another_serializer_are_stored_whole() -> None:
    # Only tether's MessagePack is known to decode an array as the list of its
    # elements, which is what snapshot + tail relies on.
    saver = InMemorySaver(serde=_Delegating())
    _, last = _grow(saver, 30)
    rows = _history_rows(saver)
    assert len(rows) == 30
    assert all(not is_snapshot_version(v) and b.base is None for v, b in rows.items())
    assert last is not None
    assert _latest_history(saver) == last["channel_values"]["history"]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "4096"])
def test_bad_delta_threshold_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match="delta_threshold"):
        InMemorySaver(delta_threshold=bad)


def test_delete_thread_forgets_the_snapshot_so_the_next_put_starts_a_new_one() -> None:
    saver = InMemorySaver()
    start = _grow(saver, 30)
    saver.delete_thread("t")
    _, last = _grow(saver, 1, start)
    rows = _history_rows(saver)
    assert len(rows) == 2  # a fresh snapshot and an empty tail on it
    ((version, _),) = [(v, b) for v, b in rows.items() if is_snapshot_version(v)]
    assert [b.base for b in rows.values() if b.base is not None] == [version]
    assert last is not None
    assert _latest_history(saver) == last["channel_values"]["history"]


def test_a_tail_whose_snapshot_is_gone_is_stored_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # A put plans its tail outside the lock; a delete_thread that lands between
    # the plan and the store leaves the tracker remembering a dropped snapshot.
    # Not forgetting on delete reproduces that state deterministically.
    saver = InMemorySaver()
    start = _grow(saver, 30)
    monkeypatch.setattr(saver, "_forget", lambda thread_ids: None)
    saver.delete_thread("t")
    cfg, prev = _grow(saver, 1, start)
    assert prev is not None
    (blob,) = _history_rows(saver).values()
    assert blob.base is None  # the whole value, no base
    assert _latest_history(saver) == prev["channel_values"]["history"]
    # the tracker forgot the dropped snapshot: tails resume on a new one
    _, last = _grow(saver, 3, (cfg, prev))
    rows = _history_rows(saver)
    assert sum(1 for v in rows if is_snapshot_version(v)) == 1
    assert sum(1 for b in rows.values() if b.base is not None) == 3
    assert last is not None
    assert _latest_history(saver) == last["channel_values"]["history"]
    listed = saver.list(make_config("t"))
    assert [len(t.checkpoint["channel_values"]["history"]) for t in listed] == [
        34,
        33,
        32,
        31,
    ]


def test_prune_keeps_exactly_the_blobs_survivors_need() -> None:
    saver = InMemorySaver()
    start = _grow(saver, 60)
    _grow(saver, 20, (make_config("t", "child:1"), None))
    saver.copy_thread("t", "u")
    saver.prune(["t"], strategy="keep_last", keep=7)
    _assert_exactly_the_needed_blobs(saver)
    saver.prune(["t"], strategy="keep_latest")
    _assert_exactly_the_needed_blobs(saver)
    rows = _history_rows(saver)
    # the survivor's tail and its snapshot, nothing else
    assert len(rows) == 2
    (tail,) = [b for b in rows.values() if b.base is not None]
    assert [v for v in rows if is_snapshot_version(v)] == [tail.base]
    _, last = _grow(saver, 5, start)
    assert last is not None
    assert _latest_history(saver) == last["channel_values"]["history"]
    # the copy still has every checkpoint, with the snapshots its tails extend
    assert len(list(saver.list(make_config("u", "")))) == 60
    assert _latest_history(saver, "u") == start[1]["channel_values"]["history"]


def test_delete_for_runs_keeps_exactly_the_blobs_survivors_need() -> None:
    saver = InMemorySaver()
    at = _grow(saver, 25, run_id="r1")
    at = _grow(saver, 25, at, run_id="r2")
    saver.delete_for_runs(["r1"])
    _assert_exactly_the_needed_blobs(saver)
    listed = list(saver.list(make_config("t")))
    assert [len(t.checkpoint["channel_values"]["history"]) for t in listed] == list(
        range(50, 25, -1)
    )
    _, last = _grow(saver, 3, at, run_id="r3")
    assert last is not None
    assert _latest_history(saver) == last["channel_values"]["history"]


def test_list_shares_the_elements_of_a_growing_list() -> None:
    saver = InMemorySaver()
    # A long history of small elements, then one element a step: the tails stay
    # small next to the snapshot, so all 91 checkpoints extend one snapshot.
    at = _step(saver, (make_config("t"), None), {"history": [{"i": i} for i in range(5000)]})
    for i in range(90):
        assert at[1] is not None
        at = _step(saver, at, {"history": [*at[1]["channel_values"]["history"], {"i": -i}]})
    assert sum(1 for v in _history_rows(saver) if is_snapshot_version(v)) == 1
    listed = [t.checkpoint["channel_values"]["history"] for t in saver.list(make_config("t"))]
    assert len(listed) == 91
    # each tuple has a list of its own ...
    assert len({id(h) for h in listed}) == len(listed)
    # ... whose elements are the ones decoded for the newest tuple, snapshot
    # and tail alike, within a group and across groups (records.page_memo)
    assert listed[GROUP - 1][0] is listed[0][0]
    assert listed[GROUP][0] is listed[0][0]
    assert listed[GROUP][5010] is listed[0][5010]
    assert listed[1][-1] is listed[0][-2]
    # get_tuple decodes afresh every time
    assert _latest_history(saver)[0] is not _latest_history(saver)[0]


def test_list_decodes_only_the_newest_value_of_a_growing_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saver = InMemorySaver()
    at: Grown = (make_config("t"), None)
    at = _grow(saver, 120, at)
    decoded: list[int] = []
    inner = saver.serde.loads_typed

    def counting(data: tuple[str, bytes]) -> Any:
        value = inner(data)
        if isinstance(value, list):
            decoded.append(len(value))
        return value

    monkeypatch.setattr(saver.serde, "loads_typed", counting)
    listed = list(saver.list(make_config("t")))
    assert [len(t.checkpoint["channel_values"]["history"]) for t in listed] == list(
        range(120, 0, -1)
    )
    # The newest value is decoded whole (its snapshot and tail); older ones take
    # its elements, except values below the size threshold, stored whole.
    assert sum(decoded) < 2 * 120 + sum(range(20))


@pytest.mark.parametrize("where", ["value", "history", "write"])
def test_decode_errors_name_thread_checkpoint_and_channel(where: str) -> None:
    # Reads decode straight through the serializer and only on a DecodeError
    # decode again to add where the bytes came from.
    record = ContractRecord("r", datetime(2024, 1, 1, tzinfo=UTC), frozenset({"x"}))
    strict = InMemorySaver()
    allowed = strict.with_allowlist([RECORD_TYPE])
    at = _grow(allowed, 12)  # a history long enough to be append-encoded
    assert at[1] is not None
    history = at[1]["channel_values"]["history"]
    if where == "value":
        cfg, _ = _step(allowed, at, {"record": record})
    elif where == "history":
        cfg, _ = _step(allowed, at, {"history": [record, *history]})  # a new snapshot
    else:
        cfg = at[0]
        allowed.put_writes(cfg, [("out", record)], "task-1")
    with pytest.raises(DecodeError, match="ContractRecord") as info:
        strict.get_tuple(cfg)
    context = info.value.context
    assert context["thread_id"] == "t"
    assert context["checkpoint_id"] == cfg["configurable"]["checkpoint_id"]
    assert context["channel"] == {"value": "record", "history": "history", "write": "out"}[where]
    if where == "write":
        assert context["task_id"] == "task-1"
    with pytest.raises(DecodeError, match="ContractRecord"):
        list(strict.list(make_config("t")))

"""Append deltas, I/O-free: header parsing, what the tracker plans, how values rejoin."""

from __future__ import annotations

import itertools

import ormsgpack
import pytest

from tether.backends._delta import (
    AppendTracker,
    array_header,
    is_snapshot_version,
    join_append,
    split_array,
)
from tether.errors import ConfigError, DecodeError
from tether.serde import MsgpackSerializer

SERDE = MsgpackSerializer()
KEY = ("t", "", "messages")


def dumps(value: object) -> bytes:
    tag, data = SERDE.dumps_typed(value)
    assert tag == "msgpack"
    return data


def msgs(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"id": i, "text": "word " * 40} for i in range(start, start + n)]


@pytest.mark.parametrize("count", [0, 1, 15, 16, 255, 65535, 65536, 70000])
def test_array_header_round_trips_through_split_array(count: int) -> None:
    data = ormsgpack.packb([0] * count)
    assert data.startswith(array_header(count))
    assert split_array(data) == (count, len(array_header(count)))


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xdc\x00", b"\xdd\x00\x00", b"\xa3abc"])
def test_split_array_refuses_what_is_not_an_array(data: bytes) -> None:
    assert split_array(data) is None


def test_small_and_non_list_values_are_stored_whole() -> None:
    tracker = AppendTracker(min_bytes=1024)
    for value in (msgs(2), {"a": "x" * 5000}, "x" * 5000):
        plan = tracker.plan(KEY, "1", "msgpack", dumps(value))
        assert [r.base for r in plan.rows] == [None]
        assert plan.fallback is None
    assert tracker.plan(KEY, "2", "bytes", b"\x93" + b"x" * 5000).rows[0].base is None
    assert tracker.held_bytes == 0


def test_a_growing_list_becomes_a_snapshot_then_tails() -> None:
    tracker = AppendTracker(min_bytes=1024)
    first = tracker.plan(KEY, "1", "msgpack", dumps(msgs(20)))
    snapshot, head = first.rows
    assert is_snapshot_version(snapshot.version)
    assert snapshot.data == dumps(msgs(20))
    assert (head.version, head.base, head.data) == ("1", snapshot.version, array_header(0))
    second = tracker.plan(KEY, "2", "msgpack", dumps(msgs(22)))
    (tail,) = second.rows
    assert tail.base == snapshot.version
    assert ormsgpack.unpackb(tail.data) == msgs(2, start=20)
    assert second.needs == snapshot.version
    assert second.fallback is not None
    assert second.fallback.data == dumps(msgs(22))
    assert second.fallback.base is None
    # what a reader rebuilds
    assert join_append(
        SERDE.loads_typed(("msgpack", snapshot.data)), ormsgpack.unpackb(tail.data), where=""
    ) == msgs(22)


def test_an_edited_or_shrunk_list_starts_a_new_snapshot() -> None:
    tracker = AppendTracker(min_bytes=1024)
    tracker.plan(KEY, "1", "msgpack", dumps(msgs(20)))
    edited = msgs(21)
    edited[3]["text"] = "changed"
    plan = tracker.plan(KEY, "2", "msgpack", dumps(edited))
    assert len(plan.rows) == 2
    assert is_snapshot_version(plan.rows[0].version)
    shrunk = tracker.plan(KEY, "3", "msgpack", dumps(edited[:15]))
    assert len(shrunk.rows) == 2
    assert shrunk.rows[0].version != plan.rows[0].version


def test_snapshots_are_renewed_as_the_tail_grows() -> None:
    tracker = AppendTracker(min_bytes=1024)
    snapshots = []
    for n in range(20, 400):
        plan = tracker.plan(KEY, str(n), "msgpack", dumps(msgs(n)))
        if len(plan.rows) == 2:
            snapshots.append(n)
        else:
            # no tail ever costs more than twice the snapshot it extends
            assert len(plan.rows[0].data) <= len(dumps(msgs(snapshots[-1]))) + 16
    gaps = [b - a for a, b in itertools.pairwise(snapshots)]
    # about sqrt(2 * snapshot / message) steps apart: growing, far fewer than one per step
    assert 5 < len(snapshots) < 40
    assert gaps[-1] > gaps[0]


def test_snapshot_versions_are_unique_per_write() -> None:
    tracker = AppendTracker(min_bytes=1024)
    one = tracker.plan(KEY, "1", "msgpack", dumps(msgs(20))).rows[0].version
    tracker.forget(KEY)
    two = tracker.plan(KEY, "1", "msgpack", dumps(msgs(20))).rows[0].version
    assert one != two
    assert not is_snapshot_version("00000000000000000000000000000001.0.5")


def test_memory_is_bounded_and_threads_can_be_forgotten() -> None:
    size = len(dumps(msgs(20)))
    tracker = AppendTracker(min_bytes=1024, cache_bytes=size * 3)
    for t in range(5):
        tracker.plan((f"t{t}", "", "m"), "1", "msgpack", dumps(msgs(20)))
    assert tracker.held_bytes == size * 3
    # the least recently used threads were forgotten: their next write is a new snapshot
    assert len(tracker.plan(("t0", "", "m"), "2", "msgpack", dumps(msgs(21))).rows) == 2
    assert len(tracker.plan(("t4", "", "m"), "2", "msgpack", dumps(msgs(21))).rows) == 1
    tracker.forget_threads(["t4"])
    assert len(tracker.plan(("t4", "", "m"), "3", "msgpack", dumps(msgs(22))).rows) == 2
    tracker.forget_threads(None)
    assert tracker.held_bytes == 0


def test_create_validates_the_threshold() -> None:
    assert AppendTracker.create(None) is None
    assert AppendTracker.create(10) is not None
    for bad in (0, -1, True, 1.5, "4096"):
        with pytest.raises(ConfigError, match="delta_threshold"):
            AppendTracker.create(bad)  # type: ignore[arg-type]


def test_join_refuses_parts_that_are_not_lists() -> None:
    assert join_append([1], [2], where="") == [1, 2]
    with pytest.raises(DecodeError, match="damaged"):
        join_append({"a": 1}, [2], where="of thread 't'")


def test_known_gives_the_bytes_of_the_current_snapshot_only() -> None:
    tracker = AppendTracker(min_bytes=1024)
    data = dumps(msgs(20))
    snapshot = tracker.plan(KEY, "1", "msgpack", data).rows[0].version
    assert tracker.known(KEY, snapshot) == data
    assert tracker.known(KEY, "~" + "0" * 32) is None
    assert tracker.known(("t", "", "other"), snapshot) is None
    edited = msgs(21)
    edited[0]["text"] = "changed"
    tracker.plan(KEY, "2", "msgpack", dumps(edited))  # a new snapshot replaces it
    assert tracker.known(KEY, snapshot) is None

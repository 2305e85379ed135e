"""Checkpoint ids (SPEC S1.2): uuid6, strictly increasing within a process."""

from __future__ import annotations

import threading
import time
from uuid import UUID

from tether.ids import EMPTY_CLOCK_SEQ, Uuid6Generator, uuid6, uuid6_timestamp


def test_version_and_variant() -> None:
    u = uuid6()
    assert u.version == 6
    assert u.variant == "specified in RFC 4122"


def test_timestamp_is_wall_clock() -> None:
    before = time.time_ns() // 100 + 0x01B21DD213814000
    ts = uuid6_timestamp(uuid6())
    after = time.time_ns() // 100 + 0x01B21DD213814000
    assert before <= ts <= after + 1


def test_string_order_is_issue_order() -> None:
    ids = [str(uuid6()) for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_same_tick_still_increases() -> None:
    gen = Uuid6Generator(clock=lambda: 1_700_000_000_000_000_000)
    ids = [gen() for _ in range(1000)]
    stamps = [uuid6_timestamp(u) for u in ids]
    assert stamps == sorted(set(stamps))
    assert [str(u) for u in ids] == sorted(str(u) for u in ids)


def test_clock_going_backwards_still_increases() -> None:
    readings = iter([5_000_000_000, 5_000_000_300, 4_000_000_000, 3_999_999_900, 5_000_000_200])

    gen = Uuid6Generator(clock=lambda: next(readings))
    ids = [str(gen()) for _ in range(5)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5
    # Once the clock passes the last issued tick again, ids follow the clock.
    late = Uuid6Generator(clock=lambda: 9_000_000_000)
    assert uuid6_timestamp(late()) == 9_000_000_000 // 100 + 0x01B21DD213814000


def test_clock_seq_carries_the_step() -> None:
    for step in (0, 1, 7, 1000, 16383):
        u = uuid6(clock_seq=step)
        assert u.clock_seq == step
    # 14 bits: larger steps wrap rather than spill into other fields.
    assert uuid6(clock_seq=16384 + 5).clock_seq == 5
    assert uuid6(clock_seq=EMPTY_CLOCK_SEQ).clock_seq == 0x3FFE


def test_node_is_kept() -> None:
    assert uuid6(node=0xABCDEF).node == 0xABCDEF


def test_sixteen_threads_strictly_increasing_and_globally_ordered() -> None:
    """16 threads x 10,000 ids: distinct, sorted per thread, and ordered by time of issue.

    Time of issue is bracketed by perf_counter readings taken just before and
    just after each call: if one call finished before another started, its id
    must be smaller.
    """
    per_thread = 10_000
    n_threads = 16
    gen = Uuid6Generator()
    results: list[list[tuple[int, str, int]]] = [[] for _ in range(n_threads)]
    start = threading.Barrier(n_threads)

    def work(slot: int) -> None:
        out = results[slot]
        clock = time.perf_counter_ns
        start.wait()
        for _ in range(per_thread):
            t0 = clock()
            u = str(gen())
            out.append((t0, u, clock()))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    for out in results:
        ids = [u for _, u, _ in out]
        assert ids == sorted(ids), "ids of one thread must increase"
    everything = [item for out in results for item in out]
    assert len({u for _, u, _ in everything}) == n_threads * per_thread
    # For every pair where y finished before x started, id(y) < id(x).
    # Sorted by id, that is: for each x, every later-sorted y ended after x started.
    by_id = sorted(everything, key=lambda item: item[1])
    suffix_min_end = [0] * len(by_id)
    running = 1 << 62
    for i in range(len(by_id) - 1, -1, -1):
        suffix_min_end[i] = running
        running = min(running, by_id[i][2])
    violations = [by_id[i] for i in range(len(by_id)) if suffix_min_end[i] < by_id[i][0]]
    assert not violations, f"{len(violations)} ids ordered against their time of issue"


def test_ids_parse_as_uuid_strings() -> None:
    s = str(uuid6())
    assert UUID(s).version == 6
    assert len(s) == 36

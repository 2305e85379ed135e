"""No N+1: exact statement counts per read, streaming list, SQL that cannot be injected."""

from __future__ import annotations

import gc
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from tether import SqliteSaver
from tether.backends.sqlite import PAGE

from .helpers import step, thread


def _traced(db_path: Path) -> tuple[SqliteSaver, list[str]]:
    conn = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return SqliteSaver(conn), statements


def _queries(statements: list[str]) -> list[str]:
    return [s for s in statements if s.split()[0].upper() not in ("BEGIN", "COMMIT")]


def _history(saver: SqliteSaver, tid: str, n: int, writes: bool = True) -> None:
    cfg, prev = thread(tid), None
    for i in range(n):
        cfg, prev = step(saver, cfg, prev, {"m": [i], "k": i % 3}, {"source": "loop", "step": i})
        if writes:
            saver.put_writes(cfg, [("m", i), ("k", i)], f"task-{i}")


def test_get_tuple_is_one_statement(db_path: Path) -> None:
    saver, statements = _traced(db_path)
    _history(saver, "t", 5)
    statements.clear()
    tup = saver.get_tuple(thread("t"))
    assert tup is not None
    assert len(tup.pending_writes) == 2
    # The first read probes the row alone, finds writes and a value row, and reads
    # row, values and writes again in one snapshot (#19); the thread is remembered,
    # so the next read is that one statement.
    assert len(_queries(statements)) == 2
    statements.clear()
    assert saver.get_tuple(thread("t")) == tup
    assert len(_queries(statements)) == 1
    saver.close()


def test_get_tuple_of_a_small_state_is_its_row(db_path: Path) -> None:
    saver, statements = _traced(db_path)
    cfg, prev = thread("s"), None
    for i in range(3):
        cfg, prev = step(saver, cfg, prev, {"k": i, "s": f"v{i}"}, {"source": "loop", "step": i})
    statements.clear()
    tup = saver.get_tuple(thread("s"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"k": 2, "s": "v2"}
    assert tup.pending_writes == []
    assert tup.parent_config is not None
    queries = _queries(statements)
    assert len(queries) == 1  # every value inline, no writes: the row is the checkpoint
    assert "tether_blobs" not in queries[0]
    # with a write, the same read returns it (the row's count and the write rows say so)
    saver.put_writes(cfg, [("k", 9)], "task")
    got = saver.get_tuple(thread("s"))
    assert got is not None
    assert got.pending_writes == [("task", "k", 9)]
    saver.close()


@pytest.mark.parametrize("n", [PAGE // 2, PAGE * 3])
def test_list_costs_one_statement_per_page(db_path: Path, n: int) -> None:
    saver, statements = _traced(db_path)
    _history(saver, "t", n)
    statements.clear()
    got = list(saver.list(thread("t")))
    assert len(got) == n
    assert all(len(t.pending_writes) == 2 for t in got)
    pages = n // PAGE + 1
    assert len(_queries(statements)) == pages
    saver.close()


def test_listing_a_long_history_streams(tmp_path: Path) -> None:
    def peak(n: int) -> int:
        with SqliteSaver(tmp_path / f"h{n}.db") as saver:
            _history(saver, "t", n, writes=False)
            gc.collect()
            tracemalloc.start()
            count = 0
            for _ in saver.list(thread("t")):
                count += 1
            _, top = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert count == n
            return top

    small, large = peak(1_000), peak(10_000)
    # ten times the history, about the same peak: one page is held at a time
    assert large < small * 2


def test_filter_keys_are_data_not_sql(saver: SqliteSaver) -> None:
    _history(saver, "t", 3, writes=False)
    evil = "a') OR 1=1 --"
    assert list(saver.list(None, filter={evil: 1})) == []
    assert list(saver.list(None, filter={"step": "1 OR 1=1"})) == []
    assert list(saver.list(None, filter={'step" = 1 OR "': 1})) == []
    assert len(list(saver.list(None))) == 3  # nothing was changed
    assert [t.metadata["step"] for t in saver.list(None, filter={"step": 1})] == [1]


def test_filter_semantics_match_the_reference(saver: SqliteSaver) -> None:
    metas = [
        {"n": 1, "b": True, "s": "x", "z": None, "d": {"a": [1, 2]}, "l": [1, {"b": 2}]},
        {"n": 1.0, "b": 1, "s": "y", "d": {"a": [1, 2], "c": 0}, "l": [1]},
    ]
    prev, cfg = None, thread("f")
    for m in metas:
        cfg, prev = step(saver, cfg, prev, {"x": 1}, m)

    def steps(**flt: object) -> int:
        return len(list(saver.list(None, filter=flt)))

    assert steps(n=1) == 2  # numbers by value
    assert steps(b=True) == 1  # a bool only equals a bool
    assert steps(b=1) == 1
    assert steps(z=None) == 1  # null matches a stored null, not a missing key
    assert steps(d={"a": [1, 2]}) == 1
    assert steps(l=[1, {"b": 2}]) == 1
    assert steps(l=[1]) == 1
    assert steps(s="x", n=1) == 1
    assert steps(missing=1) == 0


def test_reads_are_index_driven(saver: SqliteSaver) -> None:
    from tether.backends.sqlite import _sql as sql

    _history(saver, "t", 3)
    cursor = "(c.checkpoint_id, c.thread_id, c.checkpoint_ns) < (?, ?, ?)"
    plans = {
        "latest": (sql.GET_LATEST, ("t", "", 1)),
        "by id": (sql.GET_BY_ID, ("t", "", "x", 1)),
        # every namespace of a thread: the root's rows by primary key, the others'
        # by the partial index, merged
        "thread page": (
            sql.read_statement(f"WHERE c.thread_id = ? AND {cursor}", every_ns=True),
            ("t", "z", "z", "z") * 2 + (PAGE,),
        ),
        "namespace page": (
            sql.read_statement(f"WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND {cursor}"),
            ("t", "", "z", "z", "z", PAGE),
        ),
        "all threads": (sql.read_statement(""), (PAGE,)),
    }
    with saver._conns.connection() as conn:
        for name, (sql, args) in plans.items():
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]
            assert not any("TEMP B-TREE FOR ORDER BY" in step for step in plan), (name, plan)
            if name == "thread page":
                assert "MERGE (UNION ALL)" in plan, plan
                assert any("tether_checkpoints_nested" in step for step in plan), plan
            for table in ("c", "b", "w"):
                steps = [p for p in plan if p.split()[1:2] == [table]]
                assert steps, (name, table, plan)
                assert all("INDEX" in p for p in steps), (name, plan)


def test_thread_operations_collect_unreferenced_blobs(saver: SqliteSaver) -> None:
    cfg, prev = thread("g"), None
    for i in range(10):
        # "big" changes every step, "same" only once: 10 + 1 + 10 blobs (lists:
        # small primitives would be kept inline in the checkpoint rows)
        values = (
            {"big": [i] * 50, "step": [i]} if i else {"big": [0] * 50, "step": [0], "same": [1]}
        )
        cfg, prev = step(saver, cfg, prev, values, {"source": "loop", "step": i, "run_id": f"r{i}"})
        saver.put_writes(cfg, [("step", i)], f"task-{i}")
    assert saver.stats()["blobs"] == 21
    saver.prune(["g"], strategy="keep_last", keep=3)
    stats = saver.stats()
    assert (stats["checkpoints"], stats["writes"]) == (3, 3)
    assert stats["blobs"] == 3 * 2 + 1  # the survivors' big/step, and "same" they still use
    latest = saver.get_tuple(thread("g"))
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"big": [9] * 50, "step": [9], "same": [1]}
    saver.delete_for_runs(["r9"])
    stats = saver.stats()
    assert (stats["checkpoints"], stats["blobs"], stats["writes"]) == (2, 5, 2)
    saver.copy_thread("g", "h")
    saver.delete_thread("g")
    stats = saver.stats()
    assert (stats["checkpoints"], stats["blobs"], stats["writes"]) == (2, 5, 2)
    saver.prune(["h"], strategy="delete")
    assert saver.stats() | {"bytes": 0} == {"checkpoints": 0, "blobs": 0, "writes": 0, "bytes": 0}


def test_small_values_live_in_the_rows_through_thread_operations(saver: SqliteSaver) -> None:
    cfg, prev = thread("g"), None
    for i in range(10):
        # "step" and "same" are small primitives, kept in the checkpoint rows;
        # "same" is put once and carried over by every later put
        values = {"big": [i] * 50, "step": i} if i else {"big": [0] * 50, "step": 0, "same": "x"}
        cfg, prev = step(saver, cfg, prev, values, {"source": "loop", "step": i, "run_id": f"r{i}"})
    assert saver.stats()["blobs"] == 10
    expected = {"big": [9] * 50, "step": 9, "same": "x"}
    saver.prune(["g"], strategy="keep_last", keep=3)  # the row that put "same" is gone
    assert saver.stats()["blobs"] == 3
    latest = saver.get_tuple(thread("g"))
    assert latest is not None
    assert latest.checkpoint["channel_values"] == expected
    cfg, prev = step(saver, latest.config, latest.checkpoint, {"step": 10})
    assert saver.get_tuple(cfg).checkpoint["channel_values"] == {**expected, "step": 10}  # type: ignore[union-attr]
    saver.copy_thread("g", "h")
    saver.delete_thread("g")
    copied = saver.get_tuple(thread("h"))
    assert copied is not None
    assert copied.checkpoint["channel_values"] == {**expected, "step": 10}


def test_a_thread_listing_merges_its_namespaces_in_order(saver: SqliteSaver) -> None:
    # Checkpoints of three namespaces, interleaved in time, over several pages:
    # the root namespace's come from the primary key, the others' from the
    # partial index, and the merge must keep the listing newest first.
    lines = {ns: (thread("t", ns), None) for ns in ("", "sub:1", "sub:1|deep:2")}
    made: list[tuple[str, str]] = []
    for i in range(2 * PAGE + 11):
        ns = ("", "sub:1", "sub:1|deep:2", "")[i % 4]
        cfg, prev = lines[ns]
        cfg, prev = step(saver, cfg, prev, {"m": [i]})
        lines[ns] = (cfg, prev)
        made.append((cfg["configurable"]["checkpoint_id"], ns))
    step(saver, thread("other"), None, {"m": [0]})  # another thread stays out
    newest_first = sorted(made, reverse=True)
    every = {"configurable": {"thread_id": "t"}}
    got = [
        (t.config["configurable"]["checkpoint_id"], t.config["configurable"]["checkpoint_ns"])
        for t in saver.list(every)
    ]
    assert got == newest_first
    # a cursor in the middle, and a limit that ends inside a page
    middle = newest_first[PAGE + 3][0]
    before = {"configurable": {"thread_id": "t", "checkpoint_id": middle}}
    after = [t.config["configurable"]["checkpoint_id"] for t in saver.list(every, before=before)]
    assert after == [cid for cid, _ in newest_first[PAGE + 4 :]]
    assert len(list(saver.list(every, limit=PAGE + 5))) == PAGE + 5
    # one namespace named: only its rows
    sub = [t.config["configurable"]["checkpoint_id"] for t in saver.list(thread("t", "sub:1"))]
    assert sub == [cid for cid, ns in newest_first if ns == "sub:1"]
    # the store's view (CLI, UI) merges the same way
    from tether.backends.sqlite import _inspect

    with saver._conns.connection() as conn:
        shown = _inspect.heads(conn, saver.serde, "test", "t")
        one_ns = _inspect.heads(conn, saver.serde, "test", "t", "sub:1", limit=3)
        root = _inspect.heads(conn, saver.serde, "test", "t", "")
    assert [(h.checkpoint_id, h.checkpoint_ns) for h in shown] == newest_first
    assert [h.checkpoint_id for h in one_ns] == sub[:3]
    assert [h.checkpoint_id for h in root] == [cid for cid, ns in newest_first if ns == ""]


def test_a_listing_verifies_sound_write_rows_without_the_slow_check(
    saver: SqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # _split computes write_checksum's bytes inline and calls check_write_row only
    # on a mismatch: if the two drifted apart, every row would take the slow path
    # (still right, silently slower). Sound rows of every kind must not reach it.
    cfg, prev = thread("w"), None
    for i in range(3):
        cfg, prev = step(saver, cfg, prev, {"m": [i]})
        saver.put_writes(
            cfg,
            [("m", None), ("m", "x" * 5000), ("k", {"n": i}), ("k", b"\x00bytes")],
            f"task-{i}",
            task_path=f"~root, {i}",
        )

    def slow(row: object, where: str) -> None:
        raise AssertionError(f"a sound write row took the slow check: {row!r}")

    monkeypatch.setattr("tether.backends.sqlite._saver.check_write_row", slow)
    listed = list(saver.list(thread("w")))
    assert [len(t.pending_writes) for t in listed] == [4, 4, 4]
    assert listed[0].pending_writes[1] == ("task-2", "m", "x" * 5000)

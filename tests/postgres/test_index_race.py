"""The thread index's status when a put and its writes race (Postgres, #15).

LangGraph's async durability stores a checkpoint in the background while the
writes of its tasks arrive: a put and a put_writes of one checkpoint can run
at once on two connections. Each statement computes the status from the
write rows its snapshot sees, so without the index row locked first the last
to commit decided it from a view that missed the other's rows (a failed
node's thread listed as ``pending``; the CLI's golden test failed 3 runs in 4).
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver
from tether.checkpoint import empty_checkpoint, make_config
from tether.ids import uuid6

from .conftest import PlainSerializer, fresh_schema


def _checkpoint() -> Any:
    ck = empty_checkpoint()
    ck["id"] = str(uuid6())
    return ck


def _race(saver: PostgresSaver, tid: str) -> str | None:
    """A thread's child checkpoint put while its error write arrives; the index's status."""
    first = saver.put(make_config(tid), _checkpoint(), {"source": "input", "step": -1}, {})
    child = _checkpoint()
    child_config = {"configurable": {**first["configurable"], "checkpoint_id": child["id"]}}
    go = threading.Barrier(2)
    errors: list[BaseException] = []

    def put() -> None:
        go.wait()
        try:
            saver.put(first, child, {"source": "loop", "step": 0}, {})
        except BaseException as exc:
            errors.append(exc)

    def write() -> None:
        go.wait()
        try:
            saver.put_writes(child_config, [("__error__", "boom")], "task")
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=put), threading.Thread(target=write)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    (summary,) = [s for s in saver.threads().items if s.thread_id == tid]
    return summary.status


def test_a_put_and_its_error_write_at_once_leave_the_thread_in_error(pg_dsn: str) -> None:
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=fresh_schema(), serde=PlainSerializer(), pool_size=4
    ) as saver:
        saver.setup()
        statuses = [_race(saver, f"t{i}") for i in range(30)]
    assert statuses == ["error"] * 30


def _held_then_raced(pg_dsn: str, first: str, second: str) -> str | None:
    """``first`` runs in a transaction held open while ``second`` waits on the
    index row, then commits: the one who waited must count the other's rows.

    Deterministic where the 30 pairs above are a race: ``put_writes`` second
    exercises an UPDATE evaluated again after its wait, ``put`` second an ON
    CONFLICT DO UPDATE that locks the row before its SET.
    """
    schema = fresh_schema()
    with (
        psycopg.connect(pg_dsn) as held_conn,
        PostgresSaver.from_conn_string(pg_dsn, schema=schema, serde=PlainSerializer()) as other,
    ):
        other.setup()
        held = PostgresSaver(held_conn, schema=schema, serde=PlainSerializer())
        root = other.put(make_config("t"), _checkpoint(), {"source": "input", "step": -1}, {})
        child = _checkpoint()
        child_config = {"configurable": {**root["configurable"], "checkpoint_id": child["id"]}}
        steps = {
            "put": lambda s: s.put(root, child, {"source": "loop", "step": 0}, {}),
            "put_writes": lambda s: s.put_writes(child_config, [("__error__", "boom")], "task"),
        }
        errors: list[BaseException] = []

        def waiting() -> None:
            try:
                steps[second](other)
            except BaseException as exc:
                errors.append(exc)

        with held_conn.transaction():
            steps[first](held)
            worker = threading.Thread(target=waiting)
            worker.start()
            # The worker is blocked on the index row until this commits.
            worker.join(0.5)
            assert worker.is_alive(), f"{second} did not wait for the index row"
        worker.join()
        assert not errors
        (summary,) = other.threads().items
        return summary.status


@pytest.mark.parametrize(("first", "second"), [("put", "put_writes"), ("put_writes", "put")])
def test_the_writer_that_waited_for_the_index_row_counts_the_others_rows(
    pg_dsn: str, first: str, second: str
) -> None:
    assert _held_then_raced(pg_dsn, first, second) == "error"


def test_writes_racing_a_new_threads_first_put_wait_for_it(pg_dsn: str) -> None:
    """A thread's first put, held uncommitted, has inserted the index row: a
    put_writes of the next checkpoint waits for it (an UPDATE would pass by the
    invisible row, and the next put could then miss the error). CI's golden test
    on Postgres caught this as a failed node's thread listed 'pending'."""
    schema = fresh_schema()
    with (
        psycopg.connect(pg_dsn) as held_conn,
        PostgresSaver.from_conn_string(pg_dsn, schema=schema, serde=PlainSerializer()) as other,
    ):
        other.setup()
        held = PostgresSaver(held_conn, schema=schema, serde=PlainSerializer())
        root = _checkpoint()
        child = _checkpoint()
        root_config = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": root["id"]}
        }
        child_config = {
            "configurable": {**root_config["configurable"], "checkpoint_id": child["id"]}
        }
        errors: list[BaseException] = []

        def waiting() -> None:
            try:
                other.put_writes(child_config, [("__error__", "boom")], "task")
            except BaseException as exc:
                errors.append(exc)

        with held_conn.transaction():
            held.put(make_config("t"), root, {"source": "input", "step": -1}, {})
            worker = threading.Thread(target=waiting)
            worker.start()
            worker.join(0.5)
            assert worker.is_alive(), "put_writes did not wait for the thread's first put"
        worker.join()
        assert not errors
        other.put(root_config, child, {"source": "loop", "step": 0}, {})
        (summary,) = other.threads().items
        assert summary.status == "error"
        assert summary.checkpoints == 2

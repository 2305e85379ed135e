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

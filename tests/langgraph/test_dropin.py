"""The drop-in surface: classes, constructors, what the LangGraph runtime inspects, allowlists."""

from __future__ import annotations

import asyncio
import inspect
import json
import operator
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

import aiosqlite
import psycopg
import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from pydantic import BaseModel

import tether.langgraph as tl
from tether.errors import ConfigError, DecodeError, EncodeError
from tether.langgraph import (
    AsyncPostgresSaver,
    AsyncSqliteSaver,
    InMemorySaver,
    PostgresSaver,
    SqliteSaver,
    TetherLangGraphSaver,
)

from .savers import BACKENDS, aopen_saver, fresh_schema, open_saver

CLASSES = [InMemorySaver, SqliteSaver, AsyncSqliteSaver, PostgresSaver, AsyncPostgresSaver]


class Counter(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def counter_graph(checkpointer: Any) -> Any:
    def bump(state: Counter) -> Counter:
        return {"n": state.get("n", 0) + 1, "log": [f"bump{state.get('n', 0)}"]}

    builder = StateGraph(Counter)
    builder.add_node("bump", bump)
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder.compile(checkpointer=checkpointer)


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


async def run_both(saver: Any) -> None:
    """Sync and async graph calls on the same instance and thread, interleaved."""
    graph = counter_graph(saver)
    assert (await asyncio.to_thread(graph.invoke, {}, cfg("t")))["n"] == 1
    assert (await graph.ainvoke({}, cfg("t")))["n"] == 2
    assert (await asyncio.to_thread(graph.invoke, {}, cfg("t")))["n"] == 3
    # three checkpoints per invoke: input, __start__, bump
    history = [s async for s in graph.aget_state_history(cfg("t"))]
    assert [s.values.get("n") for s in history] == [3, 2, 2, 2, 1, 1, 1, None, None]


# --- what the runtime checks ------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_langgraph_base_class_and_task_path(cls: type[Any]) -> None:
    assert issubclass(cls, BaseCheckpointSaver)
    assert issubclass(cls, TetherLangGraphSaver)
    # the runtime passes the task path only to savers that declare it
    assert "task_path" in inspect.signature(cls.put_writes).parameters
    assert "task_path" in inspect.signature(cls.aput_writes).parameters


def test_lazy_names_and_unknown_attribute() -> None:
    assert tl.SqliteSaver is SqliteSaver
    assert set(tl.__all__) >= {c.__name__ for c in CLASSES}
    with pytest.raises(AttributeError, match="NoSuchSaver"):
        _ = tl.NoSuchSaver  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_sync_opened_saver_serves_sync_and_async_graphs(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with open_saver(backend, tmp_path, request) as saver:
        await run_both(saver)
    if isinstance(saver, PostgresSaver):
        await saver.saver._res.loops.closed()  # the async pool closes on the loop


@pytest.mark.parametrize("backend", BACKENDS)
async def test_async_opened_saver_serves_sync_graphs(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with aopen_saver(backend, tmp_path, request) as saver:
        graph = counter_graph(saver)
        assert (await graph.ainvoke({}, cfg("t")))["n"] == 1
        # a sync graph from a worker thread (never from the loop thread itself)
        assert (await asyncio.to_thread(graph.invoke, {}, cfg("t")))["n"] == 2
        assert (await graph.ainvoke({}, cfg("t")))["n"] == 3


# --- allowlists ---------------------------------------------------------------------------


class Order(BaseModel):
    sku: str
    qty: int


class Orders(TypedDict, total=False):
    order: Order


def order_graph(checkpointer: Any) -> Any:
    builder = StateGraph(Orders)
    builder.add_node("take", lambda state: {"order": Order(sku="A-1", qty=2)})
    builder.add_edge(START, "take")
    builder.add_edge("take", END)
    return builder.compile(checkpointer=checkpointer)


ORDER = (Order.__module__, "Order")


def test_own_types_need_an_allowlist(tmp_path: Path) -> None:
    # refused when written (issue #13.4), not stored to be found unreadable later
    path = str(tmp_path / "a.db")
    refused = r"test_dropin:Order at `\$`: not in the allowlist"
    with SqliteSaver.from_conn_string(path) as saver, pytest.raises(EncodeError, match=refused):
        order_graph(saver).invoke({}, cfg("t"))
    with SqliteSaver.from_conn_string(path, allowlist=[ORDER]) as saver:
        order_graph(saver).invoke({}, cfg("t"))
        assert order_graph(saver).get_state(cfg("t")).values == {"order": Order(sku="A-1", qty=2)}
    # stored with the type allowed, read without: the DecodeError says where
    unreadable = r"Order.*thread_id='t'.*channel='order'"
    with SqliteSaver.from_conn_string(path) as saver, pytest.raises(DecodeError, match=unreadable):
        order_graph(saver).get_state(cfg("t"))


def test_with_allowlist_is_a_shallow_copy_sharing_storage() -> None:
    saver = InMemorySaver()
    clone = saver.with_allowlist([ORDER])
    assert clone is not saver
    assert type(clone) is InMemorySaver
    assert clone.saver.serde is clone.serde
    assert clone.serde is not saver.serde
    order_graph(clone).invoke({}, cfg("t"))
    # stored once, visible through both; only the clone may construct Order
    assert order_graph(clone).get_state(cfg("t")).values["order"].qty == 2
    with pytest.raises(DecodeError):
        order_graph(saver).get_state(cfg("t"))
    assert saver.with_allowlist([]) is not None


STRICT_SCRIPT = """
import asyncio, json, sys
from typing import TypedDict
from pydantic import BaseModel
from langgraph.graph import END, START, StateGraph
from tether.langgraph import AsyncSqliteSaver, InMemorySaver, SqliteSaver

class Order(BaseModel):
    sku: str
    qty: int

class Orders(TypedDict, total=False):
    order: Order
    count: int

def graph(saver):
    b = StateGraph(Orders)
    b.add_node("take", lambda s: {"order": Order(sku="A-1", qty=2), "count": s.get("count", 0) + 1})
    b.add_edge(START, "take")
    b.add_edge("take", END)
    return b.compile(checkpointer=saver)

cfg = {"configurable": {"thread_id": "t"}}
out = {}
mem = InMemorySaver()
g = graph(mem)
g.invoke({}, cfg)
out["memory"] = g.get_state(cfg).values["order"].qty
with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    graph(saver).invoke({}, cfg)
with SqliteSaver.from_conn_string(sys.argv[1]) as saver:  # reopened: nothing remembered
    out["sqlite"] = graph(saver).get_state(cfg).values["order"].qty

async def main():
    async with AsyncSqliteSaver.from_conn_string(sys.argv[1]) as saver:
        values = (await graph(saver).ainvoke({}, cfg))
        out["async_count"] = values["count"]
asyncio.run(main())
print(json.dumps(out))
"""


def test_strict_langgraph_mode_hands_schema_types_to_the_saver(tmp_path: Path) -> None:
    """LANGGRAPH_STRICT_MSGPACK=true: the graph's own types are allowed through with_allowlist."""
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(STRICT_SCRIPT), str(tmp_path / "strict.db")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"memory": 2, "sqlite": 2, "async_count": 2}


# --- SQLite constructors ------------------------------------------------------------------


async def test_sqlite_from_a_connection_leaves_it_open(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "c.db", check_same_thread=False, isolation_level=None)
    try:
        with SqliteSaver(conn) as saver:
            await run_both(saver)
        assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        conn.close()


async def test_sqlite_memory_database_serves_both() -> None:
    with SqliteSaver.from_conn_string(":memory:") as saver:
        await run_both(saver)


async def test_sqlite_refuses_an_aiosqlite_connection(tmp_path: Path) -> None:
    async with aiosqlite.connect(tmp_path / "x.db") as conn:
        with pytest.raises(ConfigError, match="from_conn_string"):
            AsyncSqliteSaver(conn)  # type: ignore[arg-type]


async def test_async_sqlite_setup_is_awaited_and_idempotent(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "s.db")) as saver:
        await saver.setup()
        await saver.setup()
        assert (await counter_graph(saver).ainvoke({}, cfg("t")))["n"] == 1


async def test_sqlite_from_conn_string_takes_the_url_the_cli_prints(tmp_path: Path) -> None:
    """`tether threads` prints `sqlite:///path`; the drop-in opens the same file from it."""
    path = tmp_path / "u.db"
    with SqliteSaver.from_conn_string(f"sqlite:///{path}") as saver:
        assert counter_graph(saver).invoke({}, cfg("t"))["n"] == 1
    async with AsyncSqliteSaver.from_conn_string(f"sqlite:///{path}") as saver:
        assert (await counter_graph(saver).ainvoke({}, cfg("t")))["n"] == 2
    with SqliteSaver.from_conn_string(str(path)) as saver:
        assert counter_graph(saver).get_state(cfg("t")).values["n"] == 2


# --- Postgres constructors ----------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("rows", ["tuple_row", "dict_row"])
async def test_postgres_from_a_langgraph_style_connection(pg_dsn: str, rows: str) -> None:
    """As LangGraph's docs open one: autocommit, prepare_threshold=0, dict rows.

    Every row the backend reads (migrations, leases, delete_for_runs) must be
    read by position whatever the connection's row factory.
    """
    factory = dict_row if rows == "dict_row" else tuple_row
    with psycopg.Connection.connect(
        pg_dsn, autocommit=True, prepare_threshold=0, row_factory=factory
    ) as conn:
        saver = PostgresSaver(conn, schema=fresh_schema())
        saver.setup()
        saver.setup()  # reads the recorded version back
        await run_both(saver)
        # the operations that read rows of their own
        graph = counter_graph(saver)
        with saver.lease("t"):
            graph.invoke({}, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "r1"}})
            assert len(list(saver.list(cfg("t"), filter={"run_id": "r1"}))) == 3
            saver.delete_for_runs(["r1"])
        assert list(saver.list(cfg("t"), filter={"run_id": "r1"})) == []
        saver.prune(["t"], strategy="keep_latest")
        assert len(list(saver.list(cfg("t")))) == 1
        assert not conn.closed


@pytest.mark.postgres
async def test_postgres_from_a_pool_and_in_pipeline_mode(pg_dsn: str) -> None:
    schema = fresh_schema()
    with ConnectionPool(pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2) as pool:
        saver = PostgresSaver(pool, schema=schema)
        saver.setup()
        await run_both(saver)
    with psycopg.Connection.connect(pg_dsn, autocommit=True) as conn, conn.pipeline() as pipe:
        saver = PostgresSaver(conn, pipe, schema=schema)
        graph = counter_graph(saver)
        assert graph.invoke({}, cfg("t"))["n"] == 4


@pytest.mark.postgres
async def test_async_postgres_from_an_async_connection_refuses_sync_calls(pg_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        saver = AsyncPostgresSaver(conn, schema=fresh_schema())
        await saver.setup()
        graph = counter_graph(saver)
        assert (await graph.ainvoke({}, cfg("t")))["n"] == 1
        # no sync-over-async bridge: a clear error instead of a deadlock
        with pytest.raises(ConfigError, match="from_conn_string"):
            await asyncio.to_thread(graph.invoke, {}, cfg("t"))


@pytest.mark.postgres
async def test_async_postgres_from_an_async_pool(pg_dsn: str) -> None:
    async with AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    ) as pool:
        saver = AsyncPostgresSaver(pool, schema=fresh_schema())
        await saver.setup()
        for n in (1, 2):
            assert (await counter_graph(saver).ainvoke({}, cfg("t")))["n"] == n


@pytest.mark.postgres
async def test_sync_opened_postgres_closes_its_async_pool_too(pg_dsn: str) -> None:
    """A sync ``with`` block in async code: the async pool's close runs on the loop."""
    with PostgresSaver.from_conn_string(pg_dsn, schema=fresh_schema()) as saver:
        saver.setup()
        assert (await counter_graph(saver).ainvoke({}, cfg("t")))["n"] == 1
        resources = saver.saver._res
        pool = resources.loops.pool(asyncio.get_running_loop())
        assert pool is not None
    assert not pool.closed  # closing needs this loop: scheduled on it
    await resources.loops.closed()
    assert pool.closed
    assert resources.owned_sync is None


# --- sync calls from async code, many threads, a killed process -------------------------


@pytest.mark.parametrize("backend", BACKENDS)
async def test_sync_graph_on_the_loop_thread_of_an_async_opened_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """LangGraph's AsyncSqliteSaver deadlocks here (sync-over-async bridge); tether has none."""
    async with aopen_saver(backend, tmp_path, request) as saver:
        graph = counter_graph(saver)
        assert (await graph.ainvoke({}, cfg("t")))["n"] == 1
        assert graph.invoke({}, cfg("t"))["n"] == 2  # blocking, on the loop thread


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_threads_share_one_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    threads = [f"t{i}" for i in range(8)]
    with open_saver(backend, tmp_path, request) as saver:
        graph = counter_graph(saver)

        def run(thread: str) -> int:
            for _ in range(5):
                n = graph.invoke({}, cfg(thread))["n"]
            return int(n)

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert list(pool.map(run, threads)) == [5] * 8
        for thread in threads:
            assert len(list(graph.get_state_history(cfg(thread)))) == 15


CRASH_SCRIPT = """
import os, signal, sys
from pathlib import Path
from typing import Annotated, TypedDict
import operator
from langgraph.graph import END, START, StateGraph
from tether.langgraph import SqliteSaver

db, marks = sys.argv[1], Path(sys.argv[2])

class S(TypedDict, total=False):
    log: Annotated[list[str], operator.add]

def node(name):
    def run(state):
        with open(marks / name, "a") as f:
            f.write("x")
        if name == "b" and not (marks / "crashed").exists():
            (marks / "crashed").touch()
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no atexit, mid-step
        return {"log": [name]}
    return run

b = StateGraph(S)
for name in "abc":
    b.add_node(name, node(name))
b.add_edge(START, "a"); b.add_edge("a", "b"); b.add_edge("b", "c"); b.add_edge("c", END)
with SqliteSaver.from_conn_string(db) as saver:
    graph = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t"}}
    state = graph.get_state(cfg)
    out = graph.invoke(None if state.next else {"log": ["in"]}, cfg, durability="sync")
    print(",".join(out["log"]))
"""


def test_resume_after_sigkill_in_a_new_process(tmp_path: Path) -> None:
    """S6.1 through LangGraph: a process killed in node b; a new one resumes at b."""
    marks = tmp_path / "marks"
    marks.mkdir()
    argv = [sys.executable, "-c", textwrap.dedent(CRASH_SCRIPT), str(tmp_path / "c.db"), str(marks)]
    first = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert first.returncode == -9, first.stderr
    second = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "in,a,b,c"
    runs = {name: (marks / name).read_text() for name in "abc"}
    assert runs == {"a": "x", "b": "xx", "c": "x"}  # a was not run again

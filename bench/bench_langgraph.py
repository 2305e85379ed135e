"""Real LangGraph graphs with the official savers vs tether's drop-ins, in one run.

    python -m bench langgraph         (or: python -m bench.bench_langgraph [--quick])

The W1 chat graph: a LangGraph ``StateGraph`` with ``add_messages`` state and
one node that answers; each of N = 300 invokes sends one ~500-byte human
message on one thread (so the history grows as a chat does). Timed per invoke
(median), in ``durability="sync"`` and ``"async"``; and the same chat with
plain dict messages (``operator.add``, no LangChain) in ``"sync"``,
``"async"`` and ``"exit"`` (the ``messages`` column), the graphs invoked in
turns, with:

* the official ``SqliteSaver`` vs ``tether.langgraph.SqliteSaver`` (a file each);
* the official ``PostgresSaver`` vs ``tether.langgraph.PostgresSaver`` (a fresh
  database each on the server in ``TETHER_TEST_PG_DSN``).

The ``floor`` column: the same graph on LangGraph's own ``InMemorySaver``,
invoked in the same turns. It is what LangGraph itself costs per invoke
with a saver that does no I/O, so ``langgraph / floor`` bounds the ratio any
saver could reach.

Bytes stored: SQLite ``page_count * page_size``; Postgres the total relation
size of the store's tables. Ratio = official / tether.

The DeltaChannel chat (``delta`` rows): the same chat with its messages in
LangGraph's beta ``DeltaChannel`` (stored as a ``_DeltaSnapshot`` every
``snapshot_frequency`` = 100 updates, rebuilt from the ancestors' writes in
between), N = 300 invokes in ``sync`` durability on the in-memory, SQLite and
Postgres savers, official vs tether invoked in turns: ms per invoke (median;
each invoke rebuilds the channel once, ``get_delta_channel_history``) and
the full ``get_state_history`` of the thread (each of its ~900 checkpoints
rebuilds it; median of 3 listings taken in turns).

Short threads on Postgres (``short`` rows, #19 goal 7): most conversations
are short, so the same W1 chat runs on 50 fresh threads x 10 invokes (quick:
20 x 10), plain dict messages and LangChain messages, ``durability="sync"``,
the two savers' invokes in turns: ms per invoke (median of all 500), then
``graph.get_state`` of a thread of N = 10 invokes (median of 200 calls over
the threads, in turns). Both savers are built as a user builds them,
``from_conn_string(url)``: the official one is then a single connection with
``autocommit=True, prepare_threshold=0, row_factory=dict_row`` (what the
other Postgres rows give it by hand), tether a pool with its defaults.
``python -m bench.bench_langgraph --short`` runs these rows alone.

``update_state`` and forks (``fork`` rows, the issue's ``update_state (fork)``
row): the W1 chat (LangChain messages, then dict messages) after N = 300
invokes on SQLite and Postgres, then ``graph.update_state(config, {"messages":
[message]})`` taken in turns on the two savers: 60 times on a past checkpoint
of ``get_state_history`` (a fork: a new branch off that checkpoint; the
checkpoints are spread over the history, the same positions on both sides),
then 60 times on the thread's latest checkpoint. Median ms per call.
``python -m bench.bench_langgraph --fork`` runs these rows alone.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver as OfficialInMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from psycopg.rows import dict_row

from bench._workloads import alternate, interleave, ratio
from tether.langgraph import InMemorySaver, PostgresSaver, SqliteSaver

RESULTS = Path(__file__).resolve().parent / "results"
DSN = os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
TEXT = ("the quick brown fox jumps over the lazy dog " * 12)[:480]


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


def _answer(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(f"noted ({len(state['messages'])} so far)")]}


class DictChat(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


def _dict_answer(state: DictChat) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [{"role": "assistant", "content": f"noted ({n} so far)", "id": f"a{n}"}]}


def _graph(saver: Any, kind: str = "langchain") -> Any:
    """The W1 chat: LangChain messages under ``add_messages``, or plain dicts appended."""
    if kind == "dict":
        d = StateGraph(DictChat)
        d.add_node("answer", _dict_answer)
        d.add_edge(START, "answer")
        d.add_edge("answer", END)
        return d.compile(checkpointer=saver)
    g = StateGraph(Chat)
    g.add_node("answer", _answer)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def _message(kind: str, i: int) -> Any:
    if kind == "dict":
        return {"role": "user", "content": f"{i}: {TEXT}", "id": f"u{i}"}
    return HumanMessage(f"{i}: {TEXT}")


def _add_batch(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """``add_messages`` over a batch of writes, as DeltaChannel replays them."""
    for write in writes:
        state = add_messages(state, write)  # type: ignore[assignment]
    return state


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_batch)]


def _delta_answer(state: DeltaChat) -> dict[str, Any]:
    return {"messages": [AIMessage(f"noted ({len(state['messages'])} so far)")]}


def _delta_graph(saver: Any) -> Any:
    g = StateGraph(DeltaChat)
    g.add_node("answer", _delta_answer)
    g.add_edge(START, "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=saver)


def _drive_delta(savers: dict[str, Any], n: int) -> dict[str, dict[str, float]]:
    """The DeltaChannel chat: ms per invoke (in turns), then full-history listings (in turns)."""
    cfg = {"configurable": {"thread_id": "delta-chat"}}
    graphs = {name: _delta_graph(saver) for name, saver in savers.items()}

    def steps(graph: Any) -> Iterator[float]:
        for i in range(n):
            t0 = time.perf_counter()
            graph.invoke({"messages": [HumanMessage(f"{i}: {TEXT}")]}, cfg, durability="sync")
            yield time.perf_counter() - t0
        assert len(graph.get_state(cfg).values["messages"]) == 2 * n

    times = interleave({name: steps(graph) for name, graph in graphs.items()})
    history = alternate(
        {name: lambda g=graph: list(g.get_state_history(cfg)) for name, graph in graphs.items()},
        3,
    )
    return {
        name: {"invoke": statistics.median(ts) * 1000, "history": history[name]}
        for name, ts in times.items()
    }


def _delta_rows(store: str, ms: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    return [
        _row(store, "sync", f"delta: {m}", ms["tether"][key], ms["langgraph"][key])
        for m, key in (("ms_per_invoke", "invoke"), ("ms_full_history", "history"))
    ]


def run_delta(quick: bool = False) -> list[dict[str, Any]]:
    """The DeltaChannel chat on the three backends (see the module doc)."""
    n = 40 if quick else 300
    rows = _delta_rows(
        "memory", _drive_delta({"tether": InMemorySaver(), "langgraph": OfficialInMemorySaver()}, n)
    )
    with tempfile.TemporaryDirectory() as tmp:
        conn = sqlite3.connect(Path(tmp) / "official.db", check_same_thread=False)
        official = OfficialSqliteSaver(conn)
        official.setup()
        with SqliteSaver.from_conn_string(str(Path(tmp) / "tether.db")) as saver:
            rows += _delta_rows("sqlite", _drive_delta({"tether": saver, "langgraph": official}, n))
        conn.close()
    official_db, tether_db = "tether_bench_delta_official", "tether_bench_delta_tether"
    with _database(official_db) as ourl, _database(tether_db) as turl:
        with (
            psycopg.connect(ourl, autocommit=True, prepare_threshold=0, row_factory=dict_row) as pg,
            PostgresSaver.from_conn_string(turl) as saver,
        ):
            official_pg = OfficialPostgresSaver(pg)  # type: ignore[arg-type]
            official_pg.setup()
            saver.setup()
            ms = _drive_delta({"tether": saver, "langgraph": official_pg}, n)
        rows += _delta_rows("postgres", ms)
    return rows


#: Short threads: how many fresh threads, and invokes on each.
SHORT_THREADS, SHORT_INVOKES = 50, 10


def _drive_short(
    savers: dict[str, Any], threads: int, n: int, kind: str
) -> dict[str, dict[str, float]]:
    """Many short threads: ms per invoke (in turns), then ``get_state`` at N=n (in turns)."""
    graphs = {name: _graph(saver, kind) for name, saver in savers.items()}

    def cfg(t: int) -> dict[str, Any]:
        return {"configurable": {"thread_id": f"short-{kind}-{t}"}}

    def steps(graph: Any) -> Iterator[float]:
        for t in range(threads):
            for i in range(n):
                t0 = time.perf_counter()
                graph.invoke({"messages": [_message(kind, i)]}, cfg(t), durability="sync")
                yield time.perf_counter() - t0
            assert len(graph.get_state(cfg(t)).values["messages"]) == 2 * n

    times = interleave({name: steps(graph) for name, graph in graphs.items()})
    # Each call reads the next thread (the same one on both sides): a thread's
    # rows are not left hot in the server's cache by the call before.
    turn = dict.fromkeys(graphs, 0)

    def state(name: str) -> Any:
        turn[name] += 1
        return graphs[name].get_state(cfg(turn[name] % threads))

    reads = alternate({name: lambda name=name: state(name) for name in graphs}, 4 * threads)
    return {
        name: {"invoke": statistics.median(ts) * 1000, "get_state": reads[name]}
        for name, ts in times.items()
    }


def run_short(quick: bool = False) -> list[dict[str, Any]]:
    """The W1 chat on many short Postgres threads (see the module doc)."""
    threads = 20 if quick else SHORT_THREADS
    rows: list[dict[str, Any]] = []
    for kind in ("dict", "langchain"):
        with _pg_pair("short") as savers:
            ms = _drive_short(savers, threads, SHORT_INVOKES, kind)
        for metric, key in (("ms_per_invoke", "invoke"), ("ms_get_state_n10", "get_state")):
            rows.append(
                _row(
                    "postgres",
                    "sync",
                    f"short: {metric}",
                    ms["tether"][key],
                    ms["langgraph"][key],
                    kind,
                )
            )
    return rows


FORK_INVOKES, FORK_CALLS = 300, 60


def _drive_fork(
    savers: dict[str, Any], n: int, calls: int, kind: str
) -> dict[str, dict[str, float]]:
    """The chat of ``n`` invokes on each saver, then ``update_state`` on past checkpoints
    (forks) and on the latest one, in turns: median ms of each."""
    graphs = {name: _graph(saver, kind) for name, saver in savers.items()}
    cfg = {"configurable": {"thread_id": f"fork-{kind}"}}
    for i in range(n):
        for graph in graphs.values():
            graph.invoke({"messages": [_message(kind, i)]}, cfg, durability="sync")
    history = {name: [s.config for s in g.get_state_history(cfg)] for name, g in graphs.items()}
    assert len({len(h) for h in history.values()}) == 1, "the histories differ"
    turn = dict.fromkeys(graphs, 0)

    def update(name: str, past: bool) -> None:
        turn[name] += 1
        h = history[name]
        # The same positions on both sides, spread over the whole history.
        at = h[(turn[name] * 37) % len(h)] if past else cfg
        message = _message(kind, 10_000 + turn[name])
        graphs[name].update_state(at, {"messages": [message]})

    forks = alternate({name: lambda name=name: update(name, True) for name in graphs}, calls)
    latest = alternate({name: lambda name=name: update(name, False) for name in graphs}, calls)
    return {name: {"fork": forks[name], "latest": latest[name]} for name in graphs}


def run_fork(quick: bool = False) -> list[dict[str, Any]]:
    """``update_state`` on a past checkpoint (a fork) and on the latest (see the module doc)."""
    n, calls = (40, 20) if quick else (FORK_INVOKES, FORK_CALLS)
    rows: list[dict[str, Any]] = []
    for kind in ("langchain", "dict"):
        with tempfile.TemporaryDirectory() as tmp:
            conn = sqlite3.connect(Path(tmp) / "official.db", check_same_thread=False)
            official = OfficialSqliteSaver(conn)
            official.setup()
            with SqliteSaver.from_conn_string(str(Path(tmp) / "tether.db")) as saver:
                ms = _drive_fork({"tether": saver, "langgraph": official}, n, calls, kind)
            conn.close()
        for metric in ("fork", "latest"):
            name = f"update_state ms ({metric})"
            rows.append(
                _row("sqlite", "sync", name, ms["tether"][metric], ms["langgraph"][metric], kind)
            )
        with _pg_pair("fork") as savers:
            ms = _drive_fork(savers, n, calls, kind)
        for metric in ("fork", "latest"):
            name = f"update_state ms ({metric})"
            rows.append(
                _row("postgres", "sync", name, ms["tether"][metric], ms["langgraph"][metric], kind)
            )
    return rows


def _drive(
    savers: dict[str, Any], n: int, durability: str, kind: str = "langchain"
) -> dict[str, float]:
    """Median ms per invoke of each saver's graph, the graphs invoked in turns.

    In turns (A B, B A, ...) rather than one run after the other, so both
    meet the same disk, heap and CPU as the history grows.
    """

    def steps(saver: Any) -> Iterator[float]:
        graph = _graph(saver, kind)
        cfg = {"configurable": {"thread_id": f"chat-{kind}-{durability}"}}
        for i in range(n):
            t0 = time.perf_counter()
            graph.invoke({"messages": [_message(kind, i)]}, cfg, durability=durability)
            yield time.perf_counter() - t0
        assert len(graph.get_state(cfg).values["messages"]) == 2 * n

    times = interleave({name: steps(saver) for name, saver in savers.items()})
    return {name: statistics.median(ts) * 1000 for name, ts in times.items()}


def _sqlite_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(pages * size)


@contextmanager
def _database(name: str) -> Iterator[str]:
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(DSN, dbname=name)
    try:
        yield url
    finally:
        with psycopg.connect(DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def _pg_pair(name: str) -> Iterator[dict[str, Any]]:
    """The official and tether Postgres savers, each in a fresh database, as a user
    builds them (``from_conn_string(url)``), set up."""
    with (
        _database(f"tether_bench_{name}_official") as ourl,
        _database(f"tether_bench_{name}_tether") as turl,
        OfficialPostgresSaver.from_conn_string(ourl) as official,
        PostgresSaver.from_conn_string(turl) as saver,
    ):
        official.setup()
        saver.setup()
        yield {"tether": saver, "langgraph": official}


def _pg_bytes(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchone()
    return int(row[0]) if row else 0


def _row(
    store: str, durability: str, metric: str, t: float, o: float, kind: str = "langchain"
) -> dict[str, Any]:
    return {
        "store": store,
        "messages": kind,
        "durability": durability,
        "metric": metric,
        "tether": round(t, 3),
        "langgraph": round(o, 3),
        "ratio": ratio(o, t),
    }


#: (messages, durability) of the W1 chat rows: LangChain messages as before, and
#: plain dict messages in every durability mode (#19 goal 3).
COMBOS = [
    ("langchain", "sync"),
    ("langchain", "async"),
    ("dict", "sync"),
    ("dict", "async"),
    ("dict", "exit"),
]


def run(quick: bool = False) -> list[dict[str, Any]]:
    n = 40 if quick else 300
    rows: list[dict[str, Any]] = []
    for kind, durability in COMBOS:
        with tempfile.TemporaryDirectory() as tmp:
            opath, tpath = Path(tmp) / "official.db", Path(tmp) / "tether.db"
            conn = sqlite3.connect(opath, check_same_thread=False)
            official = OfficialSqliteSaver(conn)
            official.setup()
            with SqliteSaver.from_conn_string(str(tpath)) as saver:
                # The floor: the same graph on LangGraph's own InMemorySaver (no
                # I/O, no disk), invoked in the same turns. No saver can take
                # LangGraph below it, so official / floor bounds every ratio.
                ms = _drive(
                    {"tether": saver, "langgraph": official, "floor": OfficialInMemorySaver()},
                    n,
                    durability,
                    kind,
                )
            conn.close()
            timed = _row("sqlite", durability, "ms_per_invoke", ms["tether"], ms["langgraph"], kind)
            timed["floor"] = round(ms["floor"], 3)
            rows.append(timed)
            rows.append(
                _row(
                    "sqlite",
                    durability,
                    "bytes",
                    _sqlite_bytes(tpath),
                    _sqlite_bytes(opath),
                    kind,
                )
            )
        with _database("tether_bench_official") as ourl, _database("tether_bench_tether") as turl:
            with (
                psycopg.connect(
                    ourl, autocommit=True, prepare_threshold=0, row_factory=dict_row
                ) as conn,
                PostgresSaver.from_conn_string(turl) as saver,
            ):
                official = OfficialPostgresSaver(conn)  # type: ignore[arg-type]
                official.setup()
                saver.setup()
                ms = _drive(
                    {"tether": saver, "langgraph": official, "floor": OfficialInMemorySaver()},
                    n,
                    durability,
                    kind,
                )
            timed = _row(
                "postgres", durability, "ms_per_invoke", ms["tether"], ms["langgraph"], kind
            )
            timed["floor"] = round(ms["floor"], 3)
            rows.append(timed)
            rows.append(
                _row("postgres", durability, "bytes", _pg_bytes(turl), _pg_bytes(ourl), kind)
            )
    rows += run_delta(quick)
    rows += run_short(quick)
    rows += run_fork(quick)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "langgraph.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    runners = {"--delta": run_delta, "--short": run_short, "--fork": run_fork}
    runner = next((r for flag, r in runners.items() if flag in sys.argv), run)
    print(table(runner(quick="--quick" in sys.argv)))

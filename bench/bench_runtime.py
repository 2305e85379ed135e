"""tether's graph runtime vs LangGraph's, per superstep, in one run.

    python -m bench runtime           (or: python -m bench.bench_runtime [--quick])

The same 3-node graph (a -> b -> c, each node adds one to a counter and
appends a short string to a list channel) is built with ``tether.graph`` and
with ``langgraph.graph``, and invoked repeatedly on one thread, so every
invoke is one input checkpoint plus three supersteps. Per-step time = invoke
time / 4 (checkpoints written per invoke), median over the invokes.

Pairs: tether runtime + tether ``InMemorySaver`` vs LangGraph + its
``InMemorySaver``; tether runtime + tether ``SqliteSaver`` vs LangGraph +
the official ``SqliteSaver`` (a file each). Every durability mode.
Ratio = LangGraph / tether (above 1: tether is faster).
"""

from __future__ import annotations

import json
import operator
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver as LGMemory
from langgraph.checkpoint.sqlite import SqliteSaver as LGSqlite
from langgraph.graph import END as LG_END
from langgraph.graph import START as LG_START
from langgraph.graph import StateGraph as LGStateGraph

from bench._workloads import ratio
from tether import InMemorySaver, SqliteSaver
from tether.graph import END, START, StateGraph

RESULTS = Path(__file__).resolve().parent / "results"
STEPS_PER_INVOKE = 4  # input checkpoint + a, b, c


class State(TypedDict):
    count: int
    log: Annotated[list[str], operator.add]


def _node(name: str) -> Callable[[State], dict[str, Any]]:
    def node(state: State) -> dict[str, Any]:
        return {"count": state["count"] + 1, "log": [name]}

    return node


def _build(graph_cls: Any, start: Any, end: Any) -> Any:
    g = graph_cls(State)
    for name in ("a", "b", "c"):
        g.add_node(name, _node(name))
    g.add_edge(start, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", end)
    return g


def _time(graph: Any, invokes: int, durability: str, tid: str) -> float:
    cfg = {"configurable": {"thread_id": tid}}
    times = []
    for _ in range(invokes):
        t0 = time.perf_counter()
        out = graph.invoke({"count": 0, "log": []}, cfg, durability=durability)
        times.append(time.perf_counter() - t0)
        assert out["count"] == 3
    return statistics.median(times) / STEPS_PER_INVOKE * 1e6


def run(quick: bool = False) -> list[dict[str, Any]]:
    invokes = 30 if quick else 200
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tdb = SqliteSaver(Path(tmp) / "tether.db")
        lconn = sqlite3.connect(Path(tmp) / "langgraph.db", check_same_thread=False)
        ldb = LGSqlite(lconn)
        ldb.setup()
        pairs = {
            "memory": (InMemorySaver(), LGMemory()),
            "sqlite": (tdb, ldb),
        }
        for store, (tsaver, lsaver) in pairs.items():
            tgraph = _build(StateGraph, START, END).compile(checkpointer=tsaver)
            lgraph = _build(LGStateGraph, LG_START, LG_END).compile(checkpointer=lsaver)
            for durability in ("sync", "async", "exit"):
                tid = f"{store}-{durability}"
                t_us = _time(tgraph, invokes, durability, tid)
                l_us = _time(lgraph, invokes, durability, tid)
                rows.append(
                    {
                        "saver": store,
                        "durability": durability,
                        "tether_us_per_step": round(t_us, 1),
                        "langgraph_us_per_step": round(l_us, 1),
                        "ratio": ratio(l_us, t_us),
                    }
                )
        tdb.close()
        lconn.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "runtime.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

"""Child process of the crash test: one superstep of three parallel nodes on SQLite.

Usage: ``python crash_worker.py DB EFFECTS DURABILITY start|resume [block] [async]``.
Every node appends ``<name>-start`` / ``<name>-done`` lines to EFFECTS, so the
test counts executions across processes. With ``block``, node ``c`` never
finishes: the test kills the process with SIGKILL once ``a`` and ``b`` are done
and their writes are stored.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
import time
from typing import Annotated, Any, TypedDict

import tether
from tether.graph import START, StateGraph


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def effect(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


def main() -> None:
    db, effects, durability, action = sys.argv[1:5]
    block = "block" in sys.argv[5:]
    use_async = "async" in sys.argv[5:]

    def node(name: str) -> Any:
        def run(state: State) -> dict[str, Any]:
            effect(effects, f"{name}-start")
            if name == "c" and block:
                while True:  # killed here, mid-superstep
                    time.sleep(0.05)
            effect(effects, f"{name}-done")
            return {"items": [name]}

        return run

    g = StateGraph(State)
    for name in ("a", "b", "c"):
        g.add_node(name, node(name))
        g.add_edge(START, name)
    g.add_node("d", node("d"))
    g.add_edge("c", "d")
    with tether.SqliteSaver(db) as saver:
        app = g.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "crash"}}
        start = {"items": []} if action == "start" else None
        if use_async:  # the sync nodes then run in threads under asyncio
            out = asyncio.run(app.ainvoke(start, config, durability=durability))
        else:
            out = app.invoke(start, config, durability=durability)
        print(json.dumps(out))


if __name__ == "__main__":
    main()

"""tether's SqliteSaver vs langgraph-checkpoint-sqlite's SqliteSaver, in one run.

    python -m bench sqlite            (or: python -m bench.bench_sqlite [--quick])

Workloads W1 (chat, N = 100, 300, 1,000), W2 (2,000 threads x 5) and W3
(listing 1,000 small checkpoints with three pending writes each) from
:mod:`bench._workloads`, each on a fresh file per saver in one temporary
directory. Bytes on disk are ``page_count * page_size`` after a WAL checkpoint.
Ratios are official / tether (above 1: tether is faster or smaller). Both use
their defaults (tether: WAL, synchronous=NORMAL, zstd above 2 KiB, append
deltas above 4 KiB; official: WAL, its own synchronous setting).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

from bench._workloads import ratio, w1_chat, w2_threads, w3_history
from tether import SqliteSaver

RESULTS = Path(__file__).resolve().parent / "results"


def _bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(pages * size)


def _tether(path: Path) -> tuple[Any, Callable[[], None]]:
    saver = SqliteSaver(path)
    return saver, saver.close


def _official(path: Path) -> tuple[Any, Callable[[], None]]:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = OfficialSqliteSaver(conn)
    saver.setup()
    return saver, conn.close


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300, 1000]
    threads = 200 if quick else 2000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            got = {}
            for name, open_ in (("tether", _tether), ("langgraph", _official)):
                path = Path(tmp) / f"w1-{name}-{n}.db"
                saver, close = open_(path)
                try:
                    got[name] = w1_chat(saver, n)
                finally:
                    close()
                got[name]["bytes"] = _bytes(path)
            t, o = got["tether"], got["langgraph"]
            for metric in ("step_ms", "step_p95_ms", "get_ms", "list_ms", "bytes"):
                rows.append(
                    {
                        "workload": f"W1 chat N={n}",
                        "metric": metric,
                        "tether": round(t[metric], 3),
                        "langgraph": round(o[metric], 3),
                        "ratio": ratio(o[metric], t[metric]),
                    }
                )
        got = {}
        for name, open_ in (("tether", _tether), ("langgraph", _official)):
            path = Path(tmp) / f"w2-{name}.db"
            saver, close = open_(path)
            try:
                got[name] = w2_threads(saver, threads)
            finally:
                close()
        t, o = got["tether"], got["langgraph"]
        rows.append(
            {
                "workload": f"W2 {threads} threads x 5",
                "metric": "puts_per_s",
                "tether": round(t["puts_per_s"]),
                "langgraph": round(o["puts_per_s"]),
                "ratio": ratio(t["puts_per_s"], o["puts_per_s"]),
            }
        )
        rows.append(
            {
                "workload": f"W2 {threads} threads x 5",
                "metric": "get_ms",
                "tether": round(t["get_ms"], 3),
                "langgraph": round(o["get_ms"], 3),
                "ratio": ratio(o["get_ms"], t["get_ms"]),
            }
        )
        n3 = 200 if quick else 1000
        got = {}
        for name, open_ in (("tether", _tether), ("langgraph", _official)):
            path = Path(tmp) / f"w3-{name}.db"
            saver, close = open_(path)
            try:
                got[name] = w3_history(saver, n3)
            finally:
                close()
        t, o = got["tether"], got["langgraph"]
        rows.append(
            {
                "workload": f"W3 {n3} small checkpoints x 3 writes",
                "metric": "list_ms",
                "tether": round(t["list_ms"], 3),
                "langgraph": round(o["list_ms"], 3),
                "ratio": ratio(o["list_ms"], t["list_ms"]),
            }
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sqlite.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

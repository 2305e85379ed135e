"""tether's SqliteSaver vs langgraph-checkpoint-sqlite's SqliteSaver, in one run.

    python -m bench sqlite            (or: python -m bench.bench_sqlite [--quick])

Workloads W1 (chat, N = 100, 300, 1,000), W2 (2,000 threads x 5) and W3
(listing 1,000 small checkpoints with three pending writes each) from
:mod:`bench._workloads`, each on a fresh file per saver in one temporary
directory, both savers open at once: their writes interleaved step by step and
their reads taken in turns (so neither meets a quieter disk, a smaller heap or
a colder CPU; see :func:`bench._workloads.interleave`). Bytes on disk are
``page_count * page_size`` after a WAL checkpoint.
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

from bench._workloads import alternate, row, w1_pair, w2_pair, w3_fill
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


OPENERS = {"tether": _tether, "langgraph": _official}


def _both(tmp: str, tag: str) -> tuple[dict[str, Any], dict[str, Path], list[Callable[[], None]]]:
    paths = {name: Path(tmp) / f"{tag}-{name}.db" for name in OPENERS}
    opened = {name: OPENERS[name](paths[name]) for name in OPENERS}
    return (
        {name: saver for name, (saver, _) in opened.items()},
        paths,
        [close for _, close in opened.values()],
    )


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300, 1000]
    threads = 200 if quick else 2000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        # Both savers in one process, their steps interleaved and reads taken in
        # turns, so neither meets a quieter disk or a smaller heap (bench._workloads).
        for n in sizes:
            savers, paths, closes = _both(tmp, f"w1-{n}")
            try:
                got = w1_pair(savers, n)
            finally:
                for close in closes:
                    close()
            for name in OPENERS:
                got[name]["bytes"] = _bytes(paths[name])
            t, o = got["tether"], got["langgraph"]
            for metric in ("step_ms", "step_p95_ms", "get_ms", "list_ms", "bytes"):
                rows.append(row(f"W1 chat N={n}", metric, t[metric], o[metric], False))
        savers, paths, closes = _both(tmp, "w2")
        try:
            got = w2_pair(savers, threads)
        finally:
            for close in closes:
                close()
        t, o = got["tether"], got["langgraph"]
        w2 = f"W2 {threads} threads x 5"
        rows.append(row(w2, "puts_per_s", t["puts_per_s"], o["puts_per_s"], True))
        rows.append(row(w2, "get_ms", t["get_ms"], o["get_ms"], False))
        rows.append(row(w2, "bytes", _bytes(paths["tether"]), _bytes(paths["langgraph"]), False))
        n3 = 200 if quick else 1000
        savers, paths, closes = _both(tmp, "w3")
        try:
            for saver in savers.values():
                w3_fill(saver, n3)
            latest = {"configurable": {"thread_id": "w3", "checkpoint_ns": ""}}
            lists = alternate(
                {name: lambda s=s: sum(1 for _ in s.list(latest)) for name, s in savers.items()},
                8,
            )
        finally:
            for close in closes:
                close()
        rows.append(
            row(
                f"W3 {n3} small checkpoints x 3 writes",
                "list_ms",
                lists["tether"],
                lists["langgraph"],
                False,
            )
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sqlite.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

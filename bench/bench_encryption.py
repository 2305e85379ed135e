"""Encryption at rest (#17): its cost on SQLite, side by side with the official saver.

    python -m bench encryption        (or: python -m bench.bench_encryption [--quick])

W1 chat (N = 100, 300, 1,000) on three savers open at once, their steps
interleaved and their reads taken in turns (:func:`bench._workloads.w1_pair`):
LangGraph's official SqliteSaver, tether's SqliteSaver, and tether's with
``encryption=`` (AES-256-GCM, one HKDF-derived key per value, metadata sealed).
Rows:

* ``official/tether-encrypted``: the usual comparison (above 1: the encrypted
  tether saver is faster or smaller than the official one, which stores in clear);
* ``tether/tether-encrypted``: what encryption costs tether (below 1: slower
  or larger with encryption; 0.91 is 10% extra). The goal is under 10% extra
  per step and per ``get_tuple`` at N=1,000.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

from bench._workloads import row, w1_pair
from bench.bench_sqlite import _bytes
from tether import SqliteSaver
from tether.encryption import Encryption

RESULTS = Path(__file__).resolve().parent / "results"
METRICS = ("step_ms", "step_p95_ms", "get_ms", "list_ms", "bytes")


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300, 1000]
    keys = Encryption({"bench": os.urandom(32)})
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            paths = {k: Path(tmp) / f"w1-{n}-{k}.db" for k in ("plain", "sealed", "official")}
            conn = sqlite3.connect(paths["official"], check_same_thread=False)
            official = OfficialSqliteSaver(conn)
            official.setup()
            savers = {
                "plain": SqliteSaver(paths["plain"], encryption=False),
                "sealed": SqliteSaver(paths["sealed"], encryption=keys),
                "official": official,
            }
            try:
                got = w1_pair(savers, n)
            finally:
                savers["plain"].close()
                savers["sealed"].close()
                conn.close()
            for name, path in paths.items():
                got[name]["bytes"] = _bytes(path)
            for metric in METRICS:
                s, p, o = got["sealed"][metric], got["plain"][metric], got["official"][metric]
                rows.append(row(f"W1 chat N={n} official/tether-encrypted", metric, s, o, False))
                cost = row(f"W1 chat N={n} tether/tether-encrypted", metric, s, p, False)
                cost["langgraph"] = None  # the second figure is tether's own, in clear
                cost["tether_plain"] = round(p, 0 if abs(p) >= 1000 else 3)
                rows.append(cost)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "encryption.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

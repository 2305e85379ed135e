"""tether's InMemorySaver vs LangGraph's InMemorySaver, in one run.

    python -m bench memory            (or: python -m bench.bench_memory [--quick])

W1 chat (N = 100, 300) and W2 (2,000 threads x 5) from :mod:`bench._workloads`.
tether's in-memory saver serializes everything it stores (no aliasing, the
same allowlist as the persistent backends), as LangGraph's does for values.
Ratios are official / tether (above 1: tether is faster).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver as OfficialInMemorySaver

from bench._workloads import ratio, w1_chat, w2_threads
from tether import InMemorySaver

RESULTS = Path(__file__).resolve().parent / "results"


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300]
    threads = 200 if quick else 2000
    rows: list[dict[str, Any]] = []
    for n in sizes:
        t = w1_chat(InMemorySaver(), n)
        o = w1_chat(OfficialInMemorySaver(), n)
        for metric in ("step_ms", "get_ms", "list_ms"):
            rows.append(
                {
                    "workload": f"W1 chat N={n}",
                    "metric": metric,
                    "tether": round(t[metric], 3),
                    "langgraph": round(o[metric], 3),
                    "ratio": ratio(o[metric], t[metric]),
                }
            )
    t = w2_threads(InMemorySaver(), threads)
    o = w2_threads(OfficialInMemorySaver(), threads)
    rows.append(
        {
            "workload": f"W2 {threads} threads x 5",
            "metric": "puts_per_s",
            "tether": round(t["puts_per_s"]),
            "langgraph": round(o["puts_per_s"]),
            "ratio": ratio(t["puts_per_s"], o["puts_per_s"]),
        }
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "memory.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

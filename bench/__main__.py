"""Run every benchmark side by side with the official LangGraph savers: `make bench`.

Each `bench/bench_*.py` module exposes `run(quick: bool) -> list[dict]` and
writes its own `bench/results/<name>.json`; this runner calls them in one
process run and prints one markdown table per module (the README's table is
copied from here). Figures are medians; ratios are official / tether, so a
ratio above 1 means tether is faster (or smaller).

    python -m bench [--quick] [serde memory sqlite postgres runtime langgraph scale threads
                     lifecycle]
    python -m bench --big lifecycle    (a module's large mode, where it has one: run(big=True))
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

MODULES = [
    "serde",
    "memory",
    "sqlite",
    "postgres",
    "runtime",
    "langgraph",
    "scale",
    "encryption",
    "threads",
    "lifecycle",
]
RESULTS = Path(__file__).resolve().parent / "results"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    cols: list[str] = []
    for row in rows:
        cols.extend(k for k in row if k not in cols)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(row.get(c, "")) for c in cols) + " |" for row in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--big", action="store_true", help="the large mode of the modules named (lifecycle)"
    )
    parser.add_argument("only", nargs="*", help=f"modules to run (of {', '.join(MODULES)})")
    args = parser.parse_args()
    unknown = [m for m in args.only if m not in MODULES]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {MODULES}")
    if args.big and not args.only:
        parser.error("--big takes the modules to run in their large mode (e.g. lifecycle)")
    RESULTS.mkdir(exist_ok=True)
    report = [
        f"# tether benchmarks ({time.strftime('%Y-%m-%d')}, Python {platform.python_version()}, "
        f"{platform.machine()}, quick={args.quick}, big={args.big})",
    ]
    failed = []
    for name in args.only or MODULES:
        try:
            mod = importlib.import_module(f"bench.bench_{name}")
        except ImportError as exc:
            print(f"skipping {name}: {exc}", file=sys.stderr)
            continue
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            if args.big and "big" not in inspect.signature(mod.run).parameters:
                raise ValueError(f"bench_{name} has no large mode (--big)")
            rows = mod.run(quick=args.quick, **({"big": True} if args.big else {}))
        except Exception as exc:  # report and go on: one broken bench must not hide the rest
            failed.append(name)
            print(f"{name} failed: {exc!r}", file=sys.stderr)
            continue
        report += ["", f"## {name}", "", table(rows)]
    text = "\n".join(report) + "\n"
    (RESULTS / "summary.md").write_text(text)
    print(text)
    (RESULTS / "summary.json").write_text(json.dumps({"failed": failed}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

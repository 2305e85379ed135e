"""Encryption at rest (#17): what it costs tether, and how it compares with the official saver.

    python -m bench encryption        (or: python -m bench.bench_encryption [--quick])

W1 chat (N = 100, 300, 1,000), each comparison a pair of savers open at once,
their steps interleaved (A B B A) and their reads taken in turns
(:func:`bench._workloads.w1_pair`). Rows:

* ``tether/tether-encrypted``: tether's SqliteSaver in clear against the same
  saver with ``encryption=`` (AES-256-GCM, metadata sealed). Below 1: slower
  or larger with encryption (0.91 is 10% extra). The goal is under 10% extra
  per step and per ``get_tuple`` at N=1,000.
* ``official/tether-encrypted``: LangGraph's official SqliteSaver (in clear)
  against tether's encrypting one (above 1: tether is faster or smaller).
* ``postgres tether/tether-encrypted``: as the first, on Postgres (each saver
  in a database of its own); run only when the server answers (``bench_postgres``'s DSN).
* ``postgres async rekey``: ``await saver.arekey(...)`` over rows of 60 KB, and
  the worst and 99th-percentile stall of a 1 ms ticker on the same event loop.

Why pairs and not the three savers in one interleave: in an A B C, C B A
order B always runs right after another saver, while A and C run twice in a
row at every turn (their caches warm from their own step). The official
saver's step rewrites the whole checkpoint (a 250 MB file at N=1,000), so B
ran on cold caches: put in the middle, the same encrypting saver measured
+25-37% per step against tether in clear, and -8 to -12% with the two
swapped; as a pair, +9-10%.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

from bench._workloads import row, w1_pair
from bench.bench_sqlite import _bytes
from tether import PostgresSaver, SqliteSaver
from tether.checkpoint import empty_checkpoint
from tether.encryption import Encryption
from tether.ids import uuid6

RESULTS = Path(__file__).resolve().parent / "results"
METRICS = ("step_ms", "step_p95_ms", "get_ms", "list_ms", "bytes")


def _cost(workload: str, sealed: dict[str, float], plain: dict[str, float]) -> list[dict[str, Any]]:
    """The ``tether/tether-encrypted`` rows: the encrypting saver against tether in clear."""
    rows = []
    for metric in METRICS:
        s, p = sealed[metric], plain[metric]
        cost = row(workload, metric, s, p, False)
        cost["langgraph"] = None  # the second figure is tether's own, in clear
        cost["tether_plain"] = round(p, 0 if abs(p) >= 1000 else 3)
        rows.append(cost)
    return rows


def _sqlite(n: int, keys: Encryption, tmp: str) -> list[dict[str, Any]]:
    paths = {k: Path(tmp) / f"w1-{n}-{k}.db" for k in ("plain", "sealed", "sealed2", "official")}
    plain = SqliteSaver(paths["plain"], encryption=False)
    sealed = SqliteSaver(paths["sealed"], encryption=keys)
    try:
        cost = w1_pair({"plain": plain, "sealed": sealed}, n)
    finally:
        plain.close()
        sealed.close()
    conn = sqlite3.connect(paths["official"], check_same_thread=False)
    official = OfficialSqliteSaver(conn)
    official.setup()
    sealed = SqliteSaver(paths["sealed2"], encryption=keys)
    try:
        versus = w1_pair({"sealed": sealed, "official": official}, n)
    finally:
        sealed.close()
        conn.close()
    cost["plain"]["bytes"] = _bytes(paths["plain"])
    cost["sealed"]["bytes"] = versus["sealed"]["bytes"] = _bytes(paths["sealed"])
    versus["official"]["bytes"] = _bytes(paths["official"])
    rows = [
        row(f"W1 chat N={n} official/tether-encrypted", m, versus["sealed"][m], o, False)
        for m, o in ((m, versus["official"][m]) for m in METRICS)
    ]
    return rows + _cost(f"W1 chat N={n} tether/tether-encrypted", cost["sealed"], cost["plain"])


def _postgres_answers() -> bool:
    from bench.bench_postgres import base_dsn

    try:
        with psycopg.connect(base_dsn(), connect_timeout=3):
            return True
    except psycopg.OperationalError as exc:
        print(f"encryption: skipping Postgres ({exc})", file=sys.stderr)
        return False


def _postgres(n: int, keys: Encryption) -> list[dict[str, Any]]:
    from bench.bench_postgres import fresh_database, stored_bytes

    with fresh_database("encp") as p_dsn, fresh_database("encs") as s_dsn:
        plain = PostgresSaver.from_conn_string(p_dsn, encryption=False)
        sealed = PostgresSaver.from_conn_string(s_dsn, encryption=keys)
        try:
            plain.setup()
            sealed.setup()
            got = w1_pair({"plain": plain, "sealed": sealed}, n)
        finally:
            plain.close()
            sealed.close()
        got["plain"]["bytes"] = stored_bytes(p_dsn)
        got["sealed"]["bytes"] = stored_bytes(s_dsn)
    return _cost(f"W1 chat N={n} postgres tether/tether-encrypted", got["sealed"], got["plain"])


def _async_rekey(threads: int, bench_key: bytes) -> list[dict[str, Any]]:
    """An async rekey on Postgres: how long it takes, and how long it stalls the event
    loop (the worst and 99th-percentile delay of a 1 ms ticker running beside it)."""
    from bench.bench_postgres import fresh_database

    new = Encryption({"new": os.urandom(32), "bench": bench_key})
    doc = os.urandom(30_000).hex()  # 60 KB values, incompressible-ish: the sealing dominates
    with fresh_database("encr") as dsn:
        with PostgresSaver.from_conn_string(dsn, encryption={"bench": bench_key}) as saver:
            saver.setup()
            for t in range(threads):
                cfg: dict[str, Any] = {"configurable": {"thread_id": f"r{t}"}}
                for i in range(8):
                    ck = empty_checkpoint()
                    ck["id"] = str(uuid6())
                    ck["channel_values"] = {"doc": doc + str(i)}
                    version = {"doc": f"{i + 1:032d}.0.1"}
                    ck["channel_versions"] = dict(version)
                    cfg = saver.put(cfg, ck, {"source": "loop", "step": i}, version)
                    saver.put_writes(cfg, [("doc", doc)], f"task-{i}")

        async def rekey() -> tuple[float, list[float], int]:
            saver = PostgresSaver.from_conn_string(dsn, encryption=new)
            lags: list[float] = []
            done = asyncio.Event()

            async def ticker() -> None:
                while not done.is_set():
                    t0 = time.perf_counter()
                    await asyncio.sleep(0.001)
                    lags.append(time.perf_counter() - t0 - 0.001)

            tick = asyncio.create_task(ticker())
            try:
                await saver.arekey_pending("new")  # opens the pool
                t0 = time.perf_counter()
                n = await saver.arekey("new", batch=128)
                took = time.perf_counter() - t0
            finally:
                done.set()
                await tick
                await saver.aclose()
                saver.close()
            return took, sorted(lags), n

        took, lags, n = asyncio.run(rekey())
    workload = f"postgres async rekey, {n} rows of 60 KB"
    return [
        {"workload": workload, "metric": metric, "tether": round(value, 3)}
        for metric, value in (
            ("rekey_ms", took * 1000),
            ("loop_stall_max_ms", lags[-1] * 1000),
            ("loop_stall_p99_ms", lags[int(len(lags) * 0.99)] * 1000),
        )
    ]


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300, 1000]
    bench_key = os.urandom(32)
    keys = Encryption({"bench": bench_key})
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            rows.extend(_sqlite(n, keys, tmp))
    if _postgres_answers():
        rows.extend(_postgres(sizes[-1], keys))
        rows.extend(_async_rekey(10 if quick else 40, bench_key))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "encryption.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

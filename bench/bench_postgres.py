"""tether's PostgresSaver vs langgraph-checkpoint-postgres's PostgresSaver, in one run.

    python -m bench postgres          (or: python -m bench.bench_postgres [--quick])

Server: ``TETHER_BENCH_PG_DSN`` (else ``TETHER_TEST_PG_DSN``, else the local test
server). Every workload runs on a fresh database per saver, dropped afterwards.

* W1 chat (N = 100, 300, 1,000) and W2 many threads (2,000 x 5) from
  :mod:`bench._workloads`, the two savers interleaved step by step (each on
  its own database): every commit waits for a WAL flush, and on a shared disk
  the flush time drifts over seconds, so running one saver after the other
  measured the disk as much as the saver;
* listing one thread of 10,000 checkpoints: time (median of 3) and peak Python
  memory of one full listing (tracemalloc);
* 8 writer processes on distinct threads, each doing put + put_writes, released
  together: aggregate puts per second over the wall time of all eight,
  median of rounds run in the order tether, official, official, tether, ...;
* many conversations in one process (#19 goal 8): 16 and 64 asyncio tasks,
  each putting 25 tiny checkpoints (quick: 5) of its own thread, through one async saver:
  tether's (a pool of 10, group commit on; and off, column ``no_group``)
  against the official ``AsyncPostgresSaver`` as its docs open it (one
  connection). Each saver first serves the same load once untimed (a warm
  pool, as in a running server). Aggregate puts per second and p99 latency
  per put, median of rounds alternated between the three;
* bytes stored: ``pg_total_relation_size`` of every table of the store;
* the floor (column ``floor``) of W2 and of the 8 writers: :class:`FloorSaver`,
  one INSERT and one commit per call through the same harness, interleaved
  with the two savers: what no saver that commits every call can beat.

Ratios are official / tether (above 1: tether is faster or smaller). tether:
``PostgresSaver.from_conn_string(dsn)`` (its defaults: a pool, prepared
statements after 5 uses, zstd above 2 KiB, append deltas above 4 KiB).
Official, as its docs set it up:
``PostgresSaver(psycopg.connect(dsn, autocommit=True, prepare_threshold=0,
row_factory=dict_row))`` then ``setup()``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from bench._workloads import _advance, _checkpoint, row, w1_pair, w2_pair
from tether import PostgresSaver

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def base_dsn() -> str:
    return os.environ.get("TETHER_BENCH_PG_DSN", os.environ.get("TETHER_TEST_PG_DSN", DEFAULT_DSN))


@contextmanager
def fresh_database(tag: str) -> Iterator[str]:
    admin = make_conninfo(base_dsn(), dbname="postgres")
    name = f"tether_bench_{tag}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(base_dsn(), dbname=name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stored_bytes(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM")
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = 'public'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def open_tether(dsn: str) -> tuple[Any, Callable[[], None]]:
    saver = PostgresSaver.from_conn_string(dsn)
    saver.setup()
    return saver, saver.close


def open_official(dsn: str) -> tuple[Any, Callable[[], None]]:
    conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = OfficialPostgresSaver(conn)
    saver.setup()
    return saver, conn.close


OPENERS = {"tether": open_tether, "langgraph": open_official}


@contextmanager
def both_savers(tag: str) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """Each saver on a fresh database of its own, both open at once (for interleaving).

    Yields ``(savers, dsns)``; when the block ends the savers are closed and
    the databases dropped, so read their size inside it.
    """
    with fresh_database(f"{tag}t") as t_dsn, fresh_database(f"{tag}o") as o_dsn:
        dsns = {"tether": t_dsn, "langgraph": o_dsn}
        opened = {name: OPENERS[name](dsns[name]) for name in OPENERS}
        try:
            yield {name: saver for name, (saver, _) in opened.items()}, dsns
        finally:
            for _, close in opened.values():
                close()


def fill_thread(saver: Any, thread_id: str, n: int) -> None:
    """``n`` small checkpoints in one thread (W2's channels), written as a loop does."""
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    prev = None
    for i in range(n):
        ckpt = _checkpoint(prev)
        nv = _advance(saver, ckpt, {"step": i, "status": f"step {i}", "flag": i % 2 == 0})
        cfg = saver.put(cfg, ckpt, {"source": "loop", "step": i, "parents": {}}, nv)
        prev = ckpt


def listing(saver: Any, n: int) -> dict[str, float]:
    cfg = {"configurable": {"thread_id": "big", "checkpoint_ns": ""}}
    fill_thread(saver, "big", n)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        count = sum(1 for _ in saver.list(cfg))
        times.append(time.perf_counter() - t0)
        assert count == n, count
    tracemalloc.start()
    try:
        for _ in saver.list(cfg):
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"list_ms": statistics.median(times) * 1000, "peak_kib": peak / 1024}


class FloorSaver:
    """The least a saver that commits every call can do: the floor of W2 and 8 writers.

    ``put`` is one INSERT of the checkpoint as JSON (values inline, no
    versions kept apart, no metadata merge, no validation) and ``put_writes``
    one multi-row INSERT; each is one round trip and one commit on an
    autocommit connection with prepared statements. ``get_tuple`` reads the
    latest row back. It runs through the same harness as the two savers, so
    its figure bounds what any durable saver can reach on this server: a
    ratio against the official saver above ``floor / official`` is not
    possible for anyone.
    """

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=0)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS floor_checkpoints (thread_id text, checkpoint_ns text,"
            " checkpoint_id text, parent_id text, checkpoint jsonb, metadata jsonb,"
            " PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))"
        )
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS floor_writes (thread_id text, checkpoint_ns text,"
            " checkpoint_id text, task_id text, idx int, channel text, value jsonb,"
            " PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))"
        )
        self._writes: dict[int, str] = {}

    def get_next_version(self, current: Any, channel: Any = None) -> int:
        return (current or 0) + 1

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        c = config["configurable"]
        ns = c.get("checkpoint_ns", "")
        self.conn.execute(
            "INSERT INTO floor_checkpoints VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb)",
            (
                c["thread_id"],
                ns,
                checkpoint["id"],
                c.get("checkpoint_id"),
                json.dumps(checkpoint),
                json.dumps(metadata),
            ),
        )
        return {
            "configurable": {
                "thread_id": c["thread_id"],
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        c = config["configurable"]
        query = self._writes.get(len(writes))
        if query is None:
            rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s::jsonb)"] * len(writes))
            query = self._writes[len(writes)] = f"INSERT INTO floor_writes VALUES {rows}"
        params: list[Any] = []
        for idx, (channel, value) in enumerate(writes):
            params += [c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"]]
            params += [task_id, idx, channel, json.dumps(value)]
        self.conn.execute(query, params)

    def get_tuple(self, config: Any) -> Any:
        c = config["configurable"]
        return self.conn.execute(
            "SELECT checkpoint, metadata FROM floor_checkpoints WHERE thread_id = %s"
            " AND checkpoint_ns = %s ORDER BY checkpoint_id DESC LIMIT 1",
            (c["thread_id"], c.get("checkpoint_ns", "")),
        ).fetchone()


def open_floor(dsn: str) -> tuple[Any, Callable[[], None]]:
    saver = FloorSaver(dsn)
    return saver, saver.conn.close


#: Who the 8-writer processes can be: the two savers, and the floor.
WRITERS = {**OPENERS, "floor": open_floor}


# --- 8 writer processes ---------------------------------------------------------------


def writer(kind: str, dsn: str, thread_id: str, n: int) -> None:
    """Child: connect, say ready, wait for go, then n x (put + put_writes) on one thread."""
    saver, close = WRITERS[kind](dsn)
    try:
        print("ready", flush=True)
        sys.stdin.readline()
        cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        prev = None
        for i in range(n):
            ckpt = _checkpoint(prev)
            nv = _advance(saver, ckpt, {"step": i, "status": f"step {i}", "flag": i % 2 == 0})
            cfg = saver.put(cfg, ckpt, {"source": "loop", "step": i, "parents": {}}, nv)
            saver.put_writes(cfg, [("step", i), ("status", "ok")], f"task-{i}")
            prev = ckpt
        print("done", flush=True)
    finally:
        close()


def writers(kind: str, dsn: str, processes: int, n: int) -> dict[str, float]:
    WRITERS[kind](dsn)[1]()  # setup once, before the writers start
    root = Path(__file__).resolve().parent.parent
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.bench_postgres", "writer", kind, dsn, f"p{k}", str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        for k in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        t0 = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "done"
        elapsed = time.perf_counter() - t0
    finally:
        for child in children:
            child.communicate(timeout=120)
    assert all(c.returncode == 0 for c in children)
    return {"puts_per_s": processes * n / elapsed}


# --- many conversations in one process ----------------------------------------------------


async def _conversation(saver: Any, tid: str, n: int, latencies: list[float]) -> None:
    cfg: dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    prev = None
    for i in range(n):
        ckpt = _checkpoint(prev)
        values = {"step": i, "user": tid, "flag": i % 2 == 0}
        t0 = time.perf_counter()
        nv = _advance(saver, ckpt, values)
        cfg = await saver.aput(cfg, ckpt, {"source": "loop", "step": i, "parents": {}}, nv)
        latencies.append(time.perf_counter() - t0)
        prev = ckpt


async def _many(kind: str, dsn: str, threads: int, per_thread: int) -> tuple[float, float]:
    """Aggregate puts/s and p99 seconds of ``threads`` concurrent conversations."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as OfficialAsync

    latencies: list[float] = []

    async def go(saver: Any, tag: str, record: list[float]) -> float:
        tids = [f"{kind}-{tag}-{k}" for k in range(threads)]
        t0 = time.perf_counter()
        await asyncio.gather(*(_conversation(saver, t, per_thread, record) for t in tids))
        return time.perf_counter() - t0

    # Each saver first serves the same load untimed, as a server's would have:
    # tether's pool has opened its connections and prepared its statements on
    # them (a cold pool's first puts wait for both, which dominated the p99).
    if kind == "langgraph":
        async with OfficialAsync.from_conn_string(dsn) as official:
            await official.setup()
            await go(official, "warm", [])
            elapsed = await go(official, "run", latencies)
    else:
        saver = PostgresSaver.from_conn_string(dsn, group_commit=kind == "tether")
        await saver.asetup()
        try:
            await go(saver, "warm", [])
            elapsed = await go(saver, "run", latencies)
        finally:
            await saver.aclose()
    latencies.sort()
    return threads * per_thread / elapsed, latencies[int(len(latencies) * 0.99)]


def many_conversations(threads: int, per_thread: int, rounds: int) -> list[dict[str, Any]]:
    kinds = ["tether", "langgraph", "no_group"]
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    for r in range(rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:
            with fresh_database(f"mc{kind[0]}") as dsn:
                got[kind].append(asyncio.run(_many(kind, dsn, threads, per_thread)))
    med = {k: [statistics.median(x[i] for x in got[k]) for i in (0, 1)] for k in kinds}
    name = f"{threads} concurrent threads x {per_thread} puts, one process"
    puts = row(name, "puts_per_s", med["tether"][0], med["langgraph"][0], True)
    puts["no_group"] = round(med["no_group"][0])
    p99 = row(name, "p99_ms", med["tether"][1] * 1e3, med["langgraph"][1] * 1e3, False)
    p99["no_group"] = round(med["no_group"][1] * 1e3, 1)
    return [puts, p99]


# --- the run ------------------------------------------------------------------------------


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300, 1000]
    threads = 200 if quick else 2000
    big = 2000 if quick else 10_000
    per_writer = 100 if quick else 500
    rows: list[dict[str, Any]] = []

    for n in sizes:
        with both_savers("w1") as (savers, dsns):
            got = w1_pair(savers, n)
            for name in OPENERS:
                got[name]["bytes"] = stored_bytes(dsns[name])
        t, o = got["tether"], got["langgraph"]
        for metric in ("step_ms", "step_p95_ms", "get_ms", "list_ms", "bytes"):
            rows.append(row(f"W1 chat N={n}", metric, t[metric], o[metric], False))

    with both_savers("w2") as (savers, dsns), fresh_database("w2f") as f_dsn:
        floor, close_floor = open_floor(f_dsn)
        try:
            got = w2_pair({**savers, "floor": floor}, threads)
        finally:
            close_floor()
        for name in OPENERS:
            got[name]["bytes"] = stored_bytes(dsns[name])
    t, o, f = got["tether"], got["langgraph"], got["floor"]
    w2 = f"W2 {threads} threads x 5"
    # The floor column bounds both: no durable saver can do better (FloorSaver).
    puts = row(w2, "puts_per_s", t["puts_per_s"], o["puts_per_s"], True)
    puts["floor"] = round(f["puts_per_s"])
    rows.append(puts)
    gets = row(w2, "get_ms", t["get_ms"], o["get_ms"], False)
    gets["floor"] = round(f["get_ms"], 3)
    rows.append(gets)
    rows.append(row(w2, "bytes", t["bytes"], o["bytes"], False))

    got = {}
    for name, open_ in OPENERS.items():
        with fresh_database(f"ls{name[0]}") as dsn:
            saver, close = open_(dsn)
            try:
                got[name] = listing(saver, big)
            finally:
                close()
    t, o = got["tether"], got["langgraph"]
    big_name = f"list {big:,}-checkpoint thread"
    rows.append(row(big_name, "list_ms", t["list_ms"], o["list_ms"], False))
    rows.append(row(big_name, "peak_kib", t["peak_kib"], o["peak_kib"], False))

    rounds = 2 if quick else 3
    samples: dict[str, list[float]] = {name: [] for name in WRITERS}
    for r in range(rounds):
        order = list(WRITERS) if r % 2 == 0 else list(WRITERS)[::-1]
        for name in order:
            with fresh_database(f"mw{name[0]}") as dsn:
                samples[name].append(writers(name, dsn, 8, per_writer)["puts_per_s"])
    t_ps, o_ps, f_ps = (statistics.median(samples[n]) for n in ("tether", "langgraph", "floor"))
    eight = row(f"8 processes x {per_writer} put+put_writes", "puts_per_s", t_ps, o_ps, True)
    eight["floor"] = round(f_ps)
    rows.append(eight)

    for many in (16, 64):
        rows += many_conversations(many, 5 if quick else 25, 2 if quick else 3)

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "postgres.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "writer":
        writer(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        from bench.__main__ import table

        print(table(run(quick="--quick" in sys.argv)))

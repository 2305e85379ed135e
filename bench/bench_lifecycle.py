"""Thread lifecycle (#15): what a sweep deletes per second, what it costs writers, and the
store's size over a simulated month with a 7-day TTL against the official savers.

    python -m bench lifecycle          (or: python -m bench.bench_lifecycle [--quick])

On SQLite and Postgres (``TETHER_BENCH_PG_DSN``, else ``TETHER_TEST_PG_DSN``, else
the local test server; skipped when unreachable):

* **sweep throughput.** A store of T chat threads x C checkpoints (one thread
  written by ``put``/``put_writes``, copied under T-1 more ids with
  ``copy_thread``), swept with a TTL (every thread expired: whole threads,
  ``batch`` 100 a transaction) and, on a fresh copy, with ``keep_last=2``
  (each thread read once, then pruned in a transaction of its own).
  Checkpoints deleted per second of the whole ``sweep()`` call.
* **writer latency while sweeping.** A writer puts small checkpoints (W2's)
  into new threads back to back while, in another thread of the process, a
  TTL sweep deletes a store like the one above; the same writer alone for as
  long. Rounds alternate with and without; p50 and p99 of each round, median
  of the rounds (with the range).
* **a simulated month and a half.** Every simulated day (42 of them) 20 new chat threads
  (random UUID ids, as applications name them) of 6 steps
  each; tether sweeps once a day with ``Retention(ttl=7 days)`` (the index's
  clock set to the simulated day); the official savers have no expiry and
  only grow. Size on disk at days 7, 14, 28 and 42: the SQLite file (after a WAL
  checkpoint), the Postgres tables with their indexes and TOAST (after a
  plain ``VACUUM`` of both schemas each day, as autovacuum would do).
  The official savers have no sweep, so there is no throughput to set beside
  ours; their size is the comparison.

**The large mode** (``python -m bench --big lifecycle``, or ``python -m
bench.bench_lifecycle --big``; results in ``bench/results/lifecycle_big.json``)
measures the issue's row at its size: 1,000,000 checkpoints in 10,000 threads
(chats of 100 turns of about 100 bytes, a write per turn: about 113 kB per
thread as the index counts it), on SQLite and Postgres:

* **the store.** One chat is written through the saver with the index's
  clock a month back (so every thread is past a 7-day TTL and its grace),
  then copied under 9,999 random ids by set-based SQL (``bench/_bulk.py``:
  one ``INSERT ... SELECT`` per table, rows interleaved across threads as
  concurrent conversations leave them); a copy is checked against
  ``copy_thread``'s on the store. A dry run first says what is due.
* **segments in turns** until the sweep is done, each ``SEGMENT`` (4) seconds:
  the writer alone (W2 puts into new threads), a ``sweep(max_seconds=4)``
  with the writer running, a ``sweep(max_seconds=4)`` alone; the next sweep
  goes on where the last stopped, so every kind of segment sees the store at
  every size. Checkpoints deleted per second, alone and with the writer
  (total over the segments, and the range of the segments' rates); writer
  p50/p99 per segment, median of the segments with the range.
* once with ``Retention(ttl=7 days)`` (whole threads) and once, on a fresh
  store, with ``Retention(keep_last=2, grace=1 day)`` (each thread read and
  pruned to 2 checkpoints: 980,000 deleted); then a dry run must find
  nothing left, and the sweeps must have deleted what the first dry run said.

``--quick --big`` runs the same on 500 threads, for a smoke run; ``--sqlite``
skips Postgres (``python -m bench.bench_lifecycle --big --sqlite``).

``python -m bench.bench_lifecycle --bloat [--vacuum=vacuum|autovacuum|none]
[--threads=N] [--cycles=N]`` measures Postgres space around such sweeps
(``bench/_bloat.py``; the findings are in docs/lifecycle.md).
"""

from __future__ import annotations

import datetime
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._workloads import _advance, _checkpoint, _message
from tether.lifecycle import Retention

RESULTS = Path(__file__).resolve().parent / "results"
DSN = os.environ.get(
    "TETHER_BENCH_PG_DSN",
    os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
)
DAY = datetime.timedelta(days=1)
LATER = datetime.datetime.now(datetime.UTC) + 30 * DAY


def _pg_ok() -> bool:
    try:
        import psycopg

        psycopg.connect(DSN, connect_timeout=3).close()
        return True
    except Exception:
        return False


def chat_thread(
    saver: Any, thread_id: str, steps: int, message: Callable[[int], Any] = _message
) -> None:
    """A chat of ``steps`` turns: a growing message list, a step counter, a write per turn."""
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    prev = None
    messages: list[dict[str, Any]] = []
    for i in range(steps):
        ckpt = _checkpoint(prev)
        messages = [*messages, message(i)]
        nv = _advance(saver, ckpt, {"messages": messages, "step": i})
        cfg = saver.put(cfg, ckpt, {"source": "loop", "step": i, "parents": {}}, nv)
        saver.put_writes(cfg, [("step", i)], f"task-{i}")
        prev = ckpt


def populate(saver: Any, threads: int, steps: int, prefix: str = "old") -> int:
    """``threads`` copies of one chat; the checkpoints written."""
    chat_thread(saver, f"{prefix}-0", steps)
    for t in range(1, threads):
        saver.copy_thread(f"{prefix}-0", f"{prefix}-{t}")
    return threads * steps


# --- the savers ------------------------------------------------------------------------------


@contextmanager
def sqlite_saver(tmp: str) -> Iterator[Any]:
    from tether import SqliteSaver

    with SqliteSaver(Path(tmp) / f"{uuid.uuid4().hex}.db") as saver:
        yield saver


@contextmanager
def pg_saver() -> Iterator[Any]:
    import psycopg

    from tether import PostgresSaver

    schema = "bl_" + uuid.uuid4().hex[:10]
    try:
        with PostgresSaver.from_conn_string(DSN, schema=schema) as saver:
            saver.setup()
            yield saver
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


Maker = Callable[[], Any]


# --- sweep throughput -------------------------------------------------------------------------


def throughput(backend: str, make: Maker, threads: int, steps: int) -> list[dict[str, Any]]:
    rows = []
    for name, policy in (
        ("TTL: whole threads", Retention(ttl=DAY)),
        ("keep_last=2: live threads pruned", Retention(keep_last=2)),
    ):
        with make() as saver:
            populate(saver, threads, steps)
            saver.retention = policy
            t0 = time.perf_counter()
            report = saver.sweep(now=LATER, batch=100)
            seconds = time.perf_counter() - t0
        rows.append(
            {
                "workload": f"sweep {name} ({threads} threads x {steps})",
                "backend": backend,
                "checkpoints deleted": report.checkpoints,
                "checkpoints/s": round(report.checkpoints / seconds),
                "threads/s": round((report.threads or report.pruned_threads) / seconds),
                "transactions": report.batches,
            }
        )
    return rows


# --- writer latency while a sweep runs --------------------------------------------------------


def _writer(saver: Any, tag: str, until: Callable[[], bool]) -> list[float]:
    """W2-style puts into new threads until ``until()``; each put's seconds."""
    times = []
    clock = time.perf_counter
    t = 0
    while not until():
        cfg: dict[str, Any] = {"configurable": {"thread_id": f"{tag}-{t}", "checkpoint_ns": ""}}
        ckpt = _checkpoint(None)
        t0 = clock()
        nv = _advance(saver, ckpt, {"step": t, "user": "u", "flag": True})
        saver.put(cfg, ckpt, {"source": "loop", "step": 0, "parents": {}}, nv)
        times.append(clock() - t0)
        t += 1
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def writer_latency(
    backend: str, make: Maker, threads: int, steps: int, rounds: int
) -> list[dict[str, Any]]:
    found: dict[str, list[tuple[float, float]]] = {"alone": [], "while sweeping": []}
    window = 2.0  # seconds the writer runs alone: as long as the last sweep took
    for r in range(rounds):
        for case in ("while sweeping", "alone") if r % 2 == 0 else ("alone", "while sweeping"):
            with make() as saver:
                populate(saver, threads, steps)
                saver.retention = Retention(ttl=DAY)
                if case == "alone":
                    deadline = time.monotonic() + window
                    times = _writer(saver, f"w{r}", lambda d=deadline: time.monotonic() > d)
                else:
                    done = threading.Event()
                    started = time.monotonic()

                    def sweep(s: Any = saver, e: threading.Event = done) -> None:
                        try:
                            s.sweep(now=LATER, batch=100)
                        finally:
                            e.set()

                    worker = threading.Thread(target=sweep)
                    worker.start()
                    times = _writer(saver, f"w{r}", done.is_set)
                    worker.join()
                    window = time.monotonic() - started
            found[case].append((_pct(times, 0.5), _pct(times, 0.99)))
    rows = []
    for case in ("alone", "while sweeping"):
        p50 = [a for a, _ in found[case]]
        p99 = [b for _, b in found[case]]
        rows.append(
            {
                "workload": f"writer put latency, {case} ({threads} threads x {steps} swept)",
                "backend": backend,
                "p50 ms": round(statistics.median(p50), 3),
                "p99 ms": round(statistics.median(p99), 3),
                "p99 range ms": f"{min(p99):.2f}-{max(p99):.2f}",
            }
        )
    return rows


# --- a simulated month -------------------------------------------------------------------------


def _sqlite_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def month(backend: str, days: int, per_day: int, steps: int, tmp: str) -> list[dict[str, Any]]:
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    sizes: dict[int, tuple[int, int]] = {}
    with _month_savers(backend, tmp) as (tether, official, size_of):
        for day in range(1, days + 1):
            today = start + day * DAY
            micros = int(today.timestamp() * 1_000_000)
            _set_clock(tether, lambda m=micros: m)
            for _ in range(per_day):
                tid = str(uuid.uuid4())  # as applications name threads: keys spread over indexes
                chat_thread(tether, tid, steps)
                chat_thread(official, tid, steps)
            tether.sweep(now=today + datetime.timedelta(hours=1), batch=100)
            if day in (7, 14, 28, days):
                sizes[day] = size_of()
    return [
        {
            "workload": f"store size, day {day} ({per_day} chats/day x {steps} steps, TTL 7d)",
            "backend": backend,
            "tether MB": round(t / 1e6, 2),
            "langgraph MB": round(o / 1e6, 2),
            "ratio": round(o / t, 2),
        }
        for day, (t, o) in sizes.items()
    ]


def _set_clock(saver: Any, clock: Callable[[], int]) -> None:
    """The thread index's clock (a simulated day's writes are that day's activity)."""
    saver._clock = clock
    core = getattr(saver, "_sync_core", None)
    if core is not None:
        core()._clock = clock


@contextmanager
def _month_savers(
    backend: str, tmp: str
) -> Iterator[tuple[Any, Any, Callable[[], tuple[int, int]]]]:
    retention = Retention(ttl=7 * DAY)
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

        from tether import SqliteSaver

        mine, theirs = Path(tmp) / "month-tether.db", Path(tmp) / "month-official.db"
        conn = sqlite3.connect(theirs, check_same_thread=False)
        official = OfficialSqliteSaver(conn)
        official.setup()
        with SqliteSaver(mine, retention=retention) as saver:
            yield saver, official, lambda: (_sqlite_size(mine), _sqlite_size(theirs))
        conn.close()
        return
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
    from psycopg.rows import dict_row

    from tether import PostgresSaver

    mine, theirs = "bm_" + uuid.uuid4().hex[:10], "bo_" + uuid.uuid4().hex[:10]
    admin = psycopg.connect(DSN, autocommit=True)
    admin.execute(f'CREATE SCHEMA "{theirs}"')
    off_conn = psycopg.connect(
        DSN,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={theirs}",
    )
    official = OfficialPostgresSaver(off_conn)  # type: ignore[arg-type]
    official.setup()

    def size_of() -> tuple[int, int]:
        out = []
        for schema in (mine, theirs):
            for (table,) in admin.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall():
                admin.execute(f'VACUUM "{schema}"."{table}"')
            out.append(
                admin.execute(
                    "SELECT coalesce(sum(pg_total_relation_size(format('%%I.%%I', schemaname, "
                    "tablename))), 0) FROM pg_tables WHERE schemaname = %s",
                    (schema,),
                ).fetchone()[0]
            )
        return int(out[0]), int(out[1])

    try:
        with PostgresSaver.from_conn_string(DSN, schema=mine, retention=retention) as saver:
            saver.setup()
            yield saver, official, size_of
    finally:
        off_conn.close()
        for schema in (mine, theirs):
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


# --- 1M checkpoints in 10,000 threads (--big) ------------------------------------------------

BIG_THREADS, BIG_STEPS = 10_000, 100
#: Seconds of one segment of the big run (writer alone / sweep + writer / sweep alone).
SEGMENT = 4.0


def short_message(i: int) -> dict[str, Any]:
    """A chat turn of about 100 bytes (the big store's: 1M of W1's 500-byte turns would
    make a store of several GB on a shared machine)."""
    return {"type": "ai" if i % 2 else "human", "id": f"m-{i:04d}", "content": f"turn {i} " * 8}


@contextmanager
def _clock_at(saver: Any, micros: int) -> Iterator[None]:
    """The thread index's clock stopped at ``micros`` (a store written a month ago)."""
    target = saver._sync_core() if hasattr(saver, "_sync_core") else saver
    before = target._clock
    target._clock = lambda: micros
    try:
        yield
    finally:
        target._clock = before


@contextmanager
def big_store(
    backend: str, tmp: str, threads: int, steps: int
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A store of ``threads`` chats of ``steps`` checkpoints, all last active 30 days ago.

    One chat is written by the saver (its index clock set a month back), then
    its rows are copied under ``threads - 1`` random ids by set-based SQL
    (:mod:`bench._bulk`), which is checked against ``copy_thread`` on the store.
    """
    from bench import _bulk

    ago = int((datetime.datetime.now(datetime.UTC) - 30 * DAY).timestamp() * 1_000_000)
    ids = _bulk.new_ids(threads)
    with sqlite_saver(tmp) if backend == "sqlite" else pg_saver() as saver:
        t0 = time.perf_counter()
        with _clock_at(saver, ago):
            chat_thread(saver, ids[0], steps, short_message)
        if backend == "sqlite":
            path = saver._conns.where
            _bulk.sqlite_copy(path, ids[0], ids[1:])
            rows = _bulk.sqlite_rows(path)
        else:
            schema = saver._sync_core()._sql.schema
            _bulk.pg_copy(DSN, schema, ids[0], ids[1:])
            rows = _bulk.pg_rows(DSN, schema)
        load = time.perf_counter() - t0
        _bulk.check_copies(saver, ids[0], ids[-1], rows)
        summary = saver.threads(limit=1).items[0]
        info = {"load s": round(load, 1), "bytes per thread": summary.bytes}
        yield saver, info


def _segments(
    saver: Any, tag: str, segment: float
) -> tuple[dict[str, list[tuple[float, int, float]]], dict[str, list[list[float]]]]:
    """Segments in turns until the sweep is done: the writer alone, the sweep with the
    writer, the sweep alone, each ``segment`` seconds (a sweep segment is one
    ``sweep(max_seconds=segment)``). Sweep segments: (seconds, checkpoints, batches);
    writer segments: each put's seconds."""
    sweeps: dict[str, list[tuple[float, int, float]]] = {"with writer": [], "alone": []}
    writes: dict[str, list[list[float]]] = {"alone": [], "while sweeping": []}
    finished = False
    turn = 0
    while not finished:
        case = ("writer", "both", "sweep")[turn % 3]
        name = f"{tag}-{turn}"
        turn += 1
        if case == "writer":
            deadline = time.monotonic() + segment
            writes["alone"].append(_writer(saver, name, lambda d=deadline: time.monotonic() > d))
            continue
        out: list[Any] = []
        done = threading.Event()

        def sweep(o: list[Any] = out, e: threading.Event = done) -> None:
            try:
                t0 = time.perf_counter()
                o.append(saver.sweep(batch=100, max_seconds=segment))
                o.append(time.perf_counter() - t0)
            finally:
                e.set()

        if case == "both":
            worker = threading.Thread(target=sweep)
            worker.start()
            writes["while sweeping"].append(_writer(saver, name, done.is_set))
            worker.join()
        else:
            sweep()
        report, seconds = out
        sweeps["with writer" if case == "both" else "alone"].append(
            (seconds, report.checkpoints, report.batches)
        )
        finished = report.finished
    return sweeps, writes


def big_rows(
    backend: str, tmp: str, threads: int, steps: int, segment: float
) -> list[dict[str, Any]]:
    """The 1M rows of one backend: TTL and keep_last, each on a fresh big store."""
    rows: list[dict[str, Any]] = []
    for name, policy in (
        ("TTL 7 days: whole threads", Retention(ttl=7 * DAY)),
        ("keep_last=2: live threads pruned", Retention(keep_last=2, grace=DAY)),
    ):
        with big_store(backend, tmp, threads, steps) as (saver, info):
            saver.retention = policy
            dry = saver.sweep(dry_run=True)
            sweeps, writes = _segments(saver, f"w-{name[:3]}", segment)
            left = saver.sweep(dry_run=True)
        deleted = sum(n for part in sweeps.values() for _, n, _ in part)
        if deleted != dry.checkpoints or left.checkpoints:  # the dry run said so, and all went
            raise AssertionError(f"swept {deleted}, dry run said {dry}, left {left}")
        label = f"{threads:,} threads x {steps} ({threads * steps:,} checkpoints)"
        row: dict[str, Any] = {
            "workload": f"sweep {name}, {label}",
            "backend": backend,
            **info,
            "checkpoints deleted": deleted,
            "transactions": int(sum(b for part in sweeps.values() for _, _, b in part)),
        }
        for case, parts in sweeps.items():
            if parts:
                rate = [n / s for s, n, _ in parts if n]
                row[f"checkpoints/s {case}"] = round(
                    sum(n for _, n, _ in parts) / sum(s for s, _, _ in parts)
                )
                row[f"segment rate range {case}"] = f"{min(rate):,.0f}-{max(rate):,.0f}"
        rows.append(row)
        for case, parts in writes.items():
            kept = [t for t in parts if t]
            p50 = [_pct(t, 0.5) for t in kept]
            p99 = [_pct(t, 0.99) for t in kept]
            rows.append(
                {
                    "workload": f"writer put latency, {case} ({name}, {label})",
                    "backend": backend,
                    "segments": len(kept),
                    "puts": sum(len(t) for t in kept),
                    "p50 ms": round(statistics.median(p50), 3),
                    "p99 ms": round(statistics.median(p99), 3),
                    "p99 range ms": f"{min(p99):.2f}-{max(p99):.2f}",
                }
            )
    return rows


def run_big(
    threads: int = BIG_THREADS,
    steps: int = BIG_STEPS,
    segment: float = SEGMENT,
    postgres: bool = True,
) -> list[dict[str, Any]]:
    """The issue's measured row at its size (``--big``): SQLite, then Postgres
    (``postgres=False``, ``--sqlite``: SQLite only)."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        backends = ["sqlite", *(["postgres"] if postgres and _pg_ok() else [])]
        for backend in backends:
            print(f"big: {backend}", file=sys.stderr, flush=True)
            rows += big_rows(backend, tmp, threads, steps, segment)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lifecycle_big.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def run(quick: bool = False, big: bool = False, postgres: bool = True) -> list[dict[str, Any]]:
    if big:  # the size instead of the quick rows (--big)
        if quick:
            return run_big(500, BIG_STEPS, 1.0, postgres=postgres)
        return run_big(postgres=postgres)
    threads, steps = (200, 10) if quick else (1_000, 20)
    rounds = 2 if quick else 4
    days, per_day, chat = (14, 5, 4) if quick else (42, 20, 6)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        backends: list[tuple[str, Maker]] = [("sqlite", lambda: sqlite_saver(tmp))]
        if _pg_ok():
            backends.append(("postgres", pg_saver))
        for name, make in backends:
            rows += throughput(name, make, threads, steps)
            rows += writer_latency(name, make, threads, steps, rounds)
            rows += month(name, days, per_day, chat, tmp)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lifecycle.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    if "--bloat" in sys.argv:  # Postgres space around a 1M sweep (bench/_bloat.py)
        from bench._bloat import run_bloat

        opts = dict(a.removeprefix("--").split("=", 1) for a in sys.argv[1:] if "=" in a)
        found = run_bloat(
            DSN,
            opts.get("vacuum", "vacuum"),
            int(opts.get("threads", BIG_THREADS)),
            cycles=int(opts.get("cycles", 2)),
        )
        print(table(found))
        RESULTS.mkdir(exist_ok=True)
        name = f"lifecycle_bloat_{opts.get('vacuum', 'vacuum')}.json"
        (RESULTS / name).write_text(json.dumps(found, indent=2, default=str) + "\n")
    else:
        quick, big, pg = "--quick" in sys.argv, "--big" in sys.argv, "--sqlite" not in sys.argv
        found = run(quick=quick, big=big, postgres=pg)
        print(table(found))

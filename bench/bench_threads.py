"""The thread index (#15): what it costs a put, and what it buys a listing.

    python -m bench threads           (or: python -m bench.bench_threads [--quick])

Two workloads, on SQLite and Postgres (``TETHER_BENCH_PG_DSN``, else
``TETHER_TEST_PG_DSN``, else the local test server; skipped when unreachable):

* **put cost with and without the index.** The same tree in child
  processes, one keeping the index and one with its statements replaced by
  no-ops that bind the same parameters (and ``plan_index`` by a constant),
  alternated round by round so that neither meets a quieter machine; median
  seconds per put (or step, or invoke) of each round, then the median of the
  rounds. Three workloads: W2's puts of tiny states (many threads of 5 small
  checkpoints, :func:`bench._workloads.w2_puts`: the worst case, where the
  index row is a large part of what a put writes), W1's put + put_writes of a
  growing chat, and a LangGraph chat graph of dict messages (10 invokes per
  thread, durability ``sync``).
* **first page of 50 of 100,000 threads.** ``threads(limit=50)`` (and with
  ``status="interrupted"``, and a page after a cursor) against what the
  official savers offer: ``list(None)`` read until 50 distinct threads were
  seen (newest first: the best case, good for "recent threads" only) and the
  whole ``list(None)`` scan (what any filter by status or age needs). The
  100,000 threads are made by bulk SQL in the setup: one real thread written
  by each saver's own ``put``, its rows copied under 100,000 thread ids
  (putting them one by one would take minutes per saver); every 10th tether
  thread is marked interrupted. Median of the repeats.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._workloads import median_ms
from tether.backends._threads import BUCKET_BITS

RESULTS = Path(__file__).resolve().parent / "results"
HERE = Path(__file__).resolve().parent.parent
DSN = os.environ.get(
    "TETHER_BENCH_PG_DSN",
    os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
)

# A child process: one workload on one backend, with the thread index kept
# ("on") or with its statements replaced by no-ops of the same parameters and
# plan_index by a constant ("off": the same tree, so the difference is the
# index and nothing else); prints the median seconds per put or per invoke.
_CHILD = r"""
import statistics, sys, tempfile, time, uuid
sys.path.insert(0, sys.argv[1])
from bench._workloads import w1_steps, w2_puts
mode, backend, work, n, dsn = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
if mode == "off":
    from tether.backends._threads import IndexPut
    off = IndexPut(True, None, False, {}, 0)
    if backend == "sqlite":
        import tether.backends.sqlite._saver as S
        S.INDEX_PUT_FAST = S.INDEX_PUT = "SELECT ?11"
        S.INDEX_WRITES_FAST = S.INDEX_WRITES = "SELECT ?5"
        S.plan_index = lambda *a: off
    else:
        import tether.backends.postgres._async as A, tether.backends.postgres._sync as Y
        from tether.backends.postgres._sql import Statements
        used = ("%(ix_now)s::bigint IS NOT NULL AND %(ix_bytes)s::bigint IS NOT NULL "
                "AND %(ix_root)s::boolean IS NOT NULL AND %(ix_ts)s::text IS NOT NULL "
                "AND %(ix_runnable)s::boolean IS NOT NULL")
        def no_put(self, *, resolved):
            cands = " AND %(ix_candidates)s::text[] IS NOT NULL" if resolved else ""
            return f"SELECT 1 FROM cp_row WHERE {used}{cands}"
        def no_writes(self, *, special, gate=""):
            return ("SELECT 1 WHERE %(ix_now)s::bigint IS NOT NULL "
                    "AND %(ix_bytes)s::bigint IS NOT NULL")
        Statements._index_put = no_put
        Statements._index_writes = no_writes
        A.plan_index = Y.plan_index = lambda *a: off
schema = "bt_" + uuid.uuid4().hex[:12]
if work == "invoke":
    from bench.bench_langgraph import _graph, _message
    if backend == "sqlite":
        from tether.langgraph import SqliteSaver
        saver = SqliteSaver(tempfile.mkdtemp() + "/lg.db")
    else:
        from tether.langgraph import PostgresSaver
        ctx = PostgresSaver.from_conn_string(dsn, schema=schema)
        saver = ctx.__enter__()
        saver.setup()
    graph = _graph(saver, "dict")
    per = []
    for t in range(n):
        cfg = {"configurable": {"thread_id": f"lg-{t}"}}
        for i in range(10):
            t0 = time.perf_counter()
            graph.invoke({"messages": [_message("dict", i)]}, cfg, durability="sync")
            per.append(time.perf_counter() - t0)
    saver = saver.saver
else:
    if backend == "sqlite":
        from tether import SqliteSaver
        saver = SqliteSaver(tempfile.mkdtemp() + "/w.db")
    else:
        from tether import PostgresSaver
        saver = PostgresSaver.from_conn_string(dsn, schema=schema)
        saver.setup()
    if work == "w2":
        per = [s / 5 for s in w2_puts(saver, n)]
    else:
        per = list(w1_steps(saver, n))
print(statistics.median(per))
saver.close()
if backend != "sqlite":
    import psycopg
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f'DROP SCHEMA "{schema}" CASCADE')
"""

#: What each put-cost workload times: W2 puts of tiny states (the worst case:
#: the index row is a large part of what a put writes), W1's put + put_writes
#: of a growing chat, and a LangGraph chat graph's invoke (3 puts, 2 put_writes
#: and a read each, 10 invokes per thread).
_WORKLOADS = {
    "w2": ("put (W2, {n} threads x 5)", "us per put"),
    "w1": ("put + put_writes (W1 chat, N={n})", "us per step"),
    "invoke": ("LangGraph dict chat invoke, sync ({n} threads x 10)", "us per invoke"),
}


def put_cost(backend: str, work: str, n: int, rounds: int) -> dict[str, Any]:
    """Median seconds per put (or step, or invoke) with the index and without it."""
    got: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, str(HERE), mode, backend, work, str(n), DSN],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": str(HERE / "src")},
            )
            got[mode].append(float(out.stdout.strip().splitlines()[-1]))
    before = statistics.median(got["off"]) * 1e6
    after = statistics.median(got["on"]) * 1e6
    workload, metric = _WORKLOADS[work]
    return {
        "backend": backend,
        "workload": f"{workload.format(n=n)}, {rounds} rounds",
        "metric": metric,
        "before": round(before, 1),
        "after": round(after, 1),
        "extra": f"{(after / before - 1) * 100:+.1f}%",
    }


def _pg_ok() -> bool:
    try:
        import psycopg

        psycopg.connect(DSN, connect_timeout=3).close()
    except Exception:
        return False
    return True


def _first_threads(saver: Any, n: int) -> list[str]:
    seen: dict[str, None] = {}
    for tup in saver.list(None):
        seen.setdefault(tup.config["configurable"]["thread_id"], None)
        if len(seen) >= n:
            break
    return list(seen)


def _scan_all(saver: Any) -> int:
    return len({t.config["configurable"]["thread_id"] for t in saver.list(None)})


def _put_one(saver: Any) -> None:
    from bench._workloads import w2_puts

    for _ in w2_puts(saver, 1):
        pass


def _listing_rows(backend: str, tether: Any, official: Any, n: int, repeats: int) -> list[Any]:
    page = tether.threads(limit=50)
    assert len(page) == 50
    cursor = page.next_cursor
    calls = {
        "tether threads(limit=50)": lambda: tether.threads(limit=50),
        "tether threads(status='interrupted', limit=50)": lambda: tether.threads(
            status="interrupted", limit=50
        ),
        "tether threads(limit=50, cursor=page 2)": lambda: tether.threads(limit=50, cursor=cursor),
        "official list(None) until 50 threads": lambda: _first_threads(official, 50),
        "official list(None) whole scan": lambda: _scan_all(official),
    }
    rows = []
    for name, fn in calls.items():
        scan = "whole scan" in name
        ms = median_ms(fn, 3 if scan else repeats)
        rows.append(
            {
                "backend": backend,
                "workload": f"first page of 50 of {n:,} threads",
                "metric": name,
                "ms": round(ms, 3),
            }
        )
    return rows


def _sqlite_listing(tmp: str, n: int, repeats: int) -> list[Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

    from tether import SqliteSaver

    tpath, opath = Path(tmp) / "t.db", Path(tmp) / "o.db"
    with SqliteSaver(tpath) as saver:
        _put_one(saver)
    conn = sqlite3.connect(opath, check_same_thread=False)
    official = OfficialSqliteSaver(conn)
    official.setup()
    _put_one(official)
    ids = "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?) "
    with sqlite3.connect(tpath) as c:
        for table in ("tether_checkpoints", "tether_blobs"):
            cols = [r[1] for r in c.execute(f"PRAGMA table_info({table})") if r[1] != "thread_id"]
            c.execute(
                f"{ids}INSERT INTO {table} (thread_id, {', '.join(cols)}) "
                f"SELECT 'bulk-' || s.i, {', '.join('x.' + k for k in cols)} "
                f"FROM s, {table} x WHERE x.thread_id = 'w2-0'",
                (n - 1,),
            )
        cols = [r[1] for r in c.execute("PRAGMA table_info(tether_threads)")]
        moved = {"thread_id": "'bulk-' || s.i", "updated_at": "x.updated_at - s.i * 1000"}
        moved["bucket"] = f"(x.updated_at - s.i * 1000) >> {BUCKET_BITS}"
        moved["status"] = "CASE WHEN s.i % 10 = 0 THEN 'interrupted' ELSE x.status END"
        c.execute(
            f"{ids}INSERT INTO tether_threads ({', '.join(cols)}) "
            f"SELECT {', '.join(moved.get(k, 'x.' + k) for k in cols)} "
            "FROM s, tether_threads x WHERE x.thread_id = 'w2-0'",
            (n - 1,),
        )
    cols = [r[1] for r in conn.execute("PRAGMA table_info(checkpoints)") if r[1] != "thread_id"]
    conn.execute(
        f"{ids}INSERT INTO checkpoints (thread_id, {', '.join(cols)}) "
        f"SELECT 'bulk-' || s.i, {', '.join('x.' + k for k in cols)} "
        "FROM s, checkpoints x WHERE x.thread_id = 'w2-0'",
        (n - 1,),
    )
    conn.commit()
    try:
        with SqliteSaver(tpath) as saver:
            return _listing_rows("sqlite", saver, official, n, repeats)
    finally:
        conn.close()


def _pg_listing(n: int, repeats: int) -> list[Any]:
    import uuid

    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver

    from tether import PostgresSaver

    mine = "bt_" + uuid.uuid4().hex[:10]
    theirs = "bo_" + uuid.uuid4().hex[:10]
    admin = psycopg.connect(DSN, autocommit=True)
    admin.execute(f'CREATE SCHEMA "{theirs}"')
    off_conn = psycopg.connect(
        DSN, autocommit=True, prepare_threshold=0, options=f"-c search_path={theirs}"
    )
    from psycopg.rows import dict_row

    off_conn.row_factory = dict_row  # type: ignore[assignment]
    official = OfficialPostgresSaver(off_conn)  # type: ignore[arg-type]
    try:
        official.setup()
        _put_one(official)
        with PostgresSaver.from_conn_string(DSN, schema=mine) as saver:
            saver.setup()
            _put_one(saver)

        def copy(schema: str, table: str, extra: dict[str, str] | None = None) -> None:
            cols = [
                r[0]
                for r in admin.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    (schema, table),
                )
            ]
            moved = {"thread_id": "'bulk-' || s.i", **(extra or {})}
            admin.execute(
                f'INSERT INTO "{schema}".{table} ({", ".join(cols)}) '
                f"SELECT {', '.join(moved.get(k, 'x.' + k) for k in cols)} "
                f'FROM generate_series(1, %s) s(i), "{schema}".{table} x '
                "WHERE x.thread_id = 'w2-0'",
                (n - 1,),
            )

        for table in ("tether_checkpoints", "tether_blobs"):
            copy(mine, table)
        copy(
            mine,
            "tether_threads",
            {
                "updated_at": "x.updated_at - s.i * 1000",
                "bucket": f"(x.updated_at - s.i * 1000) >> {BUCKET_BITS}",
                "status": "CASE WHEN s.i %% 10 = 0 THEN 'interrupted' ELSE x.status END",
            },
        )
        for table in ("checkpoints", "checkpoint_blobs"):
            copy(theirs, table)
        admin.execute(f'ANALYZE "{mine}".tether_threads')
        admin.execute(f'ANALYZE "{theirs}".checkpoints')
        with PostgresSaver.from_conn_string(DSN, schema=mine) as saver:
            return _listing_rows("postgres", saver, official, n, repeats)
    finally:
        off_conn.close()
        for schema in (mine, theirs):
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


def run(quick: bool = False) -> list[dict[str, Any]]:
    n = 10_000 if quick else 100_000
    threads, rounds = (100, 3) if quick else (400, 7)
    pg = _pg_ok()
    sizes = {"w2": threads, "w1": 300, "invoke": 10 if quick else 20}
    rows: list[dict[str, Any]] = []
    for backend in ("sqlite", "postgres") if pg else ("sqlite",):
        for work, size in sizes.items():
            size = size // 2 if backend == "postgres" and work == "w2" else size
            rows.append(put_cost(backend, work, size, rounds))
    with tempfile.TemporaryDirectory() as tmp:
        rows += _sqlite_listing(tmp, n, 15)
    if pg:
        rows += _pg_listing(n, 15)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "threads.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

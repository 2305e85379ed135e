"""The thread index (#15): what it costs a put, and what it buys a listing.

    python -m bench threads           (or: python -m bench.bench_threads [--quick])

Two workloads, on SQLite and Postgres (``TETHER_BENCH_PG_DSN``, else
``TETHER_TEST_PG_DSN``, else the local test server; skipped when unreachable):

* **put cost before/after.** W2's puts (many threads of 5 small checkpoints,
  :func:`bench._workloads.w2_puts`) timed in a child process running this
  tree (with the index) and one running the commit before it
  (``TETHER_BENCH_BASELINE``, a ``src`` directory; by default the branch's
  merge base with ``main``, extracted with ``git archive``), alternated round by
  round so that neither meets a quieter machine. Median seconds per put of
  each round, then the median of the rounds.
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

# A child process: W2 puts on one backend; prints the median seconds per put.
_CHILD = r"""
import statistics, sys, tempfile, uuid
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
from bench._workloads import w2_puts
backend, threads = sys.argv[3], int(sys.argv[4])
if backend == "sqlite":
    from tether import SqliteSaver
    tmp = tempfile.mkdtemp()
    saver = SqliteSaver(tmp + "/w2.db")
else:
    import psycopg
    from tether import PostgresSaver
    schema = "bt_" + uuid.uuid4().hex[:12]
    saver = PostgresSaver.from_conn_string(sys.argv[5], schema=schema)
    saver.setup()
per = [s / 5 for s in w2_puts(saver, threads)]
print(statistics.median(per))
saver.close()
if backend != "sqlite":
    with psycopg.connect(sys.argv[5], autocommit=True) as c:
        c.execute(f'DROP SCHEMA "{schema}" CASCADE')
"""


def _before_index() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()

    index = "src/tether/backends/_threads.py"
    for commit in git("rev-list", "--first-parent", "HEAD").split():
        parent = git("rev-list", "--max-count=1", "--skip=1", "--first-parent", commit)
        if not parent:
            break
        has = subprocess.run(
            ["git", "cat-file", "-e", f"{parent}:{index}"], cwd=HERE, capture_output=True
        )
        if has.returncode != 0:  # the parent has no index: this commit brought it in
            return parent
    raise RuntimeError(f"no commit before {index} in this history; set TETHER_BENCH_BASELINE")


def _pg_ok() -> bool:
    try:
        import psycopg

        psycopg.connect(DSN, connect_timeout=3).close()
    except Exception:
        return False
    return True


def _baseline(tmp: str) -> str:
    """The tree to compare with: TETHER_BENCH_BASELINE (a ``src`` directory), else
    the newest commit of this history without the index: the first parent of
    the first-parent commit that added ``backends/_threads.py`` (on main, the
    merge that brought the index in)."""
    given = os.environ.get("TETHER_BENCH_BASELINE")
    if given:
        return given
    base = _before_index()
    archive = subprocess.run(
        ["git", "archive", base, "src"], cwd=HERE, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    return str(Path(tmp) / "src")


def put_cost(backend: str, threads: int, rounds: int, baseline: str) -> dict[str, Any]:
    """Median seconds per put with the index (this tree) and without (the baseline)."""
    sides = {"after": str(HERE / "src"), "before": baseline}
    got: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name in order:
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, sides[name], str(HERE), backend, str(threads), DSN],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": ""},
            )
            got[name].append(float(out.stdout.strip().splitlines()[-1]))
    before = statistics.median(got["before"]) * 1e6
    after = statistics.median(got["after"]) * 1e6
    return {
        "backend": backend,
        "workload": f"put (W2, {threads} threads x 5), {rounds} rounds",
        "metric": "us per put",
        "before": round(before, 1),
        "after": round(after, 1),
        "extra": f"{(after / before - 1) * 100:+.1f}%",
    }


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
    with tempfile.TemporaryDirectory() as tmp:
        baseline = _baseline(tmp)
        rows: list[dict[str, Any]] = [put_cost("sqlite", threads, rounds, baseline)]
        if pg:
            rows.append(put_cost("postgres", threads // 2, rounds, baseline))
        rows += _sqlite_listing(tmp, n, 15)
    if pg:
        rows += _pg_listing(n, 15)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "threads.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

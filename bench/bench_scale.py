"""Scale: how a saver's costs grow with one checkpoint, one thread, one store (issue #18.9b).

    python -m bench scale [--quick]     (or: python -m bench.bench_scale [--quick] [--only NAME])

Times are recorded here, in ``bench/results/scale.json``, never asserted by
tests: they say whether a cost grows linearly, which a single figure cannot.
Each figure is the median of a few runs (one for the fills). Rows:
``backend, workload, size, metric, seconds`` (and ``per_item_us`` where a size
is a count of items, so linear growth reads as a flat column).

Postgres (``TETHER_BENCH_PG_DSN``, else ``TETHER_TEST_PG_DSN``, else the local
test server; a fresh database per workload, dropped afterwards):

* *wide checkpoint*, 1k / 10k / 100k channels (quick: 1k / 4k / 16k): ``put``
  of every channel; ``put`` of a child naming one channel (the others carried
  over by version); ``get_tuple`` of the child. Half the channels hold a small
  int (kept inline in the checkpoint row), half a short list (a blob row each);
* *pending writes on one checkpoint*: 1M writes (quick: 100k), sent as
  ``put_writes`` batches of 10,000 from 100 tasks; then ``get_tuple``, which
  reads them all;
* *a 100k-checkpoint thread* (quick: 20k), rows made in bulk by SQL in the
  saver's own format: ``list(thread, limit=10)`` and ``get_tuple`` of the latest;
* *a large store* of 1M checkpoints over 10,000 threads (quick: 100k over
  1,000), made the same way: ``list(None, limit=10)`` and a filtered
  ``list(None, filter=..., limit=10)``.

SQLite and in-memory, through the saver API (every row a real put): the same
*wide checkpoint* and *pending writes* workloads; a store of 1,000 threads of
50 checkpoints plus one thread of 50,000 (quick: 100 threads, 5,000), listed
with ``limit=10`` by thread and across threads (with and without a filter);
and *one large value* of 200 MiB (quick: 20 MiB) put and read back.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _base_dsn() -> str:
    return os.environ.get("TETHER_BENCH_PG_DSN", os.environ.get("TETHER_TEST_PG_DSN", DEFAULT_DSN))


@contextmanager
def _fresh_database(tag: str) -> Iterator[str]:
    admin = make_conninfo(_base_dsn(), dbname="postgres")
    name = f"tether_scale_{tag}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(_base_dsn(), dbname=name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _median(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _row(
    workload: str,
    size: int,
    metric: str,
    seconds: float,
    items: int | None,
    backend: str = "postgres",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "backend": backend,
        "workload": workload,
        "size": size,
        "metric": metric,
        "seconds": round(seconds, 4),
    }
    if items:
        out["per_item_us"] = round(seconds / items * 1e6, 3)
    print(json.dumps(out), file=sys.stderr, flush=True)
    return out


def _checkpoint(cid: str, values: dict[str, Any], versions: dict[str, str]) -> dict[str, Any]:
    return {
        "v": 4,
        "id": cid,
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }


# --- Postgres -------------------------------------------------------------------------


def _pg_saver(dsn: str, **kwargs: Any) -> Any:
    from tether import PostgresSaver

    saver = PostgresSaver.from_conn_string(dsn, **kwargs)
    saver.setup()
    return saver


def pg_wide(n: int, runs: int) -> list[dict[str, Any]]:
    """put / carry-over put / get_tuple of one checkpoint of ``n`` channels."""
    from tether import make_config
    from tether.ids import uuid6

    rows = []
    with _fresh_database("wide") as dsn:
        saver = _pg_saver(dsn)
        try:
            names = [f"ch{i:06d}" for i in range(n)]
            values = {c: (i if i % 2 else [i, "x"]) for i, c in enumerate(names)}
            versions = dict.fromkeys(names, "1")
            put_times, child_times = [], []
            child: Any = None
            for r in range(runs):
                thread = f"wide-{r}"
                cp = _checkpoint(str(uuid6()), values, versions)
                start = time.perf_counter()
                cfg = saver.put(make_config(thread), cp, {"step": 0}, versions)
                put_times.append(time.perf_counter() - start)
                changed = {**versions, names[0]: "2"}
                cp2 = _checkpoint(str(uuid6()), {**values, names[0]: -1}, changed)
                start = time.perf_counter()
                child = saver.put(cfg, cp2, {"step": 1}, {names[0]: "2"})
                child_times.append(time.perf_counter() - start)
            got = saver.get_tuple(child)
            assert got is not None
            assert len(got.checkpoint["channel_values"]) == n
            get_s = _median(lambda: saver.get_tuple(child), runs)
        finally:
            saver.close()
    name = "wide checkpoint"
    rows.append(_row(name, n, "put", statistics.median(put_times), n))
    rows.append(_row(name, n, "put child (carry-over)", statistics.median(child_times), n))
    rows.append(_row(name, n, "get_tuple", get_s, n))
    return rows


def pg_writes(n: int, runs: int) -> list[dict[str, Any]]:
    """``n`` pending writes on one checkpoint: put_writes in batches, then get_tuple."""
    from tether import make_config
    from tether.ids import uuid6

    batch = 10_000
    with _fresh_database("writes") as dsn:
        saver = _pg_saver(dsn)
        try:
            cp = _checkpoint(str(uuid6()), {"x": 1}, {"x": "1"})
            cfg = saver.put(make_config("w"), cp, {"step": 0}, {"x": "1"})
            start = time.perf_counter()
            for b in range(n // batch):
                writes = [(f"c{j % 7}", j) for j in range(batch)]
                saver.put_writes(cfg, writes, f"task-{b:05d}", f"~{b % 3}")
            put_s = time.perf_counter() - start
            got = saver.get_tuple(cfg)
            assert got is not None
            assert len(got.pending_writes) == n
            get_s = _median(lambda: saver.get_tuple(cfg), runs)
        finally:
            saver.close()
    return [
        _row("pending writes, one checkpoint", n, f"put_writes ({batch:,} a call)", put_s, n),
        _row("pending writes, one checkpoint", n, "get_tuple", get_s, n),
    ]


def _bulk_fill(dsn: str, schema: str, threads: int, per_thread: int) -> None:
    """Checkpoint rows in the saver's own format, made by SQL (a put each would take hours)."""
    q = f'"{schema}"'
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"""
INSERT INTO {q}.tether_checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT 't' || lpad(t::text, 6, '0'), '', 'c' || lpad(n::text, 8, '0') || lpad(t::text, 6, '0'),
       CASE WHEN n > 0 THEN 'c' || lpad((n - 1)::text, 8, '0') || lpad(t::text, 6, '0') END,
       jsonb_build_object('v', 4, 'id', 'c' || lpad(n::text, 8, '0') || lpad(t::text, 6, '0'),
           'ts', '2026-01-01', 'channel_values', jsonb_build_object('step', n),
           'channel_versions', jsonb_build_object('step', n::text),
           'versions_seen', '{{}}'::jsonb, 'updated_channels', null),
       jsonb_build_object('step', n, 'source', 'loop', 'run_id', 'r' || t || '-' || n / 100)
FROM generate_series(0, {threads - 1}) t, generate_series(0, {per_thread - 1}) n
"""
        )
        conn.execute(f"VACUUM ANALYZE {q}.tether_checkpoints")


def pg_long_thread(n: int, runs: int) -> list[dict[str, Any]]:
    from tether import make_config

    schema = "scale"
    with _fresh_database("thread") as dsn:
        saver = _pg_saver(dsn, schema=schema)
        try:
            _bulk_fill(dsn, schema, 1, n)
            cfg = make_config("t000000")
            assert len(list(saver.list(cfg, limit=10))) == 10
            list_s = _median(lambda: list(saver.list(cfg, limit=10)), runs)
            get_s = _median(lambda: saver.get_tuple(cfg), runs)
        finally:
            saver.close()
    return [
        _row("one thread", n, "list(thread, limit=10)", list_s, None),
        _row("one thread", n, "get_tuple latest", get_s, None),
    ]


def pg_large_store(threads: int, per_thread: int, runs: int) -> list[dict[str, Any]]:
    schema = "scale"
    total = threads * per_thread
    with _fresh_database("store") as dsn:
        saver = _pg_saver(dsn, schema=schema)
        try:
            _bulk_fill(dsn, schema, threads, per_thread)
            assert len(list(saver.list(None, limit=10))) == 10
            list_s = _median(lambda: list(saver.list(None, limit=10)), runs)
            want = {"run_id": f"r{threads // 2}-0"}
            assert len(list(saver.list(None, filter=want, limit=10))) == 10
            filtered_s = _median(lambda: list(saver.list(None, filter=want, limit=10)), runs)
        finally:
            saver.close()
    name = f"store of {threads:,} threads"
    return [
        _row(name, total, "list(None, limit=10)", list_s, None),
        _row(name, total, "list(None, filter, limit=10)", filtered_s, None),
    ]


def run_postgres(quick: bool, only: str | None = None) -> list[dict[str, Any]]:
    runs = 3
    rows: list[dict[str, Any]] = []
    parts: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "wide": lambda: [
            r
            for n in ([1000, 4000, 16000] if quick else [1000, 10_000, 100_000])
            for r in pg_wide(n, runs)
        ],
        "writes": lambda: pg_writes(100_000 if quick else 1_000_000, runs),
        "thread": lambda: pg_long_thread(20_000 if quick else 100_000, runs),
        "store": lambda: pg_large_store(*((1000, 100) if quick else (10_000, 100)), runs),
    }
    for name, part in parts.items():
        if only is None or only == name:
            rows.extend(part())
    return rows


# --- SQLite and in-memory (the same workloads, through the saver API) --------------------


@contextmanager
def _local_saver(backend: str) -> Iterator[Any]:
    import tempfile

    from tether import InMemorySaver, SqliteSaver

    if backend == "memory":
        yield InMemorySaver()
        return
    with tempfile.TemporaryDirectory() as tmp, SqliteSaver(Path(tmp) / "scale.db") as saver:
        yield saver


def local_wide(backend: str, n: int, runs: int) -> list[dict[str, Any]]:
    """put / carry-over put / get_tuple of one checkpoint of ``n`` channels."""
    from tether import make_config
    from tether.ids import uuid6

    names = [f"ch{i:06d}" for i in range(n)]
    values = {c: (i if i % 2 else [i, "x"]) for i, c in enumerate(names)}
    versions = dict.fromkeys(names, "1")
    put_times, child_times = [], []
    with _local_saver(backend) as saver:
        child: Any = None
        for r in range(runs):
            cp = _checkpoint(str(uuid6()), values, versions)
            start = time.perf_counter()
            cfg = saver.put(make_config(f"wide-{r}"), cp, {"step": 0}, versions)
            put_times.append(time.perf_counter() - start)
            changed = {**versions, names[0]: "2"}
            cp2 = _checkpoint(str(uuid6()), {**values, names[0]: -1}, changed)
            start = time.perf_counter()
            child = saver.put(cfg, cp2, {"step": 1}, {names[0]: "2"})
            child_times.append(time.perf_counter() - start)
        got = saver.get_tuple(child)
        assert got is not None
        assert len(got.checkpoint["channel_values"]) == n
        get_s = _median(lambda: saver.get_tuple(child), runs)
    name = "wide checkpoint"
    return [
        _row(name, n, "put", statistics.median(put_times), n, backend),
        _row(name, n, "put child (carry-over)", statistics.median(child_times), n, backend),
        _row(name, n, "get_tuple", get_s, n, backend),
    ]


def local_writes(backend: str, n: int, runs: int) -> list[dict[str, Any]]:
    """``n`` pending writes on one checkpoint: put_writes in batches, then get_tuple."""
    from tether import make_config
    from tether.ids import uuid6

    batch = 10_000
    with _local_saver(backend) as saver:
        cp = _checkpoint(str(uuid6()), {"x": 1}, {"x": "1"})
        cfg = saver.put(make_config("w"), cp, {"step": 0}, {"x": "1"})
        start = time.perf_counter()
        for b in range(n // batch):
            writes = [(f"c{j % 7}", j) for j in range(batch)]
            saver.put_writes(cfg, writes, f"task-{b:05d}", f"~{b % 3}")
        put_s = time.perf_counter() - start
        got = saver.get_tuple(cfg)
        assert got is not None
        assert len(got.pending_writes) == n
        get_s = _median(lambda: saver.get_tuple(cfg), runs)
    name = "pending writes, one checkpoint"
    return [
        _row(name, n, f"put_writes ({batch:,} a call)", put_s, n, backend),
        _row(name, n, "get_tuple", get_s, n, backend),
    ]


def local_store(backend: str, threads: int, per_thread: int, runs: int) -> list[dict[str, Any]]:
    """``threads`` threads of ``per_thread`` checkpoints, one of them long: listing bounded."""
    from tether import make_config

    with _local_saver(backend) as saver:
        for t in range(threads):
            cfg: Any = make_config(f"t{t:06d}")
            version = None
            for n in range(per_thread if t else per_thread * threads):  # thread 0 is long
                version = saver.get_next_version(version)
                cp = _checkpoint(str(uuid.uuid4()), {"step": n}, {"step": version})
                cp["id"] = f"c{n:08d}{t:06d}"  # time order: ids sort as they were put
                cfg = saver.put(
                    cfg, cp, {"step": n, "source": "loop", "run_id": f"r{t}"}, {"step": version}
                )
        long = make_config("t000000")
        thread_s = _median(lambda: list(saver.list(long, limit=10)), runs)
        get_s = _median(lambda: saver.get_tuple(long), runs)
        all_s = _median(lambda: list(saver.list(None, limit=10)), runs)
        want = {"run_id": f"r{threads // 2}"}
        filtered_s = _median(lambda: list(saver.list(None, filter=want, limit=10)), runs)
    total = per_thread * threads * 2 - per_thread
    return [
        _row("one thread", per_thread * threads, "list(thread, limit=10)", thread_s, None, backend),
        _row("one thread", per_thread * threads, "get_tuple latest", get_s, None, backend),
        _row(f"store of {threads:,} threads", total, "list(None, limit=10)", all_s, None, backend),
        _row(
            f"store of {threads:,} threads",
            total,
            "list(None, filter, limit=10)",
            filtered_s,
            None,
            backend,
        ),
    ]


def local_large_value(backend: str, mib: int, runs: int) -> list[dict[str, Any]]:
    """put / get_tuple of one value of ``mib`` MiB (half random bytes, half a repeated text)."""
    from tether import make_config
    from tether.ids import uuid6

    half = mib * 1024 * 1024 // 2
    value = os.urandom(half) + b"tether " * (half // 7)
    with _local_saver(backend) as saver:
        cp = _checkpoint(str(uuid6()), {"blob": value}, {"blob": "1"})
        put_s = _median(lambda: saver.put(make_config("big"), cp, {}, {"blob": "1"}), 1)
        got = saver.get_tuple(make_config("big"))
        assert got is not None
        assert got.checkpoint["channel_values"]["blob"] == value
        get_s = _median(lambda: saver.get_tuple(make_config("big")), runs)
    return [
        _row("one large value", mib, "put (MiB)", put_s, None, backend),
        _row("one large value", mib, "get_tuple (MiB)", get_s, None, backend),
    ]


def run_local(quick: bool, only: str | None = None) -> list[dict[str, Any]]:
    runs = 3
    rows: list[dict[str, Any]] = []
    for backend in ("sqlite", "memory"):
        parts: dict[str, Callable[[], list[dict[str, Any]]]] = {
            "wide": lambda backend=backend: [
                r
                for n in ([1000, 4000, 16000] if quick else [1000, 10_000, 100_000])
                for r in local_wide(backend, n, runs)
            ],
            "writes": lambda backend=backend: local_writes(
                backend, 100_000 if quick else 1_000_000, runs
            ),
            "store": lambda backend=backend: local_store(
                backend, *((100, 50) if quick else (1000, 50)), runs
            ),
            "value": lambda backend=backend: local_large_value(backend, 20 if quick else 200, runs),
        }
        for name, part in parts.items():
            if only is None or only == name:
                rows.extend(part())
    return rows


def run(quick: bool = False, only: str | None = None) -> list[dict[str, Any]]:
    rows = run_postgres(quick, only) + run_local(quick, only)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    print(table(run(quick="--quick" in sys.argv, only=only)))

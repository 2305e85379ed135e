"""Postgres space around a sweep of 1M checkpoints (#15): is it reused, does autovacuum keep up?

    TETHER_BENCH_PG_DSN=postgresql://... python -m bench.bench_lifecycle --bloat [--vacuum=MODE]

A fresh schema first gets 1,000 live threads (100,000 checkpoints, written
now), then goes through ``cycles`` rounds of: fill (10,000 threads x 100
checkpoints, :func:`bench.bench_lifecycle.big_store`'s way: one chat written
by the saver a month back, copied by set-based SQL), a TTL sweep (7 days: the
month-old threads go, the live ones stay), then what gives the space back,
per ``MODE``:

* ``vacuum``: a plain ``VACUUM`` of each tether table (what autovacuum does,
  without its pauses), timed; ``vacuum2``: two in a row (a B-tree page a
  VACUUM empties and deletes is reused only once a later VACUUM has seen
  that no snapshot can still reach it);
* ``autovacuum``: nothing; wait until the server's autovacuum has caught up
  (no table has more dead tuples than its trigger, 50 + 20% of its rows);
  the server must run it (the CI server here does not, so this mode ran
  on a private server with the defaults);
* ``none``: nothing at all, to see what a refill costs when nobody vacuums.

The live threads matter: their rows come after the old ones in every table,
as newer rows do, so ``VACUUM`` cannot just cut the files' empty tails off (a
sweep of everything would let it, and show an unrealistically small store).
After every step: per tether table ``pg_total_relation_size`` (heap, TOAST
and indexes), ``pg_indexes_size``, and ``n_live_tup`` / ``n_dead_tup`` of
``pg_stat_user_tables``. The next round's fill shows whether new rows reuse
the space the sweep freed (the size stays) or extend the files (it grows).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench import _bulk

__all__ = ["run_bloat"]

MB = 1_000_000

_SIZES = """
SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid),
       pg_indexes_size(c.oid), coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0),
       coalesce(s.autovacuum_count, 0) + coalesce(s.vacuum_count, 0),
       greatest(c.reltuples, 0)::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname LIKE 'tether\\_%%'
  AND c.relname NOT IN ('tether_migrations', 'tether_leases')
ORDER BY c.relname
"""


def _sizes(admin: Any, schema: str) -> dict[str, tuple[int, ...]]:
    # An idle backend flushes its table counters within 10 s (PGSTAT_IDLE_INTERVAL).
    time.sleep(11)
    admin.execute("SELECT pg_stat_clear_snapshot()")
    return {r[0]: tuple(int(x) for x in r[1:]) for r in admin.execute(_SIZES, (schema,))}


def _row(step: str, found: dict[str, tuple[int, ...]], **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"step": step}
    for table, (total, *_rest) in found.items():
        row[f"{table.removeprefix('tether_')} MB"] = round(total / MB, 1)
    row["total MB"] = round(sum(v[0] for v in found.values()) / MB, 1)
    row["heap MB"] = round(sum(v[1] for v in found.values()) / MB, 1)
    row["indexes MB"] = round(sum(v[2] for v in found.values()) / MB, 1)
    row["live tuples"] = sum(v[3] for v in found.values())
    row["dead tuples"] = sum(v[4] for v in found.values())
    row.update(extra)
    return row


def _fill(saver: Any, dsn: str, schema: str, threads: int, steps: int, days_ago: int) -> float:
    import datetime

    from bench.bench_lifecycle import DAY, _clock_at, chat_thread, short_message

    at = datetime.datetime.now(datetime.UTC) - days_ago * DAY
    ago = int(at.timestamp() * 1_000_000)
    ids = _bulk.new_ids(threads)
    t0 = time.perf_counter()
    with _clock_at(saver, ago):
        chat_thread(saver, ids[0], steps, short_message)
    _bulk.pg_copy(dsn, schema, ids[0], ids[1:])
    return time.perf_counter() - t0


def _wait_for_autovacuum(admin: Any, schema: str) -> float:
    """Seconds until autovacuum has caught up: no table has more dead tuples than its
    trigger (``autovacuum_vacuum_threshold`` 50 + ``scale_factor`` 0.2 x ``reltuples``),
    so it would not vacuum again."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1800:
        now = _sizes(admin, schema)
        waiting = [t for t, v in now.items() if v[4] > 50 + 0.2 * v[6]]
        if not waiting:
            return time.monotonic() - t0
        time.sleep(5)
    raise TimeoutError(f"autovacuum left dead tuples in {waiting} for 30 minutes")


def run_bloat(
    dsn: str, mode: str = "vacuum", threads: int = 10_000, steps: int = 100, cycles: int = 2
) -> list[dict[str, Any]]:
    """The rounds above on a fresh schema of ``dsn`` (dropped afterwards); one row a step."""
    import psycopg

    from tether import PostgresSaver
    from tether.lifecycle import Retention

    if mode not in ("vacuum", "vacuum2", "autovacuum", "none"):
        raise ValueError(f"mode must be vacuum, vacuum2, autovacuum or none, got {mode!r}")
    schema = "bloat_" + uuid.uuid4().hex[:8]
    rows: list[dict[str, Any]] = []
    with psycopg.connect(dsn, autocommit=True) as admin:
        on = admin.execute("SHOW autovacuum").fetchone()[0] == "on"
        if mode == "autovacuum" and not on:
            raise RuntimeError("this server runs no autovacuum: use --vacuum=vacuum or none")
        try:
            with PostgresSaver.from_conn_string(
                dsn, schema=schema, retention=Retention(ttl=7 * 86400)
            ) as saver:
                saver.setup()
                rows.append(_row("empty", _sizes(admin, schema), autovacuum=on))
                for cycle in range(1, cycles + 1):
                    seconds = _fill(saver, dsn, schema, threads, steps, 30)
                    if cycle == 1:  # live threads, after the old ones in every table
                        seconds += _fill(saver, dsn, schema, threads // 10, steps, 0)
                    rows.append(_row(f"{cycle}: filled", _sizes(admin, schema), s=round(seconds)))
                    t0 = time.perf_counter()
                    report = saver.sweep(batch=100)
                    seconds = time.perf_counter() - t0
                    swept = _sizes(admin, schema)
                    rows.append(
                        _row(
                            f"{cycle}: swept",
                            swept,
                            s=round(seconds),
                            checkpoints=report.checkpoints,
                            transactions=report.batches,
                        )
                    )
                    if mode.startswith("vacuum"):
                        t0 = time.perf_counter()
                        for _ in range(2 if mode == "vacuum2" else 1):
                            for table in swept:
                                admin.execute(f'VACUUM "{schema}".{table}')
                        seconds = time.perf_counter() - t0
                        rows.append(
                            _row(f"{cycle}: VACUUM", _sizes(admin, schema), s=round(seconds))
                        )
                    elif mode == "autovacuum":
                        seconds = _wait_for_autovacuum(admin, schema)
                        rows.append(
                            _row(f"{cycle}: autovacuumed", _sizes(admin, schema), s=round(seconds))
                        )
                seconds = _fill(saver, dsn, schema, threads, steps, 30)
                rows.append(_row(f"{cycles + 1}: filled", _sizes(admin, schema), s=round(seconds)))
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return rows

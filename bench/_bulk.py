"""Large tether stores made fast: one thread written through the saver, its rows copied.

``copy_thread`` copies a thread under a new id with a few set-based statements
(rows keep their checksums, which do not cover ``thread_id``). The functions
here do the same for thousands of ids at once: every tether table with a
``thread_id`` column (leases aside) gets the seed thread's rows again under
each new id, in one ``INSERT ... SELECT`` per table, and the thread index
row is copied as it is (the copy's counts, status and times are the seed's,
as a recount would find them). :func:`check_copies` proves it on the store:
a thread copied by ``copy_thread`` and one copied here hold the same rows.

Rows go in step by step across all the threads (``ORDER BY`` the primary key
without ``thread_id``, then the thread), so a table page holds rows of many
threads, as concurrent conversations leave them, rather than one thread's
rows side by side, which would make deleting a whole thread unrealistically
cheap. Thread ids are random UUIDs, as applications name threads.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["check_copies", "new_ids", "pg_copy", "pg_rows", "sqlite_copy", "sqlite_rows"]

#: Tables with a thread_id that are not a thread's data.
_SKIP = {"tether_leases"}
#: Index columns a copy sets its own way: ``copy_thread`` stamps now and recounts
#: ``bytes`` from the rows; here the seed's row is copied as its puts left it (on
#: Postgres the puts' running count of bytes is not quite the recount's).
_TIMES = {"thread_id", "created_at", "updated_at", "bucket", "bytes"}

Rows = list[tuple[str, list[str]]]


def new_ids(n: int) -> list[str]:
    """``n`` random thread ids."""
    return [str(uuid.uuid4()) for _ in range(n)]


def _sqlite_tables(conn: sqlite3.Connection) -> list[tuple[str, list[str], list[str]]]:
    """``(table, columns, primary key columns but thread_id)`` of each thread table."""
    out = []
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in names:
        info = conn.execute(f"PRAGMA table_info({table})").fetchall()
        cols = [r[1] for r in info]
        if "thread_id" not in cols or table in _SKIP or not table.startswith("tether_"):
            continue
        key = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] and r[1] != "thread_id"]
        out.append((table, cols, key))
    return out


def sqlite_copy(path: Path | str, seed: str, thread_ids: Sequence[str]) -> int:
    """Copy thread ``seed`` of the SQLite store at ``path`` under ``thread_ids``; rows added."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 60000")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("CREATE TEMP TABLE bulk_ids (n INTEGER PRIMARY KEY, tid TEXT NOT NULL)")
        conn.executemany("INSERT INTO bulk_ids VALUES (?, ?)", enumerate(thread_ids))
        added = 0
        for table, cols, key in _sqlite_tables(conn):
            picked = ", ".join("i.tid" if c == "thread_id" else f"x.{c}" for c in cols)
            order = ", ".join([*(f"x.{k}" for k in key), "i.n"])
            cur = conn.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) SELECT {picked} "
                f"FROM {table} x CROSS JOIN bulk_ids i WHERE x.thread_id = ? ORDER BY {order}",
                (seed,),
            )
            added += cur.rowcount
        conn.execute("DROP TABLE bulk_ids")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return added
    finally:
        conn.close()


def _pg_tables(admin: Any, schema: str) -> list[tuple[str, list[str], list[str]]]:
    rows = admin.execute(
        "SELECT table_name, array_agg(column_name::text ORDER BY ordinal_position) "
        "FROM information_schema.columns WHERE table_schema = %s GROUP BY table_name",
        (schema,),
    ).fetchall()
    out = []
    for table, cols in rows:
        if "thread_id" not in cols or table in _SKIP or not table.startswith("tether_"):
            continue
        key = admin.execute(
            "SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey, a.attnum)) "
            "FROM pg_index i JOIN pg_attribute a "
            "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = format('%%I.%%I', %s::text, %s::text)::regclass "
            "AND i.indisprimary",
            (schema, table),
        ).fetchone()[0]
        out.append((table, list(cols), [k for k in key or [] if k != "thread_id"]))
    return out


def pg_copy(dsn: str, schema: str, seed: str, thread_ids: Sequence[str]) -> int:
    """Copy thread ``seed`` of the Postgres schema under ``thread_ids``; rows added."""
    import psycopg

    added = 0
    with psycopg.connect(dsn) as admin:
        tables = _pg_tables(admin, schema)
        for table, cols, key in tables:
            picked = ", ".join("i.tid" if c == "thread_id" else f"x.{c}" for c in cols)
            order = ", ".join([*(f"x.{k}" for k in key), "i.n"])
            cur = admin.execute(
                f'INSERT INTO "{schema}".{table} ({", ".join(cols)}) SELECT {picked} '
                f'FROM "{schema}".{table} x '
                "CROSS JOIN unnest(%s::text[]) WITH ORDINALITY AS i(tid, n) "
                f"WHERE x.thread_id = %s ORDER BY {order}",
                (list(thread_ids), seed),
            )
            added += cur.rowcount
        admin.commit()
        for table, _, _ in tables:
            admin.execute(f'ANALYZE "{schema}".{table}')
        admin.commit()
    return added


def sqlite_rows(path: Path | str) -> Any:
    """``rows(thread_id)`` for :func:`check_copies` over the SQLite store at ``path``."""

    def rows(tid: str) -> Rows:
        with sqlite3.connect(path) as conn:
            out = []
            for table, cols, _ in _sqlite_tables(conn):
                kept = [c for c in cols if c not in _TIMES]
                found = conn.execute(
                    f"SELECT {', '.join(kept)} FROM {table} WHERE thread_id = ?",
                    (tid,),
                ).fetchall()
                out.append((table, sorted(repr(r) for r in found)))
            return out

    return rows


def pg_rows(dsn: str, schema: str) -> Any:
    """``rows(thread_id)`` for :func:`check_copies` over a Postgres schema."""
    import psycopg

    def rows(tid: str) -> Rows:
        with psycopg.connect(dsn) as admin:
            out = []
            for table, cols, _ in _pg_tables(admin, schema):
                kept = [c for c in cols if c not in _TIMES]
                found = admin.execute(
                    f'SELECT {", ".join(kept)} FROM "{schema}".{table} WHERE thread_id = %s',
                    (tid,),
                ).fetchall()
                out.append((table, sorted(repr(r) for r in found)))
            return out

    return rows


def check_copies(saver: Any, seed: str, copied: str, rows: Any) -> None:
    """A thread copied here (``copied``) holds what ``copy_thread`` would have made.

    ``rows(thread_id)``: every row of the thread in every table, thread id and
    index times left out (:func:`sqlite_rows`, :func:`pg_rows`). The copy by
    ``copy_thread`` is deleted again.
    """
    probe = "bulk-check-" + uuid.uuid4().hex
    saver.copy_thread(seed, probe)
    try:
        mine, theirs = rows(copied), rows(probe)
        for (table, a), (_, b) in zip(mine, theirs, strict=True):
            if a != b:
                odd = sorted(set(a) ^ set(b))[:2]
                raise AssertionError(f"a bulk copy differs from copy_thread's in {table}: {odd}")
        got = saver.get_tuple({"configurable": {"thread_id": copied}})
        want = saver.get_tuple({"configurable": {"thread_id": seed}})
        if got is None or want is None or got.checkpoint != want.checkpoint:
            raise AssertionError("a bulk copy does not read back as its seed")
    finally:
        saver.delete_thread(probe)

"""Standing damage test (#18): random damage to real stores, read in a child process.

A store is built from real puts (namespaces, pending writes, append-delta
snapshots and tails), then copied many times, each copy damaged at random:

SQLite (a real file, damaged as a disk, a copy tool or a person would):
    ``flip``      1-3 random bits flipped anywhere past the header page
    ``truncate``  the file cut at a random length
    ``delete``    one random row of one table deleted (by SQL)
    ``column``    one byte of one column of one random row changed (by SQL,
                  keeping its SQL type)
Postgres (a real schema; the server keeps its own pages whole, so damage
comes through SQL: a restore of part of a table, a script, a person):
    ``flip``      one bit of one stored payload (blob or pending write)
    ``truncate``  one stored payload cut short
    ``delete``    one random row deleted: a value, a checkpoint, a pending
                  write or a write count

A child process (``damage_worker.py``) reads every checkpoint of every
damaged copy by id (``get_tuple``, ``get_writes``) and by thread (``list``).
Every read must return exactly what was stored or raise a tether error: a
different value, or an exception from outside tether's hierarchy, fails the
test, and so does a crash of the child. A checkpoint may be *absent* only
where a whole checkpoint row was lost (deleted, its key changed, its page
damaged): the store then reads as if that checkpoint had been pruned. tether
verifies that each checkpoint it returns is whole, not that a thread still
has every checkpoint it ever had.

What Postgres does not verify (documented in docs/architecture.md): its
text and JSONB columns carry no checksum, so a changed key or metadata
column is not detected by tether on Postgres; that kind is not drawn for it.
Pending writes are counted there (``tether_write_counts``, schema 14), so a
deleted write row, or a deleted count row, is refused like on SQLite.

``TETHER_DAMAGE_TRIALS`` (default 40) sets the trials per kind: CI runs the
default; run ``TETHER_DAMAGE_TRIALS=2000 pytest tests/test_random_damage.py``
for a long local run. The seed of each trial is in its store's name.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

WORKER = Path(__file__).with_name("damage_worker.py")
TRIALS = int(os.environ.get("TETHER_DAMAGE_TRIALS", "40"))
DSN = os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")

pytestmark = pytest.mark.slow


def _run(*args: str, timeout: float = 600) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(WORKER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        last = json.loads(lines[-1])["store"] if lines else "(none)"
        pytest.fail(
            f"the reader process exited with {proc.returncode} after the store {last}; "
            f"stderr:\n{proc.stderr[-3000:]}"
        )
    return lines


def _judge(lines: list[str], absent_allowed: dict[str, bool]) -> dict[str, int]:
    totals = {"same": 0, "error": 0, "absent": 0, "stores": 0}
    bad = []
    for line in lines:
        r = json.loads(line)
        totals["stores"] += 1
        for k in ("same", "error", "absent"):
            totals[k] += r[k]
        name = r["store"]
        if r["different"] or r["foreign"]:
            bad.append(f"{name}: different={r['different'][:5]} foreign={r['foreign'][:5]}")
        elif r["absent"] and not absent_allowed[name]:
            bad.append(f"{name}: {r['absent']} checkpoints absent, no checkpoint row was lost")
    assert not bad, "\n".join(bad[:20])
    return totals


# --- SQLite -------------------------------------------------------------------------------

_SQLITE_TABLES = ("tether_checkpoints", "tether_blobs", "tether_writes")
_KEY_COLUMNS = {"thread_id", "checkpoint_ns", "checkpoint_id"}


def _flip_value(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bytes) and value:
        at = rng.randrange(len(value))
        return value[:at] + bytes([value[at] ^ (1 << rng.randrange(8))]) + value[at + 1 :]
    if isinstance(value, int):
        return value ^ (1 << rng.randrange(8))
    if isinstance(value, str) and value:
        at = rng.randrange(len(value))
        return value[:at] + chr(ord(value[at]) ^ (1 << rng.randrange(5))) + value[at + 1 :]
    return "x" if value is None else value


def _damage_sqlite(path: Path, kind: str, rng: random.Random) -> bool:
    """Damage the file; whether a whole checkpoint row may be lost by it."""
    if kind in ("flip", "truncate"):
        data = bytearray(path.read_bytes())
        page = int.from_bytes(data[16:18], "big") or 65536
        if kind == "flip":
            for _ in range(rng.randint(1, 3)):
                at = rng.randrange(page, len(data))
                data[at] ^= 1 << rng.randrange(8)
        else:
            del data[rng.randrange(page, len(data)) :]
        path.write_bytes(bytes(data))
        return True
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        table = rng.choice(_SQLITE_TABLES)
        rowids = [r[0] for r in conn.execute(f"SELECT rowid FROM {table}")]
        rowid = rng.choice(rowids)
        if kind == "delete":
            conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
            return table == "tether_checkpoints"
        columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        column = rng.choice(columns)
        (value,) = conn.execute(
            f"SELECT {column} FROM {table} WHERE rowid = ?",
            (rowid,),
        ).fetchone()
        try:
            conn.execute(
                f"UPDATE {table} SET {column} = ? WHERE rowid = ?",
                (_flip_value(value, rng), rowid),
            )
        except sqlite3.IntegrityError:
            return False  # the change collided with another row's key: nothing changed
        return table == "tether_checkpoints" and column in _KEY_COLUMNS
    finally:
        conn.close()


def test_random_damage_to_a_sqlite_file_is_refused_never_read_differently(
    tmp_path: Path,
) -> None:
    pristine, expected = tmp_path / "pristine.db", tmp_path / "expected.pkl"
    assert int(_run("populate", "sqlite", str(pristine), str(expected))[0]) > 50
    with sqlite3.connect(pristine) as conn:  # one file: the WAL folded in, WAL mode kept
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rng = random.Random(int(os.environ.get("TETHER_DAMAGE_SEED", "18")))
    stores, allowed = [], {}
    for kind in ("flip", "truncate", "delete", "column"):
        for i in range(TRIALS):
            seed = rng.randrange(1 << 30)
            path = tmp_path / f"{kind}-{i}-seed{seed}.db"
            shutil.copyfile(pristine, path)
            allowed[str(path)] = _damage_sqlite(path, kind, random.Random(seed))
            stores.append(str(path))
    totals = _judge(_run("check", "sqlite", str(expected), *stores), allowed)
    print(f"sqlite damage: {totals}")
    # the damage was real: many reads refused, many whole
    assert totals["stores"] == len(stores)
    assert totals["error"] > TRIALS
    assert totals["same"] > TRIALS


# --- Postgres -----------------------------------------------------------------------------


@pytest.fixture
def pg_schemas() -> Any:
    made: list[str] = []
    yield made
    with psycopg.connect(DSN, autocommit=True) as conn:
        for schema in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _clone_schema(conn: psycopg.Connection[Any], src: str, dst: str) -> None:
    conn.execute(f'CREATE SCHEMA "{dst}"')
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (src,)
        )
    ]
    for table in tables:
        conn.execute(f'CREATE TABLE "{dst}"."{table}" (LIKE "{src}"."{table}" INCLUDING ALL)')
        conn.execute(f'INSERT INTO "{dst}"."{table}" SELECT * FROM "{src}"."{table}"')


def _damage_pg(conn: psycopg.Connection[Any], schema: str, kind: str, rng: random.Random) -> bool:
    if kind == "delete":
        table = rng.choice(
            ["tether_blobs", "tether_checkpoints", "tether_writes", "tether_write_counts"]
        )
        rows = conn.execute(f'SELECT ctid::text FROM "{schema}"."{table}"').fetchall()
        conn.execute(
            f'DELETE FROM "{schema}"."{table}" WHERE ctid = %s::tid', (rng.choice(rows)[0],)
        )
        return table == "tether_checkpoints"
    table = rng.choice(["tether_blobs", "tether_writes"])
    rows = conn.execute(
        f'SELECT ctid::text, length(blob) FROM "{schema}"."{table}" WHERE length(blob) > 0'
    ).fetchall()
    ctid, size = rng.choice(rows)
    if kind == "flip":
        at = rng.randrange(size)
        conn.execute(
            f'UPDATE "{schema}"."{table}" SET blob = set_byte(blob, %s, get_byte(blob, %s) # %s) '
            "WHERE ctid = %s::tid",
            (at, at, 1 << rng.randrange(8), ctid),
        )
    else:
        conn.execute(
            f'UPDATE "{schema}"."{table}" SET blob = substring(blob from 1 for %s) '
            "WHERE ctid = %s::tid",
            (rng.randrange(size), ctid),
        )
    return False


@pytest.mark.postgres
def test_random_damage_to_a_postgres_store_is_refused_never_read_differently(
    tmp_path: Path, pg_schemas: list[str]
) -> None:
    base = f"dmg_{os.getpid()}_{random.randrange(1 << 30)}"
    pg_schemas.append(base)
    expected = tmp_path / "expected.pkl"
    assert int(_run("populate", "postgres", DSN, base, str(expected))[0]) > 50
    rng = random.Random(int(os.environ.get("TETHER_DAMAGE_SEED", "18")))
    trials = max(1, TRIALS // 2)
    allowed = {}
    with psycopg.connect(DSN, autocommit=True) as conn:
        for kind in ("flip", "truncate", "delete"):
            for i in range(trials):
                seed = rng.randrange(1 << 30)
                schema = f"{base}_{kind[0]}{i}"
                pg_schemas.append(schema)
                _clone_schema(conn, base, schema)
                allowed[schema] = _damage_pg(conn, schema, kind, random.Random(seed))
    totals = _judge(_run("check", "postgres", str(expected), DSN, *allowed), allowed)
    print(f"postgres damage: {totals}")
    assert totals["stores"] == len(allowed)
    assert totals["error"] > trials
    assert totals["same"] > trials

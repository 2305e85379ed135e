"""Order by code point on a database whose default collation is not C (issue #18.6).

The database is created here with an ICU en-US default collation, in which
``"a" < "B" < "c"`` and ``"-"`` sorts after letters' punctuation rules; the
contract's order (and SQLite's and the in-memory saver's) is code-point
order, ``"B" < "a" < "c"``. Pending writes are read in (task_path, task_id,
idx) order and ``list`` in (checkpoint_id, thread_id, checkpoint_ns) order,
so both must come back as the in-memory saver returns them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tether import InMemorySaver, PostgresSaver, make_config
from tether.backends.postgres import _schema
from tether.base import BaseCheckpointSaver

from .conftest import PlainSerializer, _base_dsn, fresh_schema
from .helpers import build_old_store, checkpoint, copy_rows

pytestmark = pytest.mark.postgres

# Names whose ICU en-US order differs from their code-point order.
THREADS = ["thread-b", "Thread-C", "thread_a", "THREAD-D"]
NAMESPACES = ["", "Sub:2", "sub:1", "sub-3"]
TASKS = [("~path", "b-task"), ("A", "B-task"), ("b", "a_task"), ("a", "C-task"), ("", "z")]


def _icu_database_options(admin: psycopg.Connection[Any]) -> str | None:
    """CREATE DATABASE options for a non-C default collation this server offers, if any."""
    icu = admin.execute(
        "SELECT 1 FROM pg_collation WHERE collprovider = 'i' AND collname = 'en-US-x-icu'"
    ).fetchone()
    if icu:
        return "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"
    glibc = admin.execute(
        "SELECT collcollate FROM pg_collation WHERE collprovider = 'c' "
        "AND collcollate IN ('en_US.UTF-8', 'en_US.utf8') LIMIT 1"
    ).fetchone()
    if glibc:
        return f"LC_COLLATE '{glibc[0]}' LC_CTYPE '{glibc[0]}'"
    return None


@pytest.fixture(scope="module")
def en_us_dsn() -> Iterator[str]:
    """A throw-away database whose default collation is ICU (or glibc) en-US."""
    admin_dsn = make_conninfo(_base_dsn(), dbname="postgres")
    try:
        admin = psycopg.connect(admin_dsn, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres is not reachable: {exc}")
    name = f"tether_en_us_{uuid.uuid4().hex[:10]}"
    with admin:
        options = _icu_database_options(admin)
        if options is None:
            pytest.skip("this server has neither an ICU en-US collation nor a glibc en_US locale")
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 {options}')
    try:
        dsn = make_conninfo(_base_dsn(), dbname=name)
        with psycopg.connect(dsn) as conn:  # the premise: this database orders "a" < "B"
            row = conn.execute("SELECT 'a' < 'B', 'a' COLLATE \"C\" < 'B'").fetchone()
            assert row == (True, False)
        yield dsn
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fill(saver: BaseCheckpointSaver) -> None:
    """The same checkpoints in every saver: one id in every thread and namespace."""
    cid = "1f000000-0000-6000-8000-000000000001"
    for thread in THREADS:
        for ns in NAMESPACES:
            cp = checkpoint({"x": 1}, {"x": "1"})
            cp["id"] = cid
            cfg = saver.put(make_config(thread, ns), cp, {"step": 1}, {"x": "1"})
            for path, task in TASKS:
                saver.put_writes(cfg, [("a", task), ("b", path)], task, path)


def _answers(saver: BaseCheckpointSaver) -> Any:
    listed = [
        (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"])
        for t in saver.list(None)
    ]
    every_ns = {"configurable": {"thread_id": THREADS[1]}}
    thread = [t.config["configurable"]["checkpoint_ns"] for t in saver.list(every_ns)]
    latest = saver.get_tuple(make_config(THREADS[0]))
    assert latest is not None
    return listed, thread, latest.pending_writes


@pytest.fixture(scope="module")
def expected() -> Any:
    reference = InMemorySaver(serde=PlainSerializer())
    _fill(reference)
    listed, thread, writes = _answers(reference)
    # The premise: code-point order, which en-US does not give.
    assert [t for t, _ in listed[:: len(NAMESPACES)]] == sorted(THREADS, reverse=True)
    assert thread == sorted(NAMESPACES, reverse=True)  # one thread across namespaces
    assert [w[0] for w in writes[::2]] == [t for _, t in sorted(TASKS)]
    return _answers(reference)


def test_pending_writes_and_listings_come_in_code_point_order(
    en_us_dsn: str, expected: Any
) -> None:
    with PostgresSaver.from_conn_string(
        en_us_dsn, schema=fresh_schema(), serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        _fill(saver)
        assert _answers(saver) == expected
        # Pages of one row each: the keyset comparison uses the same order.
        saver_small = PostgresSaver.from_conn_string(
            en_us_dsn,
            schema=saver._statements.schema,
            serde=PlainSerializer(),
            inline_primitives=True,
            page_size=1,
        )
        with saver_small:
            assert _answers(saver_small) == expected


def test_a_store_of_version_10_is_migrated_to_code_point_order(
    en_us_dsn: str, expected: Any
) -> None:
    """Version 10's columns use the database collation; version 11 declares C."""
    reference, old = fresh_schema(), fresh_schema()
    with PostgresSaver.from_conn_string(
        en_us_dsn, schema=reference, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        _fill(saver)
    with psycopg.connect(en_us_dsn, autocommit=True) as admin:
        build_old_store(admin, old, 10)
        for table in ("tether_checkpoints", "tether_blobs", "tether_writes"):
            copy_rows(admin, f'"{reference}".{table}', f'"{old}".{table}')
        wrong = admin.execute(
            f'SELECT task_id FROM "{old}".tether_writes WHERE thread_id = %s AND channel = %s '
            "AND checkpoint_ns = '' ORDER BY task_path, task_id",
            (THREADS[0], "a"),
        ).fetchall()
        assert [r[0] for r in wrong] != [w[0] for w in expected[2][::2]]  # the bug, before
    with PostgresSaver.from_conn_string(
        en_us_dsn, schema=old, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        assert _answers(saver) == expected
    with psycopg.connect(en_us_dsn) as admin:
        versions = admin.execute(f'SELECT max(v) FROM "{old}".tether_migrations').fetchone()
        assert versions == (_schema.SCHEMA_VERSION,)

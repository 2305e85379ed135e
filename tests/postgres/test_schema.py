"""setup() and migrations: concurrent processes, out-of-transaction index builds, versions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, SchemaVersionError, make_config
from tether.backends.postgres import _schema

from .conftest import PlainSerializer, fresh_schema
from .helpers import build_old_store, call, catalog, chain, copy_rows, populate_delta_store

pytestmark = pytest.mark.postgres

CHILD = str(Path(__file__).with_name("child.py"))
TABLES = (
    "tether_checkpoints",
    "tether_blobs",
    "tether_writes",
    "tether_migrations",
    "tether_leases",
    "tether_write_counts",
    "tether_threads",
)
INDEXES = {
    "tether_checkpoints_pkey",
    "tether_blobs_pkey",
    "tether_writes_pkey",
    "tether_checkpoints_thread_ns_idx",
    "tether_checkpoints_id_idx",
    "tether_checkpoints_run_id_idx",
    "tether_checkpoints_metadata_idx",
    "tether_blobs_base_idx",
    "tether_migrations_pkey",
    "tether_leases_pkey",
    "tether_write_counts_pkey",
    "tether_threads_pkey",
    "tether_threads_updated_idx",
    "tether_threads_status_idx",
    "tether_threads_retention_idx",
}


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def reap(children: list[subprocess.Popen[str]]) -> None:
    """Kill what still runs and close every pipe (no ResourceWarning, no orphan)."""
    for child in children:
        if child.poll() is None:
            child.kill()
        child.communicate()


def indexes(admin: psycopg.Connection[Any], schema: str) -> dict[str, bool]:
    rows = admin.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
        (schema,),
    ).fetchall()
    return {name: valid for name, valid in rows}


def versions(admin: psycopg.Connection[Any], schema: str) -> list[int]:
    rows = admin.execute(f'SELECT v FROM "{schema}".tether_migrations ORDER BY v').fetchall()
    return [r[0] for r in rows]


def test_eight_processes_set_up_one_fresh_schema_at_once(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    children = [spawn("setup", pg_dsn, schema) for _ in range(8)]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        for child in children:  # release all of them as close together as possible
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=120) for child in children]
    finally:
        reap(children)
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0, err
        assert out.strip() == "done"
    assert versions(admin, schema) == list(range(1, _schema.SCHEMA_VERSION + 1))
    assert indexes(admin, schema) == dict.fromkeys(INDEXES, True)
    # and the store works
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        assert saver.get_tuple(make_config("t")) is None


def test_concurrent_index_builds_run_outside_a_transaction(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """Upgrading on a connection not in autocommit still builds indexes CONCURRENTLY."""
    schema = fresh_schema()
    build_old_store(admin, schema, 2)  # before the index builds of versions 3-5, 7, 8
    with psycopg.connect(pg_dsn) as conn:  # autocommit off: every statement opens a transaction
        assert not conn.autocommit
        PostgresSaver(conn, schema=schema).setup()
        assert not conn.autocommit  # given back as it came
    assert indexes(admin, schema) == dict.fromkeys(INDEXES, True)
    assert versions(admin, schema) == list(range(1, _schema.SCHEMA_VERSION + 1))
    assert all(_schema.MIGRATIONS[v - 1].name for v in versions(admin, schema))
    assert any(m.concurrent for m in _schema.MIGRATIONS)
    for m in _schema.MIGRATIONS:
        if m.concurrent:
            assert all("CONCURRENTLY" in s for s in m.statements)


def test_an_invalid_index_left_by_an_interrupted_build_is_rebuilt(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    # A store upgraded to the last index build, which died half way: the index
    # exists, INVALID, and its migration was not recorded.
    last = max(v for v, m in enumerate(_schema.MIGRATIONS, start=1) if m.index is not None)
    name = _schema.MIGRATIONS[last - 1].index
    assert name is not None
    build_old_store(admin, schema, last)
    admin.execute(f'DELETE FROM "{schema}".tether_migrations WHERE v >= %s', (last,))
    admin.execute(
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
        (f'"{schema}".{name}',),
    )
    assert indexes(admin, schema)[name] is False
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
    assert indexes(admin, schema) == dict.fromkeys(INDEXES, True)
    assert versions(admin, schema) == list(range(1, _schema.SCHEMA_VERSION + 1))


def _snapshot(admin: psycopg.Connection[Any], schema: str) -> list[Any]:
    out: list[Any] = []
    for table in TABLES:
        out.append(admin.execute(f'SELECT * FROM "{schema}".{table} ORDER BY 1, 2').fetchall())
    out.append(sorted(indexes(admin, schema).items()))
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_newer_schema_is_refused_and_left_untouched(
    mode: str, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        await chain("sync", saver, "t", 2)
    newer = _schema.SCHEMA_VERSION + 1
    admin.execute(
        f"INSERT INTO \"{schema}\".tether_migrations (v, name) VALUES (%s, 'from the future')",
        (newer,),
    )
    # A migration this tether does not know dropped an index; nothing may recreate it.
    admin.execute(f'DROP INDEX "{schema}".tether_checkpoints_id_idx')
    before = _snapshot(admin, schema)
    saver = PostgresSaver.from_conn_string(pg_dsn, schema=schema)
    async with saver:
        with pytest.raises(SchemaVersionError, match=f"version {newer}") as info:
            await call(mode, saver, "setup")
    assert info.value.found == newer
    assert info.value.supported == _schema.SCHEMA_VERSION
    assert "upgrade tether" in str(info.value)
    assert _snapshot(admin, schema) == before


async def test_setup_is_idempotent_and_schemas_are_independent(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    a, b = fresh_schema(), fresh_schema()
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=a, serde=PlainSerializer(), inline_primitives=True
    ) as sa:
        sa.setup()
        sa.setup()
        with PostgresSaver.from_conn_string(
            pg_dsn, schema=b, serde=PlainSerializer(), inline_primitives=True
        ) as sb:
            sb.setup()
            chain_a = await chain("sync", sa, "t", 2)
            assert sb.get_tuple(make_config("t")) is None
            latest = sa.get_tuple(make_config("t"))
            assert latest is not None
            assert latest.config == chain_a[-1]
    assert versions(admin, a) == versions(admin, b)


def test_a_schema_of_an_older_release_is_migrated_with_its_data(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """A store set up before append deltas (version 5) keeps its rows and takes tails."""
    from tether.serde import MsgpackSerializer
    from tether.testing._history import message

    schema = fresh_schema()
    build_old_store(admin, schema, 5)
    assert versions(admin, schema) == [1, 2, 3, 4, 5]
    history = [message(i) for i in range(30)]
    tag, data = MsgpackSerializer().dumps_typed(history)
    admin.execute(
        f'INSERT INTO "{schema}".checkpoints (thread_id, checkpoint_ns, checkpoint_id, '
        "checkpoint, metadata) VALUES ('old', '', 'c001', %s, '{\"step\": 3}')",
        (
            '{"v": 4, "id": "c001", "ts": "2026-01-01", "channel_values": {"n": 1}, '
            '"channel_versions": {"n": "1", "history": "1"}, "versions_seen": {}, '
            '"updated_channels": null}',
        ),
    )
    admin.execute(
        f'INSERT INTO "{schema}".checkpoint_blobs (thread_id, checkpoint_ns, channel, '
        "version, type, blob) VALUES ('old', '', 'history', '1', %s, %s)",
        (tag, data),
    )
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        tup = saver.get_tuple(make_config("old"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"n": 1, "history": history}
        assert tup.metadata == {"step": 3}
        cp = dict(tup.checkpoint)
        cfg = tup.config
        for i in range(30, 45):  # the old thread goes on, now stored as snapshot + tails
            history = [*history, message(i)]
            version = saver.get_next_version(cp["channel_versions"]["history"])
            cp = {**cp, "id": f"c{i:03d}", "channel_values": {"n": 1, "history": history}}
            cp["channel_versions"] = {**cp["channel_versions"], "history": version}
            cfg = saver.put(cfg, cp, {"step": i}, {"history": version})  # type: ignore[arg-type]
        latest = saver.get_tuple(make_config("old"))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["history"] == history
    assert versions(admin, schema) == list(range(1, _schema.SCHEMA_VERSION + 1))
    assert indexes(admin, schema) == dict.fromkeys(INDEXES, True)
    tails = admin.execute(
        f'SELECT count(*) FROM "{schema}".tether_blobs WHERE base IS NOT NULL'
    ).fetchone()
    assert tails is not None
    assert tails[0] >= 14


def test_the_baseline_builds_what_the_steps_build(admin: psycopg.Connection[Any]) -> None:
    """A new schema gets BASELINE at once; an old one the steps: the same tables in the end.

    Foreign keys are compared without their validation state: the step that
    added the base key on a populated table adds it NOT VALID.
    """
    fresh, upgraded = fresh_schema(), fresh_schema()
    with psycopg.connect(admin.info.dsn, autocommit=True) as conn:
        PostgresSaver(conn, schema=fresh).setup()
        build_old_store(conn, upgraded, 1)
        PostgresSaver(conn, schema=upgraded).setup()

    def shape(schema: str) -> list[Any]:
        return [
            (kind, name, text.replace(schema, "S").removesuffix(" NOT VALID"))
            for kind, name, text, _ in catalog(admin, schema)
        ]

    assert shape(fresh) == shape(upgraded)
    assert {r[1] for r in catalog(admin, fresh) if r[0] == "table"} == set(TABLES) | INDEXES
    assert versions(admin, fresh) == versions(admin, upgraded)


def test_a_new_store_is_created_in_one_transaction_of_tether_objects_only(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """Every object a fresh setup() creates is named tether_*; no step of the upgrade path runs."""
    schema = fresh_schema()
    log: list[str] = []

    class Logged(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            log.append(str(query))
            return super().execute(query, params, **kwargs)

    with psycopg.connect(pg_dsn, autocommit=True, cursor_factory=Logged) as conn:
        PostgresSaver(conn, schema=schema).setup()
    ddl = [q for q in log if q.lstrip().upper().startswith(("CREATE", "ALTER", "DROP"))]
    assert ddl
    assert not [q for q in ddl if "CONCURRENTLY" in q]  # the baseline, not the steps
    for query in ddl:
        if query.startswith("CREATE SCHEMA"):
            continue
        names = re.findall(r'"' + schema + r'"\.(\w+)|INDEX (\w+)', query)
        touched = {a or b for a, b in names}
        assert touched, query
        assert all(t.startswith("tether_") for t in touched), query
    assert all(r[1].startswith("tether_") for r in catalog(admin, schema))


def test_a_store_of_the_previous_version_is_renamed_in_place_with_its_data(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """Version 9 (the official table names) -> tether_* names: every row reads back equal.

    The previous release wrote the same rows under the old names; they are
    written here by this release into a reference schema and copied over, as
    the rename changes no row format.
    """
    reference, old = fresh_schema(), fresh_schema()
    expected = populate_delta_store(pg_dsn, reference)
    build_old_store(admin, old, _schema.RENAMED - 1)
    for table, theirs in (
        ("checkpoints", "tether_checkpoints"),
        ("checkpoint_blobs", "tether_blobs"),
        ("checkpoint_writes", "tether_writes"),
    ):
        copy_rows(admin, f'"{reference}".{theirs}', f'"{old}".{table}')
    tails = admin.execute(
        f"SELECT count(*) FILTER (WHERE base IS NOT NULL), count(*) FILTER (WHERE version "
        f"LIKE '~%%') FROM \"{old}\".checkpoint_blobs"
    ).fetchone()
    assert tails is not None
    assert tails[0] > 10  # append tails
    assert tails[1] > 2  # and their snapshots
    from tether.serde import MsgpackSerializer

    with PostgresSaver.from_conn_string(pg_dsn, schema=old, serde=MsgpackSerializer()) as saver:
        saver.setup()
        got = [
            (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in saver.list(None)
        ]
    assert got == expected
    assert len(got) == 120
    assert all(t[4] for t in got)  # pending writes came through
    assert versions(admin, old) == list(range(1, _schema.SCHEMA_VERSION + 1))
    assert indexes(admin, old) == dict.fromkeys(INDEXES, True)
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        gone = admin.execute("SELECT to_regclass(%s)", (f'"{old}".{table}',)).fetchone()
        assert gone == (None,)


def test_a_store_of_the_previous_version_gets_a_thread_index_equal_to_a_scan(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """The thread-index migration creates tether_threads and fills it (counts and the
    latest root checkpoint in SQL, each status from the decoded latest checkpoint);
    the rows then follow every put (#15)."""
    import asyncio

    from tether.checkpoint import ERROR, INTERRUPT
    from tether.testing._driver import Driver, new_checkpoint
    from tether.testing._threads import check_index, scan

    schema = fresh_schema()
    names = ["idle", "asked", "failed"]
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        configs = {}
        for name in names:
            cfg: Any = make_config(name)
            for i in range(3):
                cp = new_checkpoint({"n": i}, {"n": f"{i + 1}"})
                cfg = saver.put(cfg, cp, {"step": i, "user": name}, {"n": f"{i + 1}"})
            sub = new_checkpoint({}, {})
            saver.put(make_config(name, "sub:1"), sub, {"step": 0}, {})
            configs[name] = cfg
        saver.put_writes(configs["asked"], [(INTERRUPT, ["approve?"])], "task")
        saver.put_writes(configs["failed"], [(ERROR, "ValueError('no')")], "task")
        expected = asyncio.run(scan(Driver(saver, "sync"), names))
    assert {v["status"] for v in expected.values()} == {"idle", "interrupted", "error"}
    # The store of the version before the index: the same tables without it
    # (migrations are append-only; the index's and the later ones only add to
    # the index).
    before = [m.name for m in _schema.MIGRATIONS].index("thread index")
    admin.execute(f'DROP TABLE "{schema}".tether_threads')
    admin.execute(f'DROP FUNCTION "{schema}".tether_thread_status')
    admin.execute(f'DELETE FROM "{schema}".tether_migrations WHERE v > %s', (before,))
    assert versions(admin, schema)[-1] == before
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        driver = Driver(saver, "sync")
        asyncio.run(check_index(driver, names, "migrated"))
        saver.put(configs["idle"], new_checkpoint({}, {}), {"step": 9, "user": "x"}, {})
        asyncio.run(check_index(driver, names, "a put after the migration"))
    assert versions(admin, schema) == list(range(1, _schema.SCHEMA_VERSION + 1))
    assert indexes(admin, schema) == dict.fromkeys(INDEXES, True)

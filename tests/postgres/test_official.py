"""tether beside LangGraph's official PostgresSaver in one schema (issue #13.2).

Every test runs a real LangGraph graph on the real official saver
(``langgraph-checkpoint-postgres``) and compares catalogs and rows before and
after: tether's ``setup()`` never alters, drops or indexes an object it did
not create, the official ``setup()`` never touches tether's, each reads only
its own rows, and switching a program over never starts an empty history
silently (``import_official``).
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from psycopg.conninfo import conninfo_to_dict

import tether.langgraph as tlg
from tether import ConfigError, MigrationError, PostgresSaver, TetherError
from tether.backends.postgres import _schema
from tether.cli._app import cli
from tether.importer import import_store

from .conftest import fresh_schema
from .graphs import THREADS, arun_chat, history, in_schema, resume, run_chat
from .helpers import build_old_store, catalog, copy_rows, populate_delta_store

pytestmark = pytest.mark.postgres

OFFICIAL = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
TETHER = ("tether_checkpoints", "tether_blobs", "tether_writes", "tether_migrations")


def url_of(dsn: str, schema: str | None = None) -> str:
    """The DSN as a ``postgresql://`` URL (the form the CLI prints), with ``?schema=``."""
    p = conninfo_to_dict(dsn)
    url = f"postgresql://{p.get('user', 'postgres')}@{p.get('host', '127.0.0.1')}"
    url += f":{p.get('port', '5432')}/{p['dbname']}"
    return url if schema is None else f"{url}?schema={schema}"


def rows(admin: psycopg.Connection[Any], schema: str, tables: tuple[str, ...]) -> dict[str, Any]:
    """Every row of these tables, as text, sorted."""
    out = {}
    for table in tables:
        exists = admin.execute("SELECT to_regclass(%s)", (f'"{schema}".{table}',)).fetchone()
        if exists and exists[0]:
            query = f'SELECT t::text FROM "{schema}".{table} t ORDER BY 1'
            out[table] = [r[0] for r in admin.execute(query).fetchall()]
    return out


def not_tether(entries: list[Any]) -> list[Any]:
    return [e for e in entries if not str(e[1]).startswith("tether_")]


@pytest.fixture
def official(pg_dsn: str, admin: psycopg.Connection[Any]) -> tuple[str, Any]:
    """A schema where the official saver ran the chat; what it answered."""
    schema = fresh_schema()
    admin.execute(f'CREATE SCHEMA "{schema}"')
    with OfficialSaver.from_conn_string(in_schema(pg_dsn, schema)) as saver:
        saver.setup()
        run_chat(saver)
        before = history(saver)
    return schema, before


def official_history(pg_dsn: str, schema: str) -> Any:
    with OfficialSaver.from_conn_string(in_schema(pg_dsn, schema)) as saver:
        return history(saver)


# --- neither program touches the other's objects -----------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_tether_setup_beside_the_official_store_changes_none_of_its_objects(
    mode: str, pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    schema, before = official
    shape, data = catalog(admin, schema), rows(admin, schema, OFFICIAL)
    assert {r[1] for r in shape if r[0] == "table"} >= set(OFFICIAL)
    saver = PostgresSaver.from_conn_string(pg_dsn, schema=schema, import_official=False)
    async with saver:
        if mode == "sync":
            saver.setup()
            saver.setup()
        else:
            await saver.asetup()
            await saver.asetup()
    after = catalog(admin, schema)
    assert not_tether(after) == shape  # every official object exactly as it was
    assert {r[1] for r in after if r[0] == "table" and r[1].startswith("tether_")} >= set(TETHER)
    assert rows(admin, schema, OFFICIAL) == data
    assert official_history(pg_dsn, schema) == before


def test_the_official_setup_after_tether_leaves_tether_alone_and_each_reads_its_own(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    schema = fresh_schema()
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema) as ours:
        ours.setup()
        run_chat(ours)
        mine = history(ours)
    assert mine["tuples"]
    ours_shape = catalog(admin, schema, only=("tether_",))
    ours_rows = rows(admin, schema, TETHER)
    tails = admin.execute(f'SELECT count(*) FROM "{schema}".tether_blobs WHERE base IS NOT NULL')
    assert tails.fetchone() > (0,)  # the history is stored as append deltas
    # The official saver, set up in the same schema, runs the same thread ids.
    with OfficialSaver.from_conn_string(in_schema(pg_dsn, schema)) as theirs:
        theirs.setup()
        assert list(theirs.list(None)) == []  # it sees none of tether's rows
        run_chat(theirs)
        resume(theirs, THREADS[0], "yes")
        them = history(theirs)
    assert catalog(admin, schema, only=("tether_",)) == ours_shape
    assert rows(admin, schema, TETHER) == ours_rows
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema) as ours:
        ours.setup()  # tether data present: the official store is not an import candidate
        assert history(ours) == mine
    assert official_history(pg_dsn, schema) == them
    assert them[THREADS[0]] != mine[THREADS[0]]


# --- a schema an older tether shared with the official saver -----------------------------


def test_an_old_tether_setup_on_the_official_tables_is_refused_and_the_advice_repairs_it(
    pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    """LangGraph's store first, then tether before version 10: its setup took the tables over."""
    schema, before = official
    pristine = catalog(admin, schema)
    build_old_store(admin, schema, _schema.RENAMED - 1)  # what the old setup() did here
    damaged, data = catalog(admin, schema), rows(admin, schema, (*OFFICIAL, *TETHER))
    assert damaged != pristine
    for mode in ("sync", "async"):
        saver = PostgresSaver.from_conn_string(pg_dsn, schema=schema, import_official=True)
        with pytest.raises(MigrationError) as info:
            asyncio.run(_setup(mode, saver))
        assert "LangGraph's saver created these tables" in str(info.value)
        assert "nothing was changed" in str(info.value)
        assert catalog(admin, schema) == damaged
        assert rows(admin, schema, (*OFFICIAL, *TETHER)) == data
    # Following the message: LangGraph's store is as it was before tether came.
    for statement in _schema.repair_statements(schema, tether_created=False):
        assert statement in str(info.value)
        admin.execute(statement)
    assert catalog(admin, schema) == pristine
    assert official_history(pg_dsn, schema) == before
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema, import_official=True) as ours:
        ours.setup()
        assert history(ours) == before


async def _setup(mode: str, saver: PostgresSaver) -> None:
    async with saver:
        if mode == "sync":
            saver.setup()
        else:
            await saver.asetup()


def test_an_old_tether_store_the_official_saver_wrote_into_is_refused_and_adoptable(
    pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """tether first (before version 10), then LangGraph's setup() and writes in its tables."""
    reference, schema = fresh_schema(), fresh_schema()
    expected = populate_delta_store(pg_dsn, reference)
    build_old_store(admin, schema, _schema.RENAMED - 1)
    for table, ours in zip(OFFICIAL[:3], TETHER[:3], strict=True):
        copy_rows(admin, f'"{reference}".{ours}', f'"{schema}".{table}')
    with OfficialSaver.from_conn_string(in_schema(pg_dsn, schema)) as theirs:
        theirs.setup()
        run_chat(theirs)
        them = history(theirs, THREADS)
    shape, data = catalog(admin, schema), rows(admin, schema, (*OFFICIAL, *TETHER))
    with (
        PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver,
        pytest.raises(MigrationError) as info,
    ):
        saver.setup()
    message = str(info.value)
    assert "tether created these tables" in message
    assert f"schema version {_schema.RENAMED - 1}" in message
    assert catalog(admin, schema) == shape
    assert rows(admin, schema, (*OFFICIAL, *TETHER)) == data
    with PostgresSaver.from_conn_string(pg_dsn, schema=fresh_schema()) as elsewhere:
        elsewhere.setup()
        with pytest.raises(ConfigError, match="share these tables"):
            import_store(url_of(pg_dsn, schema), elsewhere)
    for statement in _schema.repair_statements(schema, tether_created=True):
        assert statement in message
        admin.execute(statement)
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema) as ours:
        ours.setup()
        # tether's own threads, and LangGraph's, both read back as they were.
        got = [
            (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
            for t in ours.saver.list(None)
            if t.config["configurable"]["thread_id"] in ("t1", "t2")
        ]
        assert history(ours, THREADS)[THREADS[0]] == them[THREADS[0]]
    assert got == expected
    assert set(TETHER) <= {r[1] for r in catalog(admin, schema) if r[0] == "table"}
    assert not {"checkpoints", "checkpoint_migrations"} & {r[1] for r in catalog(admin, schema)}


# --- switching in: import_official ---------------------------------------------------------


def _command(dsn: str, schema: str) -> str:
    name = shlex.quote(url_of(dsn, schema))
    return f"tether import {name} {name}"


def test_from_conn_string_refuses_an_official_store_by_default_naming_the_way_over(
    pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    schema, _ = official
    shape = catalog(admin, schema)
    url = url_of(pg_dsn, schema)
    secret = url.replace("postgres@", "postgres:hunter2@")  # trust auth ignores it
    for opened in (
        PostgresSaver.from_conn_string(secret),
        tlg.PostgresSaver.from_conn_string(secret),
    ):
        with opened as saver, pytest.raises(ConfigError) as info:
            saver.setup()
        message = str(info.value)
        assert "checkpoints, checkpoint_blobs, checkpoint_writes, checkpoint_migrations" in message
        assert _command(pg_dsn, schema).replace("postgres@", "postgres:***@") in message
        assert "hunter2" not in message
        assert "import_official=True" in message
        assert "import_official=False" in message
    assert catalog(admin, schema) == shape  # nothing was created


@pytest.mark.parametrize("how", ["url", "connection", "pool"])
def test_import_official_true_brings_the_threads_over_once(
    how: str, pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    schema, before = official
    if how == "url":
        opened: Any = tlg.PostgresSaver.from_conn_string(
            url_of(pg_dsn, schema), import_official=True
        )
    elif how == "connection":
        conn = psycopg.connect(pg_dsn, autocommit=True)
        opened = _closing(tlg.PostgresSaver(conn, schema=schema, import_official=True), conn)
    else:
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(pg_dsn, kwargs={"autocommit": True}, min_size=1, open=True)
        opened = _closing(tlg.PostgresSaver(pool, schema=schema, import_official=True), pool)
    with opened as ours:
        ours.setup()
        assert history(ours) == before
        counts = rows(admin, schema, TETHER)
        ours.setup()  # tether's tables hold the threads now: nothing is imported again
        assert rows(admin, schema, TETHER) == counts
        # The thread goes on on tether; the official store is left as it was.
        assert resume(ours, THREADS[0], "yes")["approved"] == "yes"
    assert official_history(pg_dsn, schema) == before


class _closing:
    def __init__(self, saver: Any, resource: Any) -> None:
        self.saver, self.resource = saver, resource

    def __enter__(self) -> Any:
        return self.saver

    def __exit__(self, *exc: object) -> None:
        self.saver.close()
        self.resource.close()


async def test_import_official_true_from_async_code(pg_dsn: str, official: tuple[str, Any]) -> None:
    schema, before = official
    url = url_of(pg_dsn, schema)
    async with tlg.AsyncPostgresSaver.from_conn_string(url, import_official=True) as ours:
        await ours.setup()
        assert history(ours) == before


async def test_import_official_true_on_an_async_connection(
    pg_dsn: str, official: tuple[str, Any]
) -> None:
    """An async-only saver: the import runs on a sync connection of its own, same parameters."""
    schema, before = official
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        saver = tlg.AsyncPostgresSaver(conn, schema=schema, import_official=True)
        await saver.setup()
        assert len([t async for t in saver.alist(None)]) == len(before["tuples"])
    finally:
        await conn.close()
    with tlg.PostgresSaver.from_conn_string(url_of(pg_dsn, schema)) as ours:
        assert history(ours) == before


async def test_import_official_none_and_false_from_async_code(
    pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    schema, before = official
    url = url_of(pg_dsn, schema)
    async with tlg.AsyncPostgresSaver.from_conn_string(url) as ours:
        with pytest.raises(ConfigError, match="tether import"):
            await ours.setup()
    assert not rows(admin, schema, TETHER)
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        saver = tlg.AsyncPostgresSaver(conn, schema=schema, import_official=False)
        await saver.setup()
        assert [t async for t in saver.alist(None)] == []  # side by side: tether starts empty
        await arun_chat(saver, ("chat-new",))
        assert len([t async for t in saver.alist(None)]) > 0
    finally:
        await conn.close()
    assert official_history(pg_dsn, schema) == before


def test_import_official_false_keeps_both_side_by_side(
    pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    schema, before = official
    data = rows(admin, schema, OFFICIAL)
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema, import_official=False) as ours:
        ours.setup()
        assert list(ours.list(None)) == []
        run_chat(ours, ("chat-new",))
    assert rows(admin, schema, OFFICIAL) == data
    assert official_history(pg_dsn, schema) == before
    # Later, without the option: tether has data now, so nothing is refused.
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema) as ours:
        ours.setup()


def test_a_failed_import_leaves_nothing_and_the_next_setup_tries_again(
    pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    """The import is one transaction: a damaged value in the last thread leaves no rows."""
    schema, before = official
    key = admin.execute(
        f'SELECT thread_id, channel, version, blob FROM "{schema}".checkpoint_blobs '
        "WHERE thread_id = %s AND channel = 'messages' ORDER BY version DESC LIMIT 1",
        (THREADS[-1],),
    ).fetchone()
    assert key is not None
    where = "WHERE thread_id = %s AND channel = %s AND version = %s"
    admin.execute(
        f"UPDATE \"{schema}\".checkpoint_blobs SET blob = '\\xc1'::bytea {where}", key[:3]
    )
    with (
        tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema, import_official=True) as ours,
        pytest.raises(TetherError) as info,
    ):
        ours.setup()
    assert THREADS[-1] in str(info.value)
    assert any("nothing was imported" in n for n in getattr(info.value, "__notes__", []))
    assert rows(admin, schema, TETHER)["tether_checkpoints"] == []  # not even chat-a
    admin.execute(f'UPDATE "{schema}".checkpoint_blobs SET blob = %s {where}', (key[3], *key[:3]))
    with tlg.PostgresSaver.from_conn_string(pg_dsn, schema=schema, import_official=True) as ours:
        ours.setup()
        assert history(ours) == before


# --- one store naming everywhere -----------------------------------------------------------


def test_from_conn_string_reads_the_schema_of_a_store_url(pg_dsn: str) -> None:
    schema = fresh_schema()
    url = url_of(pg_dsn, schema)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        assert saver._statements.schema == schema
    with PostgresSaver.from_conn_string(url, schema=schema) as saver:  # the same one twice
        assert saver._statements.schema == schema
    with pytest.raises(ConfigError, match="names schema"):
        PostgresSaver.from_conn_string(url, schema="other")
    with (
        pytest.raises(ConfigError, match="names schema"),
        tlg.PostgresSaver.from_conn_string(url, schema="other"),
    ):
        pass
    with pytest.raises(ConfigError, match="lower-case SQL identifier"):
        PostgresSaver.from_conn_string(url_of(pg_dsn, "Bad-Name"))
    with PostgresSaver.from_conn_string(url_of(pg_dsn)) as saver:
        assert saver._statements.schema == "public"


# --- the importer and the CLI in a shared schema -------------------------------------------


def test_the_importer_reads_an_official_store_beside_tether_and_refuses_tether_alone(
    pg_dsn: str, official: tuple[str, Any]
) -> None:
    schema, before = official
    url = url_of(pg_dsn, schema)
    with tlg.PostgresSaver.from_conn_string(url, import_official=False) as ours:
        ours.setup()
        summary = import_store(url, ours)
        assert summary.checkpoints == len(before["tuples"])
        assert history(ours) == before
    lonely = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=lonely) as saver:
        saver.setup()
        with pytest.raises(ConfigError, match="holds a tether store"):
            import_store(url_of(pg_dsn, lonely), saver)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_import_into_the_same_schema_and_inspect_tethers_tables(
    pg_dsn: str, admin: psycopg.Connection[Any], official: tuple[str, Any]
) -> None:
    import json

    schema, before = official
    url = url_of(pg_dsn, schema)
    refused = _cli("threads", url)
    assert refused.exit_code == 1
    assert "tether import" in refused.stderr
    result = _cli("import", url, url, "--no-progress", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["checkpoints"] == len(before["tuples"])
    again = _cli("import", url, url, "--no-progress", "--json")
    assert json.loads(again.stdout)["checkpoints"] == len(before["tuples"])
    infos = json.loads(_cli("threads", url, "--json").stdout)
    assert sorted(i["thread_id"] for i in infos) == sorted(THREADS)
    stats = json.loads(_cli("stats", url, "--json").stdout)
    assert stats["tables"]["tether_checkpoints"]["rows"] == len(before["tuples"])
    with tlg.PostgresSaver.from_conn_string(url) as ours:
        ours.setup()
        assert history(ours) == before
    assert official_history(pg_dsn, schema) == before


def test_cli_says_in_one_line_which_server_it_could_not_reach() -> None:
    result = _cli("threads", "postgresql://nobody:secret@127.0.0.1:1/nowhere")
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "host 127.0.0.1 port 1, database nowhere" in lines[0]
    assert "secret" not in lines[0]
    assert "retry" not in lines[0]

"""Read-only CLI commands on Postgres create and migrate nothing (issue #18.5).

``threads``, ``history``, ``show`` and ``stats`` only read: a schema of an
older tether is refused with a one-line error saying how to migrate it, and
left exactly as it was (its catalog and its ``tether_migrations`` rows); a
newer one and a schema without a store are refused too. The commands run
through click's test runner against the real server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg.conninfo import conninfo_to_dict

from tether.backends.postgres import PostgresSaver, _schema
from tether.checkpoint import empty_checkpoint, make_config
from tether.cli._app import cli

from .conftest import fresh_schema
from .helpers import build_old_store, catalog

pytestmark = pytest.mark.postgres

READERS = (("threads",), ("history", "t-1"), ("show", "t-1"), ("stats",))


def _url(dsn: str, schema: str) -> str:
    params = conninfo_to_dict(dsn)
    auth = quote(str(params.get("user", "postgres")), safe="")
    if params.get("password"):
        auth += ":" + quote(str(params["password"]), safe="")
    host, port = params.get("host", "127.0.0.1"), params.get("port", "5432")
    return f"postgresql://{auth}@{host}:{port}/{params['dbname']}?schema={schema}"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def state(admin: psycopg.Connection[Any], schema: str) -> tuple[list[Any], list[Any]]:
    """What a migration would change: the catalog and the recorded versions."""
    rows = admin.execute(f'SELECT * FROM "{schema}".tether_migrations ORDER BY v').fetchall()
    return catalog(admin, schema), [tuple(r) for r in rows]


@pytest.fixture
def throwaway(admin: psycopg.Connection[Any]) -> Iterator[str]:
    schema = fresh_schema()
    try:
        yield schema
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_an_older_store_is_refused_and_left_unmigrated(
    pg_dsn: str, admin: psycopg.Connection[Any], throwaway: str
) -> None:
    old = _schema.SCHEMA_VERSION - 1
    build_old_store(admin, throwaway, old)
    before = state(admin, throwaway)
    url = _url(pg_dsn, throwaway)
    for args in READERS:
        message = error(run(args[0], url, *args[1:]))
        assert f"tether schema version {old}" in message
        assert f"reads version {_schema.SCHEMA_VERSION}" in message
        assert "setup()" in message
        assert state(admin, throwaway) == before  # byte for byte: nothing created or migrated
    # what the message says to do migrates it; then it reads
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    assert state(admin, throwaway) != before
    result = run("threads", url, "--json")
    assert result.exit_code == 0, result.output


def test_a_newer_store_is_refused_unchanged(
    pg_dsn: str, admin: psycopg.Connection[Any], throwaway: str
) -> None:
    url = _url(pg_dsn, throwaway)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
    admin.execute(
        f'INSERT INTO "{throwaway}".tether_migrations (v, name) VALUES (%s, %s)',
        (_schema.SCHEMA_VERSION + 1, "from the future"),
    )
    before = state(admin, throwaway)
    message = error(run("threads", url))
    assert f"newer than version {_schema.SCHEMA_VERSION}" in message
    assert "upgrade tether" in message
    assert state(admin, throwaway) == before


def test_a_schema_without_a_store_is_refused_and_nothing_created(
    pg_dsn: str, admin: psycopg.Connection[Any], throwaway: str
) -> None:
    url = _url(pg_dsn, throwaway)
    assert "no tether store in schema" in error(run("threads", url))
    assert catalog(admin, throwaway) == []
    # a migrations table recording nothing is no store either
    admin.execute(f'CREATE SCHEMA "{throwaway}"')
    admin.execute(_schema.CREATE_MIGRATIONS.format(schema=f'"{throwaway}"'))
    before = state(admin, throwaway)
    assert "no tether store in schema" in error(run("stats", url))
    assert state(admin, throwaway) == before


def test_a_current_store_is_read_on_connections_that_refuse_writes(
    pg_dsn: str, admin: psycopg.Connection[Any], throwaway: str
) -> None:
    url = _url(pg_dsn, throwaway)
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        saver.put(make_config("t-1"), empty_checkpoint(), {"source": "input", "step": -1}, {})
    before = state(admin, throwaway)
    for args in READERS:
        result = run(args[0], url, *args[1:], "--json")
        assert result.exit_code == 0, result.output
    assert state(admin, throwaway) == before

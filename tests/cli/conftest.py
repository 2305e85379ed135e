"""Fixtures for the CLI and importer tests: official LangGraph stores made by real graphs.

Postgres: one database per test session (created through the server of
``TETHER_TEST_PG_DSN``, dropped at the end), and a fresh database per official
store, because LangGraph's PostgresSaver always uses the ``public`` schema of
its connection. When the server cannot be reached the Postgres cases skip, or
fail when ``TETHER_REQUIRE_PG=1``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver as OfficialPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver
from psycopg.conninfo import make_conninfo

from .graphs import as_url, histories, run_scenario

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _base_dsn() -> str:
    return os.environ.get("TETHER_TEST_PG_DSN", DEFAULT_DSN)


def _admin() -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(
            make_conninfo(_base_dsn(), dbname="postgres"), autocommit=True, connect_timeout=5
        )
    except psycopg.OperationalError as exc:
        msg = f"Postgres at {_base_dsn()!r} is not reachable: {exc}"
        if os.environ.get("TETHER_REQUIRE_PG") == "1":
            pytest.fail(msg + " (TETHER_REQUIRE_PG=1)", pytrace=False)
        pytest.skip(msg)


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A URL (postgresql://...) to a database of this test alone, dropped afterwards."""
    name = f"tether_cli_{uuid.uuid4().hex[:12]}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(_base_dsn(), dbname=name)
    finally:
        with _admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def official_sqlite(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """An official SqliteSaver file after the scenario, and what the store answered."""
    path = tmp_path / "langgraph.db"
    with OfficialSqliteSaver.from_conn_string(str(path)) as saver:
        run_scenario(saver)
        before = histories(saver)
    return path, before


@pytest.fixture
def official_postgres(pg_database: str) -> tuple[str, dict[str, Any]]:
    """An official PostgresSaver store (public schema) after the scenario, and its answers."""
    url = as_url(pg_database)
    with OfficialPostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        run_scenario(saver)
        before = histories(saver)
    return url, before

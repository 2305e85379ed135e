"""Fixtures for the LangGraph drop-in: one factory per tether backend.

Postgres: each test session creates its own database through the maintenance
connection (DSN from ``TETHER_TEST_PG_DSN``) and drops it afterwards. When the
server cannot be reached the Postgres cases skip, or fail when
``TETHER_REQUIRE_PG=1`` (CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


# --- Postgres ------------------------------------------------------------------------


def _pg_unreachable(reason: str) -> None:
    if os.environ.get("TETHER_REQUIRE_PG") == "1":
        pytest.fail(f"Postgres is required (TETHER_REQUIRE_PG=1) but {reason}")
    pytest.skip(f"Postgres not reachable: {reason}")


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN to a fresh database of this session, dropped at the end."""
    base = os.environ.get("TETHER_TEST_PG_DSN", DEFAULT_DSN)
    name = f"tether_lg_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(base, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        _pg_unreachable(str(exc))
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(base)
    params["dbname"] = name
    try:
        yield make_conninfo(**params)
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

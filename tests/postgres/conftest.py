"""Postgres fixtures: one throw-away database per test session, a fresh schema per saver.

The server comes from ``TETHER_TEST_PG_DSN`` (default: the local test server).
When it cannot be reached the tests are skipped -- unless ``TETHER_REQUIRE_PG=1``
(CI), where that is a failure.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import ormsgpack
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tether.backends.postgres import PostgresSaver

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


class PlainSerializer:
    """A tiny typed serializer, so these tests do not depend on tether.serde's progress."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None:
            return "null", b""
        if isinstance(obj, bytes):
            return "bytes", obj
        return "msgpack", ormsgpack.packb(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        tag, raw = data
        if tag == "null":
            return None
        if tag == "bytes":
            return raw
        return ormsgpack.unpackb(raw)


def _base_dsn() -> str:
    return os.environ.get("TETHER_TEST_PG_DSN", DEFAULT_DSN)


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """The DSN of a database created for this test session (dropped at the end)."""
    base = _base_dsn()
    admin = make_conninfo(base, dbname="postgres")
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        msg = f"Postgres at {base!r} is not reachable: {exc}"
        if os.environ.get("TETHER_REQUIRE_PG") == "1":
            pytest.fail(msg + " (TETHER_REQUIRE_PG=1)", pytrace=False)
        pytest.skip(msg)
    name = f"tether_test_{uuid.uuid4().hex[:12]}"
    with conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(base, dbname=name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def dbname(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema name; the schema is dropped after the test (the database at the end)."""
    name = fresh_schema()
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def admin(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A separate autocommit connection for inspecting and disturbing the server."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@contextlib.contextmanager
def url_saver(dsn: str, schema: str | None = None, **kwargs: Any) -> Iterator[PostgresSaver]:
    kwargs.setdefault("serde", PlainSerializer())
    kwargs.setdefault("inline_primitives", True)  # as under tether's own serializer
    with PostgresSaver.from_conn_string(dsn, schema=schema or fresh_schema(), **kwargs) as saver:
        saver.setup()
        yield saver


@contextlib.asynccontextmanager
async def aurl_saver(
    dsn: str, schema: str | None = None, **kwargs: Any
) -> AsyncIterator[PostgresSaver]:
    """As :func:`url_saver`, closing both pools (async tests may open the async one)."""
    kwargs.setdefault("serde", PlainSerializer())
    kwargs.setdefault("inline_primitives", True)  # as under tether's own serializer
    saver = PostgresSaver.from_conn_string(dsn, schema=schema or fresh_schema(), **kwargs)
    async with saver:
        saver.setup()
        yield saver


@pytest.fixture
async def saver(pg_dsn: str, schema: str) -> AsyncIterator[PostgresSaver]:
    """A URL-built saver (owns a small pool) on a fresh schema; both pools closed after."""
    async with aurl_saver(pg_dsn, schema, pool_size=4) as s:
        yield s


@pytest.fixture
async def asaver(pg_dsn: str, schema: str) -> AsyncIterator[PostgresSaver]:
    """The same, used from async tests (its async pool opens on first use)."""
    saver = PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, pool_size=4, serde=PlainSerializer(), inline_primitives=True
    )
    async with saver:
        await saver.asetup()
        yield saver

"""Opening each tether drop-in saver for the LangGraph tests (imported by the test modules)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tether.langgraph import (
    AsyncPostgresSaver,
    AsyncSqliteSaver,
    InMemorySaver,
    PostgresSaver,
    SqliteSaver,
    TetherLangGraphSaver,
)

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


def fresh_schema() -> str:
    """A Postgres schema of its own for each saver: tests share the session database."""
    return f"lg_{uuid.uuid4().hex[:16]}"


@contextlib.contextmanager
def open_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[TetherLangGraphSaver]:
    """A fresh drop-in saver of ``backend``, opened the sync way, default serializer."""
    if backend == "memory":
        with InMemorySaver() as memory:
            yield memory
    elif backend == "sqlite":
        with SqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as sqlite:
            sqlite.setup()
            yield sqlite
    elif backend == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        with PostgresSaver.from_conn_string(dsn, schema=fresh_schema(), pool_size=4) as pg:
            pg.setup()
            yield pg
    else:  # pragma: no cover
        raise AssertionError(backend)


@contextlib.asynccontextmanager
async def aopen_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[TetherLangGraphSaver]:
    """A fresh drop-in saver of ``backend``, opened the async way, default serializer."""
    if backend == "memory":
        async with InMemorySaver() as memory:
            yield memory
    elif backend == "sqlite":
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as sqlite:
            await sqlite.setup()
            yield sqlite
    elif backend == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        async with AsyncPostgresSaver.from_conn_string(
            dsn, schema=fresh_schema(), pool_size=4
        ) as pg:
            await pg.setup()
            yield pg
    else:  # pragma: no cover
        raise AssertionError(backend)

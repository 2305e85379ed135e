"""Opening each tether drop-in saver for the LangGraph tests (imported by the test modules)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.langgraph import InMemorySaver, TetherLangGraphSaver

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
]


def _require(name: str) -> Any:
    """The tether.langgraph class, or a skip while its tether backend is not built yet."""
    import tether.langgraph as tl

    try:
        return getattr(tl, name)
    except ImportError as exc:
        pytest.skip(f"{name} unavailable: {exc}")


def fresh_schema() -> str:
    """A Postgres schema of its own for each saver: tests share the session database."""
    return f"lg_{uuid.uuid4().hex[:16]}"


@contextlib.contextmanager
def open_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[TetherLangGraphSaver]:
    """A fresh drop-in saver of ``backend``, opened the sync way, default serializer."""
    if backend == "memory":
        with InMemorySaver() as saver:
            yield saver
    elif backend == "sqlite":
        cls = _require("SqliteSaver")
        with cls.from_conn_string(str(tmp_path / "lg.db")) as saver:
            saver.setup()
            yield saver
    elif backend == "postgres":
        cls = _require("PostgresSaver")
        dsn = request.getfixturevalue("pg_dsn")
        with cls.from_conn_string(dsn, schema=fresh_schema(), pool_size=4) as saver:
            saver.setup()
            yield saver
    else:  # pragma: no cover
        raise AssertionError(backend)


@contextlib.asynccontextmanager
async def aopen_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[TetherLangGraphSaver]:
    """A fresh drop-in saver of ``backend``, opened the async way, default serializer."""
    if backend == "memory":
        async with InMemorySaver() as saver:
            yield saver
    elif backend == "sqlite":
        cls = _require("AsyncSqliteSaver")
        async with cls.from_conn_string(str(tmp_path / "lg.db")) as saver:
            await saver.setup()
            yield saver
    elif backend == "postgres":
        cls = _require("AsyncPostgresSaver")
        dsn = request.getfixturevalue("pg_dsn")
        async with cls.from_conn_string(dsn, schema=fresh_schema(), pool_size=4) as saver:
            await saver.setup()
            yield saver
    else:  # pragma: no cover
        raise AssertionError(backend)

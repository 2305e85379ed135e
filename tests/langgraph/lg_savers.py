"""Opening each tether drop-in saver for the LangGraph tests (imported by the test modules)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.langgraph import InMemorySaver, TetherLangGraphSaver


def lg_serde() -> Any:
    """The serializer the drop-in savers run with in these tests: their default one."""
    from tether.langgraph import langgraph_serializer

    return langgraph_serializer()


# --- savers --------------------------------------------------------------------------

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


@contextlib.contextmanager
def open_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[TetherLangGraphSaver]:
    """A fresh sync-constructed drop-in saver of ``backend``."""
    serde = lg_serde()
    if backend == "memory":
        yield InMemorySaver(serde=serde)
    elif backend == "sqlite":
        cls = _require("SqliteSaver")
        with cls.from_conn_string(str(tmp_path / "lg.db"), serde=serde) as saver:
            saver.setup()
            yield saver
    elif backend == "postgres":
        cls = _require("PostgresSaver")
        dsn = request.getfixturevalue("pg_dsn")
        with cls.from_conn_string(dsn, serde=serde) as saver:
            saver.setup()
            yield saver
            # Tests share the session database: leave it empty for the next one.
            for thread_id in {t.config["configurable"]["thread_id"] for t in saver.list(None)}:
                saver.delete_thread(thread_id)
    else:  # pragma: no cover
        raise AssertionError(backend)


@contextlib.asynccontextmanager
async def aopen_saver(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[TetherLangGraphSaver]:
    """A fresh async-constructed drop-in saver of ``backend``."""
    serde = lg_serde()
    if backend == "memory":
        yield InMemorySaver(serde=serde)
    elif backend == "sqlite":
        cls = _require("AsyncSqliteSaver")
        async with cls.from_conn_string(str(tmp_path / "lg.db"), serde=serde) as saver:
            await saver.setup()
            yield saver
    elif backend == "postgres":
        cls = _require("AsyncPostgresSaver")
        dsn = request.getfixturevalue("pg_dsn")
        async with cls.from_conn_string(dsn, serde=serde) as saver:
            await saver.setup()
            yield saver
            threads = {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
            for thread_id in threads:
                await saver.adelete_thread(thread_id)
    else:  # pragma: no cover
        raise AssertionError(backend)

"""PostgresSaver runs the contract suite, built every way a user can build it.

* ``url``: ``from_conn_string`` (its own sync and async pools);
* ``conn``: a plain autocommit ``psycopg.Connection`` (async calls run in a worker thread);
* ``pool``: a user's ``ConnectionPool``;
* ``url`` and ``conn`` in pipeline mode too (the pool shares the code path of ``url``);
* ``aconn``: an ``AsyncConnection`` (async callers only).

Every saver uses tether's default (strict MessagePack) serializer and its own schema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from tether import PostgresSaver
from tether.testing import SaverContract, contract_encryption

from .conftest import fresh_schema

pytestmark = pytest.mark.postgres

VARIANTS = ["url", "url-pipeline", "conn", "conn-pipeline", "pool"]


class TestPostgresContract(SaverContract):
    @pytest.fixture(params=VARIANTS)
    async def saver(self, request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[Any]:
        kind, _, flag = str(request.param).partition("-")
        pipeline = flag == "pipeline"
        schema = fresh_schema()
        if kind == "url":
            saver = PostgresSaver.from_conn_string(
                pg_dsn, schema=schema, pool_size=4, pipeline=pipeline
            )
            async with saver:
                saver.setup()
                yield saver
        elif kind == "conn":
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                saver = PostgresSaver(conn, schema=schema, pipeline=pipeline)
                saver.setup()
                yield saver
        else:
            with ConnectionPool(
                pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=4, open=True
            ) as pool:
                saver = PostgresSaver(pool, schema=schema, pipeline=pipeline)
                saver.setup()
                yield saver


class TestPostgresAsyncConnectionContract(SaverContract):
    """Built on an ``AsyncConnection``: sync calls are refused, so only the async path runs."""

    @pytest.fixture(params=["async"])
    def mode(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture(params=[False, True], ids=["plain", "pipeline"])
    async def saver(self, request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[Any]:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            saver = PostgresSaver(conn, schema=fresh_schema(), pipeline=bool(request.param))
            await saver.asetup()
            yield saver


class TestPostgresEncryptedContract(SaverContract):
    """From a URL, every value, write and metadata sealed (#17)."""

    @pytest.fixture
    async def saver(self, pg_dsn: str) -> AsyncIterator[Any]:
        saver = PostgresSaver.from_conn_string(
            pg_dsn, schema=fresh_schema(), pool_size=4, encryption=contract_encryption()
        )
        async with saver:
            saver.setup()
            yield saver

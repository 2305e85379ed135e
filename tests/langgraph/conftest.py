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


# --- probes for known tether backend bugs ----------------------------------------------
# The tests mark themselves xfail only while the probe still finds the bug, so the
# day a fix lands they run (and must pass) without anyone editing them.


@pytest.fixture(scope="session")
def pg_copy_fork_bug(pg_dsn: str) -> bool:
    """Whether a put under another parent with new_versions={} loses an inline channel."""
    from tether.backends.postgres import PostgresSaver
    from tether.checkpoint import empty_checkpoint

    schema = f"probe_{uuid.uuid4().hex[:12]}"
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
        root = {"configurable": {"thread_id": "probe", "checkpoint_ns": ""}}
        configs = [root]
        for step, (value, new) in enumerate([(1, True), (2, True), (2, False)]):
            cp = empty_checkpoint()
            cp["channel_values"] = {"x": value}
            cp["channel_versions"] = {"x": str(value)}
            parent = configs[0] if step == 2 else configs[-1]  # the copy: under the first
            configs.append(saver.put(parent, cp, {"step": step}, {"x": str(value)} if new else {}))
        tup = saver.get_tuple(configs[-1])
        lost = tup is None or tup.checkpoint["channel_values"] != {"x": 2}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return lost

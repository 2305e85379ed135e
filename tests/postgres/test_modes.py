"""Connection modes: pipeline mode, no server-side prepared statements, a real PgBouncer.

The PgBouncer tests start ``pgbouncer`` (Debian package ``pgbouncer``) in
transaction mode in front of the test server; they are skipped when the
binary is not installed, unless ``TETHER_REQUIRE_PGBOUNCER=1``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tether import PostgresSaver, make_config

from .conftest import PlainSerializer, fresh_schema
from .helpers import MODES, call, chain, listing

pytestmark = pytest.mark.postgres

CHILD = str(Path(__file__).with_name("child.py"))


async def exercise(mode: str, saver: PostgresSaver) -> None:
    """A few of every operation, checked."""
    a = await chain(mode, saver, "a", 4, metadata={"run_id": "r1"})
    await chain(mode, saver, "a", 2, ns="sub:1")
    for i, cfg in enumerate(a):
        await call(mode, saver, "put_writes", cfg, [("x", i), ("__error__", "e")], "task")
    tup = await call(mode, saver, "get_tuple", make_config("a"))
    assert tup.config == a[-1]
    assert tup.pending_writes == [("task", "__error__", "e"), ("task", "x", 3)]
    assert tup.checkpoint["channel_values"]["messages"] == ["m0", "m1", "m2", "m3"]
    got = await listing(mode, saver, make_config("a", ""), filter={"run_id": "r1"})
    assert [t.config for t in got] == a[::-1]
    assert len(await listing(mode, saver, None, filter={"run_id": "r1"}, limit=3)) == 3
    await call(mode, saver, "copy_thread", "a", "b")
    assert len(await listing(mode, saver, {"configurable": {"thread_id": "b"}})) == 6
    await call(mode, saver, "prune", ["a"], strategy="keep_latest")
    assert [t.config for t in await listing(mode, saver, make_config("a", ""))] == [a[-1]]
    await call(mode, saver, "delete_for_runs", ["r1"])
    assert await listing(mode, saver, make_config("b", "")) == []
    assert len(await listing(mode, saver, make_config("b", "sub:1"))) == 2
    await call(mode, saver, "delete_thread", "b")
    await call(mode, saver, "delete_thread", "a")
    assert await listing(mode, saver, None) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("source", ["url", "conn", "pool"])
async def test_pipeline_mode(mode: str, source: str, pg_dsn: str) -> None:
    from psycopg_pool import ConnectionPool

    schema = fresh_schema()
    opts: dict[str, Any] = {"schema": schema, "pipeline": True, "serde": PlainSerializer()}
    if source == "url":
        saver = PostgresSaver.from_conn_string(pg_dsn, pool_size=2, **opts)
        async with saver:
            await call(mode, saver, "setup")
            await exercise(mode, saver)
    elif source == "conn":
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            saver = PostgresSaver(conn, **opts)
            await call(mode, saver, "setup")
            await exercise(mode, saver)
    else:
        with ConnectionPool(pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2) as pool:
            saver = PostgresSaver(pool, **opts)
            await call(mode, saver, "setup")
            await exercise(mode, saver)


def _prepared(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("threshold", [None, 0])
async def test_prepare_threshold_none_prepares_nothing(threshold: int | None, pg_dsn: str) -> None:
    """``prepare_threshold=None`` overrides a connection set to prepare everything."""
    with psycopg.connect(pg_dsn, autocommit=True, prepare_threshold=0) as conn:
        saver = PostgresSaver(
            conn,
            schema=fresh_schema(),
            serde=PlainSerializer(),
            inline_primitives=True,
            prepare_threshold=threshold,
        )
        saver.setup()
        for _ in range(3):
            await exercise("sync", saver)
        if threshold is None:
            assert _prepared(conn) == 0
        else:
            assert _prepared(conn) > 0


# --- behind a real PgBouncer in transaction mode ------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def bouncer(pg_dsn: str) -> Iterator[str]:
    """The DSN of the test database through a PgBouncer in transaction pooling mode."""
    binary = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if binary is None:
        msg = "pgbouncer is not installed (apt-get install pgbouncer)"
        if os.environ.get("TETHER_REQUIRE_PGBOUNCER") == "1":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    info = conninfo_to_dict(pg_dsn)
    port = _free_port()
    tmp = Path(tempfile.mkdtemp(prefix="tether-pgbouncer-"))
    tmp.chmod(0o755)  # pgbouncer drops root for the postgres user, who must read these
    upstream = f"host={info.get('host', '127.0.0.1')} port={info.get('port', 5432)}"
    if info.get("password"):
        upstream += f" password={info['password']}"
    (tmp / "users.txt").write_text(f'"{info.get("user", "postgres")}" ""\n')
    (tmp / "pgbouncer.ini").write_text(
        f"""[databases]
* = {upstream}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {tmp / "users.txt"}
pool_mode = transaction
default_pool_size = 4
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
"""
    )
    for f in tmp.iterdir():
        f.chmod(0o644)
    args = [binary, str(tmp / "pgbouncer.ini")]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "postgres"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dsn = make_conninfo(pg_dsn, host="127.0.0.1", port=str(port))
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
                    conn.execute("SELECT 1", prepare=False)
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield dsn
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def _server_pid(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pipeline", [False, True], ids=["plain", "pipeline"])
async def test_behind_pgbouncer_in_transaction_mode(
    mode: str, pipeline: bool, pg_dsn: str, bouncer: str
) -> None:
    schema = fresh_schema()
    # Migrations go straight to the server, as with any migration tool.
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as direct:
        direct.setup()
    saver = PostgresSaver.from_conn_string(
        bouncer,
        schema=schema,
        prepare_threshold=None,
        pipeline=pipeline,
        pool_size=4,
        serde=PlainSerializer(),
        inline_primitives=True,
    )
    async with saver:
        for _ in range(3):  # past psycopg's default threshold of 5 executions per statement
            await exercise(mode, saver)


def test_lease_behind_pgbouncer_excludes_a_second_process(pg_dsn: str, bouncer: str) -> None:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as direct:
        direct.setup()
    env = {**os.environ, "TETHER_CHILD_PREPARE": "none"}

    def spawn(*args: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, CHILD, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        return child

    def done(child: subprocess.Popen[str]) -> str:
        # Not communicate(): it reads the pipe's descriptor, so the lines that
        # spawn's readline() buffered past "ready" (a quick "busy ...") were lost.
        assert child.stdin is not None
        assert child.stdout is not None
        assert child.stderr is not None
        child.stdin.close()
        with child.stdout, child.stderr:
            out, err = child.stdout.read(), child.stderr.read()
        child.wait(timeout=60)
        assert child.returncode == 0, err
        return out

    holder = spawn("lease", bouncer, schema, "t")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "leased"
        # Other clients come and go through the same few server connections meanwhile.
        for _ in range(10):
            _server_pid(bouncer)
        for _ in range(3):
            assert done(spawn("lease", bouncer, schema, "t")).startswith("busy ")
    finally:
        out = done(holder)
    assert out.strip() == "released"
    free = spawn("lease", bouncer, schema, "t")
    assert free.stdout is not None
    assert free.stdout.readline().strip() == "leased"
    assert done(free).strip() == "released"

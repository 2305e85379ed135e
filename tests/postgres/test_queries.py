"""What the backend sends: index use of every statement (EXPLAIN), statements per call, memory.

Plans are taken on a store of 5,000 checkpoints (100 threads x 50), 5,000 blobs and
10,000 writes after ANALYZE, with the planner's defaults (no ``enable_seqscan`` tricks).
Statements are counted on a real connection whose cursors count their ``execute`` calls.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, make_config
from tether.backends.postgres._codec import jsonb
from tether.backends.postgres._history import params as history_params
from tether.backends.postgres._sql import Statements
from tether.checkpoint import Address

from .conftest import PlainSerializer, fresh_schema
from .helpers import chain, checkpoint

pytestmark = pytest.mark.postgres

BIG = ("tether_checkpoints", "tether_blobs", "tether_writes")
THREADS, PER_THREAD = 100, 50


def _populate(conn: psycopg.Connection[Any], schema: str) -> None:
    """Rows in the saver's own format, made in bulk by SQL (a put each would be slow)."""
    q = f'"{schema}"'
    conn.execute(
        f"""
INSERT INTO {q}.tether_checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
SELECT 't' || t, '', 'c' || lpad(n::text, 6, '0'),
       CASE WHEN n > 0 THEN 'c' || lpad((n - 1)::text, 6, '0') END,
       jsonb_build_object('v', 4, 'id', 'c' || lpad(n::text, 6, '0'), 'ts', '2026-01-01',
           'channel_values', jsonb_build_object('step', n),
           'channel_versions', jsonb_build_object('messages', 'v' || n, 'step', 'v' || n),
           'versions_seen', '{{}}'::jsonb, 'updated_channels', null),
       jsonb_build_object('step', n, 'source', 'loop', 'run_id', 'r' || t || '-' || n / 10)
FROM generate_series(0, {THREADS - 1}) t, generate_series(0, {PER_THREAD - 1}) n
"""
    )
    conn.execute(
        f"""
INSERT INTO {q}.tether_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT 't' || t, '', 'messages', '~' || md5(t::text), 'msgpack', '\\x91a3616263'::bytea
FROM generate_series(0, {THREADS - 1}) t
"""
    )
    # every other message version is an append tail of the thread's snapshot
    conn.execute(
        f"""
INSERT INTO {q}.tether_blobs
    (thread_id, checkpoint_ns, channel, version, type, blob, base)
SELECT 't' || t, '', 'messages', 'v' || n, 'msgpack', '\\x91a3616263'::bytea,
       CASE WHEN n % 2 = 1 THEN '~' || md5(t::text) END
FROM generate_series(0, {THREADS - 1}) t, generate_series(0, {PER_THREAD - 1}) n
"""
    )
    conn.execute(
        f"""
INSERT INTO {q}.tether_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
SELECT 't' || t, '', 'c' || lpad(n::text, 6, '0'), 'task', i, 'messages', 'msgpack',
       '\\x01'::bytea
FROM generate_series(0, {THREADS - 1}) t, generate_series(0, {PER_THREAD - 1}) n,
     generate_series(0, 1) i
"""
    )
    for table in BIG:
        conn.execute(f"ANALYZE {q}.{table}")


@pytest.fixture(scope="module")
def big_store(pg_dsn: str) -> Iterator[tuple[str, psycopg.Connection[Any]]]:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _populate(conn, schema)
        yield schema, conn


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    yield plan["Node Type"], plan.get("Relation Name")
    for child in plan.get("Plans", []):
        yield from _scans(child)


def _plan(conn: psycopg.Connection[Any], query: str, params: Any) -> list[tuple[str, str | None]]:
    row = conn.execute("EXPLAIN (FORMAT JSON) " + query, params).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    return list(_scans(doc[0]["Plan"]))


def _put_params() -> dict[str, Any]:
    return {
        "thread_id": "t7",
        "ns": "",
        "checkpoint_id": "c999999",
        "parent_id": "c000049",
        "checkpoint": json.dumps({"channel_values": {}, "channel_versions": {"step": "v50"}}),
        "metadata": "{}",
        "channels": ["messages"],
        "versions": ["v50"],
        "types": ["msgpack"],
        "encodings": [0],
        "blobs": [b"x"],
        "bases": [None],
        "named": json.dumps({"messages": 1, "step": 1}),
        **_INDEX_PARAMS,
    }


# The thread index's parameters of a put (#15); a candidate trigger so that the
# carried-over test is planned too.
_INDEX_PARAMS: dict[str, Any] = {
    "ix_now": 1,
    "ix_bytes": 10,
    "ix_root": True,
    "ix_ts": None,
    "ix_runnable": False,
    "ix_candidates": ["branch:to:n"],
}


def _writes_params() -> dict[str, Any]:
    params: dict[str, Any] = {
        "thread_id": "t7",
        "ns": "",
        "checkpoint_id": "c000049",
        "task_id": "task2",
        "task_path": "",
        "ix_now": 1,
        "ix_bytes": 10,
        "ix_error": False,
        "ix_plain": True,
    }
    for half in ("s_", "o_"):
        params |= {
            half + "idx": [0],
            half + "channels": ["x"],
            half + "types": ["msgpack"],
            half + "encodings": [0],
            half + "blobs": [b"x"],
        }
    return params


def _queries(sql: Statements) -> dict[str, tuple[str, Any]]:
    def page(**kw: Any) -> tuple[str, Any]:
        args: dict[str, Any] = {
            "thread_id": None,
            "ns": None,
            "before_id": None,
            "filter": {},
            "after": None,
            "page": 100,
        }
        q = sql.list_page(**(args | kw), jsonb=jsonb)
        return q.text, q.params

    threads = {"threads": ["t3", "t4"]}
    return {
        "get_tuple latest": (sql.get_latest, ("t5", "")),
        "get_tuple by id": (sql.get_by_id, ("t5", "", "c000020")),
        "list thread+ns first page": page(thread_id="t5", ns=""),
        "list thread+ns next page": page(thread_id="t5", ns="", after=("c000030", "t5", "")),
        "list thread, every ns": page(thread_id="t5", after=("c000030", "t5", "")),
        "list thread before, filtered": page(
            thread_id="t5", ns="", before_id="c000040", filter={"source": "loop"}
        ),
        "list every thread": page(after=("c000030", "t5", "")),
        # A selective filter over every thread goes through the GIN index. (One that
        # matches most rows of a table this small is cheaper to scan, and the
        # planner rightly does; at scale it walks tether_checkpoints_id_idx instead.)
        "list every thread, filtered": page(filter={"run_id": "rt3-2"}),
        "list every thread, filtered, next page": page(
            filter={"run_id": "rt8-1", "source": "loop"}, after=("c000030", "t5", "")
        ),
        "put": (sql.put, _put_params()),
        "put, every channel named": (sql.put_named, _put_params()),
        "put_writes": (sql.put_writes, _writes_params()),
        "delete_thread": (sql.delete_thread, {"t": "t9"}),
        "delete_for_runs": (sql.delete_runs, {"runs": ["rt3-2", "rt8-0"]}),
        "copy_thread": (sql.copy_thread, {"src": "t2", "dst": "t2-copy"}),
        "prune: checkpoints": (sql.prune_checkpoints, threads | {"keep": 1}),
        "prune: writes sweep": (sql.sweep_writes, threads),
        "prune: blobs sweep": (sql.sweep_blobs, threads),
        "prune delete": (sql.prune_all, threads),
        "delta history, one channel, by id": (
            sql.history.text(1, latest=False),
            history_params(Address("t5", "", "c000040"), ["messages"]),
        ),
        "delta history, two channels, latest": (
            sql.history.text(2, latest=True),
            history_params(Address("t5"), ["messages", "step"]),
        ),
    }


def test_every_statement_uses_an_index_on_a_populated_store(
    big_store: tuple[str, psycopg.Connection[Any]],
) -> None:
    schema, conn = big_store
    row = conn.execute(f'SELECT count(*) FROM "{schema}".tether_checkpoints').fetchone()
    assert row == (THREADS * PER_THREAD,)
    bad = {}
    for name, (query, params) in _queries(Statements(schema)).items():
        nodes = _plan(conn, query, params)
        seq = [rel for node, rel in nodes if node == "Seq Scan" and rel in BIG]
        assert any(rel in BIG for _, rel in nodes), (name, nodes)  # the plan reads our tables
        if seq:
            bad[name] = nodes
    assert not bad, "\n".join(f"{name}: {nodes}" for name, nodes in bad.items())


# --- statements per call ------------------------------------------------------------


class CountingCursor(psycopg.Cursor[Any]):
    """A real cursor that counts the statements sent through it."""

    log: list[str] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        type(self).log.append(str(query))
        return super().execute(query, params, **kwargs)


@pytest.fixture
def counted(pg_dsn: str) -> Iterator[tuple[PostgresSaver, list[str]]]:
    log: list[str] = []
    cursor = type("Cursor", (CountingCursor,), {"log": log})
    with psycopg.connect(pg_dsn, autocommit=True, cursor_factory=cursor) as conn:
        saver = PostgresSaver(
            conn, schema=fresh_schema(), serde=PlainSerializer(), inline_primitives=True
        )
        saver.setup()
        log.clear()
        yield saver, log


async def test_get_tuple_is_one_statement(counted: tuple[PostgresSaver, list[str]]) -> None:
    saver, log = counted
    configs = await chain("sync", saver, "t", 3)
    saver.put_writes(configs[-1], [("x", 1), ("y", {"big": "z" * 3000})], "task")
    log.clear()
    latest = saver.get_tuple(make_config("t"))
    assert latest is not None
    assert len(log) == 1
    assert latest.pending_writes == [("task", "x", 1), ("task", "y", {"big": "z" * 3000})]
    assert latest.checkpoint["channel_values"]["messages"] == ["m0", "m1", "m2"]
    log.clear()
    by_id = saver.get_tuple(configs[1])
    assert by_id is not None
    assert len(log) == 1
    assert by_id.parent_config == configs[0]


async def test_writes_and_thread_operations_are_one_statement_or_one_transaction(
    counted: tuple[PostgresSaver, list[str]],
) -> None:
    saver, log = counted
    configs = await chain("sync", saver, "t", 3, metadata={"run_id": "r"})
    # One statement per put and per put_writes, the thread index's row with it
    # (its status is computed where that row is locked: no lock statement).
    assert len(log) == 3
    log.clear()
    saver.put_writes(configs[-1], [("x", 1), ("__error__", "e"), ("y", 2)], "task")
    assert len(log) == 1
    # Thread operations recount each thread's index row in their transaction
    # (#15): a delete, a read, a recount and a restate, plus the read and decode
    # of a latest root checkpoint that moved (delete_for_runs, copy_thread).
    for op, args, most in [
        ("copy_thread", ("t", "u"), 8),
        ("delete_thread", ("u",), 1),
        ("prune", (["t"],), 7),
        ("delete_for_runs", (["r"],), 8),
    ]:
        log.clear()
        getattr(saver, op)(*args)
        assert 1 <= len(log) <= most, (op, log)


async def test_list_is_one_query_per_page_and_lazy(
    pg_dsn: str,
) -> None:
    log: list[str] = []
    cursor = type("Cursor", (CountingCursor,), {"log": log})
    with psycopg.connect(pg_dsn, autocommit=True, cursor_factory=cursor) as conn:
        saver = PostgresSaver(
            conn,
            schema=fresh_schema(),
            serde=PlainSerializer(),
            inline_primitives=True,
            page_size=10,
        )
        saver.setup()
        configs = await chain("sync", saver, "t", 25)
        for i, cfg in enumerate(configs):
            saver.put_writes(cfg, [("x", i), ("y", i)], "task")
        log.clear()
        it = saver.list(make_config("t"))
        first = next(it)
        assert len(log) == 1  # the first page only, writes included
        assert first.pending_writes == [("task", "x", 24), ("task", "y", 24)]
        rest = list(it)
        assert len(log) == 3  # 10 + 10 + 5: writes come with their page, never per row
        assert [t.config for t in [first, *rest]] == configs[::-1]
        assert all(len(t.pending_writes) == 2 for t in rest)
        log.clear()
        assert len(list(saver.list(make_config("t"), limit=10))) == 10
        assert len(log) == 1


async def test_list_memory_is_bounded_by_the_page(pg_dsn: str) -> None:
    """Streaming 1,500 checkpoints peaks far below holding them all."""
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, serde=PlainSerializer(), inline_primitives=True, page_size=50
    ) as saver:
        saver.setup()
        payload = "p" * 2000
        cfg: Any = make_config("t")
        for i in range(1500):
            v = {"doc": f"{i + 1:032}.0"}
            cfg = saver.put(cfg, checkpoint({"doc": payload + str(i)}, v), {"step": i}, v)
        tracemalloc.start()
        try:
            count = 0
            for tup in saver.list(make_config("t")):
                count += len(tup.checkpoint["channel_values"]["doc"]) > 0
            _, streamed = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            held = list(saver.list(make_config("t")))
            _, whole = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert count == len(held) == 1500
        assert streamed * 5 < whole, (streamed, whole)


def test_reads_look_blobs_up_by_key_on_a_young_table(pg_dsn: str) -> None:
    """No statistics yet (autovacuum has not analyzed a new table): still key lookups.

    With a plain join the planner, told "one row", hashed every blob of the
    thread for each read (a 1,000-step history read 4x slower than LangGraph's).
    """
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=schema, serde=PlainSerializer(), inline_primitives=True
    ) as saver:
        saver.setup()
        cfg: Any = make_config("t")
        for i in range(300):
            cp = checkpoint({"m": [i] * 50, "n": i}, {"m": f"v{i:04}", "n": f"v{i:04}"})
            cfg = saver.put(cfg, cp, {}, {"m": f"v{i:04}", "n": f"v{i:04}"})
    sql = Statements(schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for query, params in [
            (sql.get_latest, ("t", "")),
            (sql.get_by_id, ("t", "", cfg["configurable"]["checkpoint_id"])),
        ]:
            nodes = _plan(conn, query, params)
            blob_scans = [n for n, rel in nodes if rel == "tether_blobs"]
            assert blob_scans, nodes
            assert all(n == "Index Scan" for n in blob_scans), nodes
            assert "Hash Join" not in [n for n, _ in nodes], nodes


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_a_thread_across_namespaces_reads_one_page_from_each_index(pg_dsn: str) -> None:
    """Root rows from the primary key, subgraph rows from the partial index, a page of each.

    Since schema version 8 there is no index of every row by (thread_id,
    checkpoint_id); a page must still not read (or sort) the whole thread.
    """
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema) as saver:
        saver.setup()
    q = f'"{schema}"'
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"""
INSERT INTO {q}.tether_checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, metadata)
SELECT t, CASE WHEN n % 3 = 0 THEN 'child:' || n ELSE '' END, 'c' || lpad(n::text, 6, '0'),
       jsonb_build_object('v', 4, 'id', 'c' || lpad(n::text, 6, '0'), 'ts', '2026-01-01',
           'channel_values', '{{}}'::jsonb, 'channel_versions', '{{}}'::jsonb,
           'versions_seen', '{{}}'::jsonb),
       '{{}}'::jsonb
FROM unnest(ARRAY['t', 'u']) t, generate_series(0, 2999) n
"""
        )
        conn.execute(f"ANALYZE {q}.tether_checkpoints")
        sql = Statements(schema)
        for after in (None, ("c001500", "t", ""), ("c001500", "t", "child:1500")):
            args: dict[str, Any] = {"before_id": None, "filter": {}, "after": after}
            page = sql.list_page(thread_id="t", ns=None, page=100, jsonb=jsonb, **args)
            row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + page.text, page.params)
            got = row.fetchone()
            assert got is not None
            nodes = list(_nodes(got[0][0]["Plan"]))
            scans = [n for n in nodes if n.get("Relation Name") == "tether_checkpoints"]
            assert {n["Index Name"] for n in scans} == {
                "tether_checkpoints_pkey",
                "tether_checkpoints_thread_ns_idx",
            }, scans
            assert all(n["Actual Rows"] <= 101 for n in scans), scans
            # A merge, not a sort of the thread (each row's pending writes are
            # sorted into S2.4 order, a sort keyed by task_path).
            sorts = [n for n in nodes if n["Node Type"] == "Sort"]
            assert all("task_path" in " ".join(n["Sort Key"]) for n in sorts), sorts
            rows = conn.execute(page.text, page.params).fetchall()
            keys = [(r[2], r[1]) for r in rows]
            assert len(keys) == 100
            assert keys == sorted(keys, reverse=True)
            if after is not None:
                assert keys[0] < (after[0], after[2])


# --- wide checkpoints: linear in the channel count (issue #18.9b) --------------------


def _buffers(conn: psycopg.Connection[Any], query: str, params: Any) -> int:
    """Shared buffers the statement touched (EXPLAIN ANALYZE BUFFERS), rolled back."""
    with conn.transaction(force_rollback=True):
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query, params).fetchone()
    assert row is not None
    plan = row[0][0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def _wide(saver: PostgresSaver, thread: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A checkpoint of ``n`` channels (half inline ints, half blobs) and a child naming one."""
    names = [f"ch{i:06d}" for i in range(n)]
    values = {c: (i if i % 2 else [i, "x" * 20]) for i, c in enumerate(names)}
    versions = dict.fromkeys(names, "1")
    cfg = saver.put(make_config(thread), checkpoint(values, versions), {}, versions)
    changed = {**versions, names[0]: "2"}
    child = checkpoint({**values, names[0]: [-1]}, changed)
    return cfg, child


def test_reads_and_puts_of_a_wide_checkpoint_touch_pages_linearly(pg_dsn: str) -> None:
    """Buffers touched, counted by the server, at 1,000 and 4,000 channels: about 4x, not 16x.

    Before, every channel took the row's inline values out of its (TOASTed)
    checkpoint again, on reads and in the put's carry-over: 8.5x and 7.4x the
    buffers for 4x the channels (and growing with the count); now 3.9-4x.
    Counts of buffers, not times: they do not depend on the machine's load.
    """
    from tether.backends._inline import inline_value
    from tether.backends._records import encode_put
    from tether.backends.postgres import _arrays
    from tether.backends.postgres._codec import put_params

    schema = fresh_schema()
    got: dict[str, list[int]] = {"get_tuple": [], "put (carry-over)": []}
    with (
        PostgresSaver.from_conn_string(
            pg_dsn, schema=schema, serde=PlainSerializer(), inline_primitives=True
        ) as saver,
        psycopg.connect(pg_dsn, autocommit=True) as conn,
    ):
        saver.setup()
        _arrays.ensure(conn)
        core = saver._sync_core()
        sql = Statements(schema)
        for n in (1000, 4000):
            cfg, child = _wide(saver, f"t{n}", n)
            name = next(iter(child["channel_versions"]))
            new = {name: "2"}
            plan = encode_put(
                saver.serde, core._codec, None, cfg, child, {}, new, inline=inline_value
            )
            put = sql.put if plan.values else sql.put_inline
            params = put_params(plan, plan.values) | _INDEX_PARAMS
            got["put (carry-over)"].append(_buffers(conn, put, params))
            stored = saver.put(cfg, child, {}, new)
            key = (f"t{n}", "", stored["configurable"]["checkpoint_id"])
            got["get_tuple"].append(_buffers(conn, sql.get_by_id, key))
            tup = saver.get_tuple(stored)
            assert tup is not None
            assert len(tup.checkpoint["channel_values"]) == n
    for what, (small, large) in got.items():
        assert large < 6 * small, (what, small, large)

"""PostgresSaver semantics through both sync and async methods (real server)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tether import ConfigError, PostgresSaver, make_config
from tether.checkpoint import ERROR, INTERRUPT
from tether.contract import metadata_matches

from .helpers import MODES, call, chain, checkpoint, listing

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("mode", MODES)
async def test_round_trip_inline_and_blob_values(mode: str, saver: PostgresSaver) -> None:
    values = {
        "big": "x" * 5000,
        "small": "hi",
        "n": 2**62,  # (PlainSerializer, ormsgpack, packs 64-bit ints only)
        "f": 0.1,
        "huge_f": 1e300,
        "neg0": -0.0,
        "b": True,
        "none": None,
        "list": [1, {"a": b"bytes"}],
        "nul": "a\x00b",
    }
    versions = dict.fromkeys(values, "1")
    cp = checkpoint(values, versions)
    cfg = await call(mode, saver, "put", make_config("t"), cp, {"source": "input"}, versions)
    tup = await call(mode, saver, "get_tuple", cfg)
    assert tup.checkpoint["channel_values"] == values
    for key, value in values.items():
        assert type(tup.checkpoint["channel_values"][key]) is type(value), key
    assert str(tup.checkpoint["channel_values"]["neg0"]) == "-0.0"
    assert tup.checkpoint["channel_versions"] == versions
    assert tup.metadata == {"source": "input"}
    assert tup.parent_config is None


@pytest.mark.parametrize("mode", MODES)
async def test_metadata_floats_in_exponent_form_read_back_as_floats(
    mode: str, saver: PostgresSaver
) -> None:
    """JSONB keeps numbers as numeric: an integral float JSON writes in exponent form
    (1e16 and up) must be written so that it reads back as a float, not an int."""
    meta = {"a": 1e16, "b": [2.5e16, {"c": 1e300}], "d": 1e22, "e": 1e15, "f": -0.0, "g": 0.1}
    cfg = await call(mode, saver, "put", make_config("t"), checkpoint({}, {}), meta, {})
    tup = await call(mode, saver, "get_tuple", cfg)
    assert tup.metadata == meta
    assert type(tup.metadata["a"]) is float
    assert type(tup.metadata["b"][0]) is float
    assert type(tup.metadata["b"][1]["c"]) is float
    assert type(tup.metadata["d"]) is float
    assert [t.config for t in await listing(mode, saver, None, filter={"a": 1e16})] == [cfg]


@pytest.mark.parametrize("mode", MODES)
async def test_unnamed_channels_come_from_storage(mode: str, saver: PostgresSaver) -> None:
    """Channels not in new_versions are read from earlier puts, never from channel_values."""
    v1 = {"s": "1", "l": "1"}
    cp1 = checkpoint({"s": "inline", "l": [1]}, v1)
    c1 = await call(mode, saver, "put", make_config("t"), cp1, {}, v1)
    # The caller sends nothing (or something else) for the unchanged channels.
    cp2 = checkpoint({}, v1)
    c2 = await call(mode, saver, "put", c1, cp2, {}, {})
    cp3 = checkpoint({"s": "lie", "l": ["lie"]}, v1)
    c3 = await call(mode, saver, "put", c2, cp3, {}, {})
    for cfg in (c1, c2, c3):
        tup = await call(mode, saver, "get_tuple", cfg)
        assert tup.checkpoint["channel_values"] == {"s": "inline", "l": [1]}
    tup = await call(mode, saver, "get_tuple", c3)
    assert tup.parent_config == c2


@pytest.mark.parametrize("mode", MODES)
async def test_cleared_channel_is_absent(mode: str, saver: PostgresSaver) -> None:
    v1 = {"a": "1"}
    c1 = await call(mode, saver, "put", make_config("t"), checkpoint({"a": [1]}, v1), {}, v1)
    v2 = {"a": "2"}
    c2 = await call(mode, saver, "put", c1, checkpoint({}, v2), {}, v2)
    tup = await call(mode, saver, "get_tuple", c2)
    assert tup.checkpoint["channel_values"] == {}


@pytest.mark.parametrize("mode", MODES)
async def test_writes_order_and_special_channels(mode: str, saver: PostgresSaver) -> None:
    v = {"a": "1"}
    cfg = await call(mode, saver, "put", make_config("t"), checkpoint({"a": 1}, v), {}, v)
    await call(mode, saver, "put_writes", cfg, [("x", 1), ("y", 2)], "t2", "b")
    await call(mode, saver, "put_writes", cfg, [("x", 9), (ERROR, "e1")], "t1", "a")
    await call(mode, saver, "put_writes", cfg, [("x", "ignored"), (ERROR, "e2")], "t1", "a")
    await call(mode, saver, "put_writes", cfg, [(INTERRUPT, {"big": "z" * 4000})], "t3", "a")
    tup = await call(mode, saver, "get_tuple", cfg)
    assert tup.pending_writes == [
        ("t1", ERROR, "e2"),
        ("t1", "x", 9),
        ("t3", INTERRUPT, {"big": "z" * 4000}),
        ("t2", "x", 1),
        ("t2", "y", 2),
    ]
    with pytest.raises(ConfigError, match="checkpoint_id"):
        await call(mode, saver, "put_writes", make_config("t"), [("x", 1)], "t1")


@pytest.mark.parametrize("mode", MODES)
async def test_latest_per_namespace_and_missing(mode: str, saver: PostgresSaver) -> None:
    assert await call(mode, saver, "get_tuple", make_config("nobody")) is None
    root = await chain(mode, saver, "t", 3)
    sub = await chain(mode, saver, "t", 2, ns="child:1")
    assert (await call(mode, saver, "get_tuple", make_config("t"))).config == root[-1]
    assert (await call(mode, saver, "get_tuple", make_config("t", "child:1"))).config == sub[-1]
    missing = make_config("t", "", "1ef00000-0000-6000-8000-000000000000")
    assert await call(mode, saver, "get_tuple", missing) is None


@pytest.mark.parametrize("mode", MODES)
async def test_list_pages_by_key(mode: str, pg_dsn: str) -> None:
    from .conftest import aurl_saver

    async with aurl_saver(pg_dsn, page_size=3) as saver:
        a = await chain(mode, saver, "a", 7)
        a_sub = await chain(mode, saver, "a", 4, ns="sub:1")
        b = await chain(mode, saver, "b", 5)
        every = sorted(
            [(c, "a", "") for c in a]
            + [(c, "a", "sub:1") for c in a_sub]
            + [(c, "b", "") for c in b],
            key=lambda x: (
                x[0]["configurable"]["checkpoint_id"],
                x[0]["configurable"]["thread_id"],
                x[1],
                x[2],
            ),
            reverse=True,
        )
        got = await listing(mode, saver, None)
        assert [t.config for t in got] == [c for c, _, _ in every]
        # a thread across namespaces, newest first
        got = await listing(mode, saver, {"configurable": {"thread_id": "a"}})
        ids = [t.config["configurable"]["checkpoint_id"] for t in got]
        assert len(got) == 11
        assert ids == sorted(ids, reverse=True)
        # one namespace
        got = await listing(mode, saver, make_config("a", ""))
        assert [t.config for t in got] == a[::-1]
        for t in got:  # every page carries values
            step = t.metadata["step"]
            assert t.checkpoint["channel_values"]["messages"] == [f"m{i}" for i in range(step + 1)]
        # before + limit across page boundaries
        got = await listing(mode, saver, make_config("a", ""), before=a[5], limit=4)
        assert [t.config for t in got] == a[1:5][::-1]
        assert await listing(mode, saver, make_config("a", ""), limit=0) == []
        with pytest.raises(ConfigError):
            await listing(mode, saver, None, limit=-1)
        # a config with an id lists just that checkpoint
        got = await listing(mode, saver, a[2])
        assert [t.config for t in got] == [a[2]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("page_size", [1, 2, 3, 5])
async def test_a_thread_lists_across_namespaces_when_ids_repeat(
    mode: str, page_size: int, pg_dsn: str
) -> None:
    """Root rows (primary key) and subgraph rows (partial index) merge in (id, ns) order.

    The same checkpoint id in several namespaces puts page boundaries between
    rows of one id: no row may be skipped or repeated at any page size.
    """
    from .conftest import aurl_saver

    async with aurl_saver(pg_dsn, page_size=page_size) as saver:
        ids = [f"1f0{n:05d}-0000-6000-8000-000000000000" for n in range(6)]
        placed = {  # id -> its namespaces
            ids[0]: ["", "a"],
            ids[1]: ["a", "b"],
            ids[2]: [""],
            ids[3]: ["", "a", "b", "c"],
            ids[4]: ["b"],
            ids[5]: ["", "c"],
        }
        expected = []
        for cid, spaces in placed.items():
            for ns in spaces:
                cp = checkpoint({"n": cid[-3:] + ns}, {"n": "1"})
                cp["id"] = cid
                await call(mode, saver, "put", make_config("t", ns), cp, {"ns": ns}, {"n": "1"})
                expected.append((cid, ns))
        await chain(mode, saver, "other", 3)  # another thread in between
        expected.sort(reverse=True)
        got = await listing(mode, saver, {"configurable": {"thread_id": "t"}})
        pairs = [
            (t.config["configurable"]["checkpoint_id"], t.config["configurable"]["checkpoint_ns"])
            for t in got
        ]
        assert pairs == expected
        assert [t.metadata["ns"] for t in got] == [ns for _, ns in expected]
        before = {"configurable": {"thread_id": "t", "checkpoint_id": ids[3]}}
        got = await listing(mode, saver, {"configurable": {"thread_id": "t"}}, before=before)
        assert [t.config["configurable"]["checkpoint_id"] for t in got] == [
            cid for cid, _ in expected if cid < ids[3]
        ]
        got = await listing(mode, saver, {"configurable": {"thread_id": "t"}}, limit=4)
        assert [(t.config["configurable"]["checkpoint_id"], t.metadata["ns"]) for t in got] == (
            expected[:4]
        )


METADATA: list[dict[str, Any]] = [
    {"n": 1},
    {"n": 1.0},
    {"n": True},
    {"n": None},
    {},
    {"n": "1"},
    {"n": {"a": 1, "b": [1, 2]}},
    {"n": {"a": 1, "b": [1, 2], "c": 3}},
    {"n": [1, 2]},
    {"n": [2, 1]},
    {"n": [1, 2, 3]},
    {"n": 0},
    {"n": False},
]

FILTERS: list[dict[str, Any]] = [
    {"n": 1},
    {"n": 1.0},
    {"n": True},
    {"n": False},
    {"n": 0},
    {"n": None},
    {"n": "1"},
    {"n": {"a": 1, "b": [1, 2]}},
    {"n": {"a": 1}},
    {"n": [1, 2]},
    {"n": [1]},
    {"missing": None},
    {"n": 1, "other": 1},
]


@pytest.mark.parametrize("mode", MODES)
async def test_filter_semantics_equal_metadata_matches(mode: str, saver: PostgresSaver) -> None:
    by_id = {}
    config: Any = make_config("t")
    for meta in METADATA:
        v = {"a": "1"}
        config = await call(mode, saver, "put", config, checkpoint({"a": 1}, v), meta, v)
        by_id[config["configurable"]["checkpoint_id"]] = meta
    for flt in FILTERS:
        want = {cid for cid, meta in by_id.items() if metadata_matches(meta, flt)}
        got = {
            t.config["configurable"]["checkpoint_id"]
            for t in await listing(mode, saver, None, filter=flt)
        }
        assert got == want, flt


INJECTIONS = [
    "n') OR 1=1 --",
    'n" = "n',
    "'; DROP TABLE checkpoints; --",
    "n' ? 'n",
    "%s",
    "%(n)s",
]


@pytest.mark.parametrize("mode", MODES)
async def test_injection_looking_filter_keys_match_nothing(
    mode: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    await chain(mode, saver, "t", 3, metadata={"n": 1})
    for key in INJECTIONS:
        assert await listing(mode, saver, None, filter={key: 1}) == []
        assert await listing(mode, saver, make_config("t"), filter={key: "x", "n": 1}) == []
    assert len(await listing(mode, saver, None)) == 3
    row = admin.execute(f'SELECT count(*) FROM "{schema}".tether_checkpoints').fetchone()
    assert row is not None
    assert row[0] == 3
    # a key that is really stored with such a name is matched, as a plain key
    weird = INJECTIONS[0]
    v = {"a": "1"}
    cfg = await call(mode, saver, "put", make_config("w"), checkpoint({}, v), {weird: 1}, v)
    got = await listing(mode, saver, None, filter={weird: 1})
    assert [t.config for t in got] == [cfg]


@pytest.mark.parametrize("mode", MODES)
async def test_metadata_merge_from_config(mode: str, saver: PostgresSaver) -> None:
    config = {
        "configurable": {"thread_id": "t", "user": "u1", "__secret": "x"},
        "metadata": {"run_id": "r1"},
    }
    v = {"a": "1"}
    cfg = await call(mode, saver, "put", config, checkpoint({}, v), {"source": "loop"}, v)
    tup = await call(mode, saver, "get_tuple", cfg)
    assert tup.metadata == {"source": "loop", "user": "u1", "run_id": "r1"}


async def _count(admin: psycopg.Connection[Any], schema: str, table: str, thread: str) -> int:
    row = admin.execute(
        f'SELECT count(*) FROM "{schema}".{table} WHERE thread_id = %s', (thread,)
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("mode", MODES)
async def test_delete_thread(
    mode: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    configs = await chain(mode, saver, "t", 3)
    await chain(mode, saver, "t", 2, ns="sub:1")
    await chain(mode, saver, "other", 2)
    await call(mode, saver, "put_writes", configs[-1], [("x", 1)], "task")
    await call(mode, saver, "delete_thread", "t")
    for table in ("tether_checkpoints", "tether_blobs", "tether_writes"):
        assert await _count(admin, schema, table, "t") == 0
    assert len(await listing(mode, saver, make_config("other"))) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_delete_for_runs_collects_blobs(
    mode: str, saver: PostgresSaver, admin: psycopg.Connection[Any], schema: str
) -> None:
    r1 = await chain(mode, saver, "t", 3, metadata={"run_id": "r1"})
    v = {"messages": f"{99:032}.0"}
    extra = checkpoint({"messages": ["only-r2"]}, v)
    r2 = await call(
        mode,
        saver,
        "put",
        make_config("t", "", r1[0]["configurable"]["checkpoint_id"]),
        extra,
        {"run_id": "r2"},
        v,
    )
    await call(mode, saver, "put_writes", r1[1], [("x", 1)], "task")
    await call(mode, saver, "put_writes", r2, [("x", 2)], "task")
    await call(mode, saver, "delete_for_runs", ["r1"])
    got = await listing(mode, saver, make_config("t"))
    assert [t.config for t in got] == [r2]
    assert got[0].checkpoint["channel_values"] == {"messages": ["only-r2"]}
    assert got[0].pending_writes == [("task", "x", 2)]
    assert await _count(admin, schema, "tether_blobs", "t") == 1
    assert await _count(admin, schema, "tether_writes", "t") == 1
    await call(mode, saver, "delete_for_runs", [])


@pytest.mark.parametrize("mode", MODES)
async def test_copy_thread(mode: str, saver: PostgresSaver) -> None:
    src = await chain(mode, saver, "src", 3)
    await chain(mode, saver, "src", 1, ns="sub:1")
    await call(mode, saver, "put_writes", src[-1], [("x", 1)], "task")
    await chain(mode, saver, "dst", 1)
    await call(mode, saver, "copy_thread", "src", "dst")
    a = await listing(mode, saver, {"configurable": {"thread_id": "src"}})
    b = await listing(mode, saver, {"configurable": {"thread_id": "dst"}})
    assert len(b) == len(a) + 1
    by_id = {t.config["configurable"]["checkpoint_id"]: t for t in b}
    for t in a:
        copy = by_id[t.config["configurable"]["checkpoint_id"]]
        assert copy.checkpoint == t.checkpoint
        assert copy.pending_writes == t.pending_writes
        assert copy.config["configurable"]["thread_id"] == "dst"
    await call(mode, saver, "copy_thread", "nobody", "dst2")
    assert await listing(mode, saver, {"configurable": {"thread_id": "dst2"}}) == []
    with pytest.raises(ConfigError):
        await call(mode, saver, "copy_thread", "src", "src")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("strategy", "keep", "left"), [("keep_latest", 1, 1), ("keep_last", 2, 2), ("delete", 1, 0)]
)
async def test_prune(
    mode: str,
    strategy: str,
    keep: int,
    left: int,
    saver: PostgresSaver,
    admin: psycopg.Connection[Any],
    schema: str,
) -> None:
    configs = await chain(mode, saver, "t", 5)
    sub = await chain(mode, saver, "t", 3, ns="sub:1")
    for cfg in configs + sub:
        await call(mode, saver, "put_writes", cfg, [("x", 1)], "task")
    await chain(mode, saver, "other", 3)
    await call(mode, saver, "prune", ["t"], strategy=strategy, keep=keep)
    got = await listing(mode, saver, make_config("t", ""))
    assert [t.config for t in got] == configs[::-1][:left]
    got_sub = await listing(mode, saver, make_config("t", "sub:1"))
    assert [t.config for t in got_sub] == sub[::-1][:left]
    for t in got + got_sub:
        assert t.pending_writes == [("task", "x", 1)]
        step = t.metadata["step"]
        assert t.checkpoint["channel_values"]["messages"] == [f"m{i}" for i in range(step + 1)]
    # blobs: only the kept checkpoints' versions (messages is a blob; step is inline)
    assert await _count(admin, schema, "tether_blobs", "t") == 2 * left
    assert await _count(admin, schema, "tether_writes", "t") == 2 * left
    assert len(await listing(mode, saver, make_config("other"))) == 3
    with pytest.raises(ConfigError):
        await call(mode, saver, "prune", ["t"], strategy="keep_last", keep=0)
    with pytest.raises(ConfigError):
        await call(mode, saver, "prune", "t")


async def test_with_allowlist_shares_storage(saver: PostgresSaver) -> None:
    clone = saver.with_allowlist([("x", "Y")])
    await chain("sync", clone, "t", 1)
    assert len(list(saver.list(None))) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_connection_without_autocommit_commits_every_operation(
    mode: str, pg_dsn: str, admin: psycopg.Connection[Any]
) -> None:
    """Reads end their transaction too: a write after a read is committed, not a savepoint."""
    from .conftest import fresh_schema

    schema = fresh_schema()
    q = f'"{schema}"'
    if mode == "sync":
        conn: Any = psycopg.connect(pg_dsn)
    else:
        conn = await psycopg.AsyncConnection.connect(pg_dsn)
    try:
        assert not conn.autocommit
        saver = PostgresSaver(conn, schema=schema)
        await call(mode, saver, "setup")
        configs = await chain(mode, saver, "t", 2)
        assert await call(mode, saver, "get_tuple", configs[-1]) is not None
        await listing(mode, saver, make_config("t"))
        cp = checkpoint({"step": 9}, {"step": "9"})
        latest = await call(mode, saver, "put", configs[-1], cp, {}, {"step": "9"})
        await call(mode, saver, "put_writes", latest, [("x", 1)], "task")
        seen = admin.execute(f"SELECT count(*) FROM {q}.tether_checkpoints").fetchone()
        assert seen == (3,)  # visible to another session: committed
        writes = admin.execute(f"SELECT count(*) FROM {q}.tether_writes").fetchone()
        assert writes == (1,)
        status = conn.info.transaction_status
        assert status == psycopg.pq.TransactionStatus.IDLE  # nothing left open
    finally:
        if mode == "sync":
            conn.close()
        else:
            await conn.close()


@pytest.mark.parametrize("mode", MODES)
async def test_a_key_too_large_for_an_index_is_a_config_error(mode: str, pg_dsn: str) -> None:
    """ProgramLimitExceeded is an OperationalError to psycopg, but no connection failed.

    It used to surface as StorageUnavailable ("retry") and was retried once. Names and
    run_id are bounded below what an index row holds (MAX_NAME_BYTES, checked before
    Postgres is asked, #20.3); an index of the user's own on a metadata key is not.
    """
    import os

    from psycopg import errors as pg_errors

    from tether.backends.postgres._errors import is_retryable

    from .conftest import aurl_saver, fresh_schema

    schema = fresh_schema()
    async with aurl_saver(pg_dsn, schema) as saver:
        huge = os.urandom(8000).hex()  # 16,000 characters that do not compress
        cp = checkpoint({"a": 1}, {"a": "1"})
        # run_id is indexed by tether: refused by the name limit, as on every backend
        with pytest.raises(ConfigError, match="bytes long") as info:
            await call(mode, saver, "put", make_config("t"), cp, {"run_id": huge}, {"a": "1"})
        assert info.value.__cause__ is None
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE INDEX ON \"{schema}\".tether_checkpoints ((metadata ->> 'k'))")
        meta = {"k": huge}
        with pytest.raises(ConfigError, match="too large for Postgres") as info:
            await call(mode, saver, "put", make_config("t"), cp, meta, {"a": "1"})
        assert isinstance(info.value.__cause__, pg_errors.ProgramLimitExceeded)
        assert not is_retryable(info.value.__cause__)
        assert len(str(info.value)) < 1000  # the thread id is not quoted whole
        await chain(mode, saver, "t", 2)  # the saver and its pool go on
        assert await listing(mode, saver, None, limit=5) != []

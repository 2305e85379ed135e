"""Odd arguments to every backend: a tether error or success, and the same answer from each.

Hypothesis builds configs, checkpoints, metadata, writes and filters from a
wide alphabet of values (wrong types, lone surrogates, NUL, integers beyond
64 bits, NaN, deep nesting, sets, bytes). The same call goes to the
in-memory, SQLite and Postgres savers. Each must either succeed or raise a
:class:`~tether.TetherError`, never another exception, and the three must
agree on which (so a thread stored in one can be copied into another). This
is how the lone-surrogate, 64-bit metadata and deep-nesting defects fixed in
December were found; it keeps finding that kind of defect.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tether import InMemorySaver, PostgresSaver, SqliteSaver, TetherError
from tether.serde import MsgpackSerializer

from .conftest import fresh_schema

pytestmark = pytest.mark.postgres


class _Label(str):
    """A str subclass, as labels and ids often are."""


class _Color(StrEnum):
    RED = "red"


_text = st.text(max_size=12)
# The str subclasses come through st.just(...).map(...): Hypothesis replays
# its choices (ints, floats, strings), and an enum among sampled_from's
# elements broke that replay.
_odd_text = st.one_of(
    st.sampled_from(["", "x\ud800", "a\x00b", "ü", "日本", " ", "__x"]),
    st.just("lab").map(_Label),
    st.just("red").map(_Color),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    # Integral floats of 1e16 and more are left out: JSON writes them in
    # exponent form and Postgres JSONB (numeric) gives them back as integers
    # (documented in docs/architecture.md, Postgres; LangGraph's store too).
    st.floats(allow_nan=True, allow_infinity=True).filter(
        lambda f: (
            not (f == f and abs(f) >= 1e16 and f == int(f))
            if f == f and abs(f) != float("inf")
            else True
        )
    ),
    _text,
    _odd_text,
    st.binary(max_size=4),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_text, _odd_text), inner, max_size=3),
        st.tuples(inner),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=6,
)
_good_name = st.sampled_from(["t", "u", "sub:1", "ü-日本"])
# Names at and past the length limit every backend shares (MAX_NAME_BYTES,
# MAX_NS_BYTES): stored by all three, or refused by all three.
_long_name = st.sampled_from(["x" * 512, "x" * 513, "é" * 256, "é" * 257, "y" * 1024, "y" * 3000])
# Mostly good names (so that calls get past the address and reach storage),
# the rest odd.
_name = st.one_of(
    _good_name,
    _good_name,
    _good_name,
    _text.filter(bool),
    _odd_text,
    _long_name,
    st.integers(),
    st.none(),
    st.lists(_text, max_size=1),
)
_good_version = st.one_of(
    st.integers(min_value=1, max_value=10**6),
    st.sampled_from(["00000000000000000000000000000001.0.5", "2"]),
)
_version = st.one_of(
    _good_version,
    _good_version,
    _good_version,
    st.sampled_from(["x.y", 2.5]),
    st.none(),
    st.lists(st.integers(), max_size=1),
    _odd_text,
)


@st.composite
def _config(draw: st.DrawFn) -> Any:
    conf = {"thread_id": draw(_name)}
    if draw(st.booleans()):
        conf["checkpoint_ns"] = draw(st.one_of(st.just(""), _name))
    if draw(st.booleans()):
        conf["checkpoint_id"] = draw(_name)
    extra = draw(
        st.dictionaries(st.sampled_from(["user", "__internal", "n"]), _scalars, max_size=2)
    )
    return draw(
        st.sampled_from(
            [{"configurable": {**conf, **extra}}, {"configurable": conf}] * 3 + ["t", None]
        )
    )


@st.composite
def _checkpoint(draw: st.DrawFn) -> Any:
    channels = draw(
        st.lists(st.one_of(_text.filter(bool), _odd_text, _long_name, st.integers()), max_size=3)
    )
    versions = {c: draw(_version) for c in channels}
    values = {c: draw(_json) for c in channels if draw(st.booleans())}
    cp: dict[str, Any] = {
        "v": 4,
        "id": draw(st.one_of(st.just("1f0a0000-0000-6000-8000-000000000001"), _name)),
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": draw(st.sampled_from([{}, {"n": dict(versions)}])),
        "updated_channels": draw(st.one_of(st.none(), st.just(sorted(map(str, channels))), _json)),
    }
    if draw(st.booleans()):
        cp["extra"] = draw(_json)  # unknown keys round-trip, if JSON
    return cp, dict(versions)


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except TetherError as exc:
        return type(exc).__name__, None
    # Anything else propagates: the test fails with the traceback.


def _serde() -> MsgpackSerializer:
    """The default serializer, allowing the test's enum: channel values may hold it
    (a type outside the allowlist is stored and refused on read, by design)."""
    return MsgpackSerializer(allowlist=[(_Color.__module__, "_Color")])


@pytest.fixture(scope="module")
def pg_schema() -> str:
    return fresh_schema()


@pytest.fixture(scope="module")
def savers(pg_dsn: str, pg_schema: str) -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteSaver(str(Path(tmp) / "odd.db"), serde=_serde())
        pg = PostgresSaver.from_conn_string(pg_dsn, schema=pg_schema, serde=_serde())
        pg.setup()
        try:
            yield {"memory": InMemorySaver(serde=_serde()), "sqlite": sqlite, "postgres": pg}
        finally:
            sqlite.close()
            pg.close()


def _same(results: dict[str, tuple[str, Any]]) -> None:
    kinds = {name: kind for name, (kind, _) in results.items()}
    assert len(set(kinds.values())) == 1, kinds


def _norm(value: Any) -> Any:
    """NaN != NaN; compare it as a marker."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def _types(value: Any) -> Any:
    """The shape of a value with its scalar types (an int must not come back a float)."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_types(v) for v in value]
    return type(value).__name__


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    config=_config(),
    checkpoint=_checkpoint(),
    metadata=st.one_of(
        st.dictionaries(
            st.sampled_from(["source", "step", "k"]),
            st.one_of(st.integers(), _text, st.booleans(), st.none()),
            max_size=3,
        ),
        st.dictionaries(st.one_of(_text, _odd_text, st.integers()), _json, max_size=3),
        _json,
    ),
    writes=st.one_of(
        st.lists(
            st.tuples(st.one_of(_text.filter(bool), _odd_text, st.integers()), _json), max_size=3
        ),
        _json,
    ),
    task_id=st.one_of(_text, _odd_text, _long_name, st.integers()),
    filter=st.one_of(
        st.none(), st.dictionaries(st.one_of(_text, st.integers()), _json, max_size=2)
    ),
)
def test_every_backend_refuses_or_stores_the_same_odd_input(
    savers: dict[str, Any],
    config: Any,
    checkpoint: Any,
    metadata: Any,
    writes: Any,
    task_id: Any,
    filter: Any,
) -> None:
    cp, new_versions = checkpoint
    put = {
        name: _outcome(lambda s=s: s.put(config, dict(cp), metadata, dict(new_versions)))
        for name, s in savers.items()
    }
    _same(put)
    kind = put["memory"][0]
    event(f"put: {kind}")
    if kind == "ok":
        got = {name: savers[name].get_tuple(put[name][1]) for name in savers}
        assert all(t is not None for t in got.values())
        metas = {name: _norm(t.metadata) for name, t in got.items()}
        assert metas["memory"] == metas["sqlite"] == metas["postgres"], metas
        types = {name: _types(t.metadata) for name, t in got.items()}
        assert types["memory"] == types["sqlite"] == types["postgres"], types
        heads = {name: _types(_norm(dict(t.checkpoint))) for name, t in got.items()}
        assert heads["memory"] == heads["sqlite"] == heads["postgres"], heads
        heads = {name: _norm(dict(t.checkpoint)) for name, t in got.items()}
        assert heads["memory"] == heads["sqlite"] == heads["postgres"], heads
        _same(
            {
                name: _outcome(lambda s=s, n=name: s.put_writes(put[n][1], writes, task_id))
                for name, s in savers.items()
            }
        )
        listed = {
            name: _outcome(lambda s=s, n=name: len(list(s.list(put[n][1], filter=filter))))
            for name, s in savers.items()
        }
        _same(listed)
        assert len({n for _, n in listed.values()}) == 1, listed
    _same({name: _outcome(lambda s=s: s.get_tuple(config)) for name, s in savers.items()})
    _same(
        {
            name: _outcome(lambda s=s: list(s.list(None, filter=filter, limit=3)) and None)
            for name, s in savers.items()
        }
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    op=st.sampled_from(["delete_thread", "copy_thread", "prune", "delete_for_runs"]),
    ids=st.one_of(st.lists(_name, max_size=3), _name, _json),
    other=_name,
    strategy=st.one_of(st.sampled_from(["keep_latest", "keep_last", "delete"]), _scalars),
    keep=st.one_of(st.integers(min_value=-2, max_value=3), _scalars),
)
def test_thread_operations_refuse_or_apply_odd_arguments_alike(
    savers: dict[str, Any], op: str, ids: Any, other: Any, strategy: Any, keep: Any
) -> None:
    def call(saver: Any) -> Any:
        if op == "delete_thread":
            return saver.delete_thread(ids)
        if op == "copy_thread":
            return saver.copy_thread(ids, other)
        if op == "prune":
            return saver.prune(ids, strategy=strategy, keep=keep)
        return saver.delete_for_runs(ids)

    results = {name: _outcome(lambda s=s: call(s)) for name, s in savers.items()}
    event(f"{op}: {results['memory'][0]}")
    _same(results)
    # and the stores still agree on what they hold
    held = {
        name: sorted(
            (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"])
            for t in s.list(None)
        )
        for name, s in savers.items()
    }
    assert held["memory"] == held["sqlite"] == held["postgres"], held


def _incompressible(n: int, seed: int) -> str:
    """``n`` ASCII characters no compressor shrinks (Postgres compresses long index keys)."""
    import random

    rng = random.Random(seed)
    return "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for _ in range(n)
    )


def test_names_at_the_length_limit_are_stored_and_copied_by_every_backend(
    savers: dict[str, Any],
) -> None:
    """The widest keys every backend accepts fit Postgres's index rows; one byte more is
    refused by all three (issue #20: SQLite and memory used to store what Postgres refused)."""
    from tether import MAX_NAME_BYTES, MAX_NS_BYTES, ConfigError

    tid = _incompressible(MAX_NAME_BYTES, 1)
    ns = _incompressible(MAX_NS_BYTES, 2)
    channel = _incompressible(MAX_NAME_BYTES, 3)
    version = _incompressible(MAX_NAME_BYTES, 4)
    task = _incompressible(MAX_NAME_BYTES, 5)
    copy_to = _incompressible(MAX_NAME_BYTES, 6)
    cp = {
        "v": 4,
        "id": "1f0a0000-0000-6000-8000-0000000000aa",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {channel: "x" * 1000},
        "channel_versions": {channel: version},
        "versions_seen": {},
        "updated_channels": None,
    }
    config = {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}
    for name, saver in savers.items():
        stored = saver.put(config, dict(cp), {}, {channel: version})
        saver.put_writes(stored, [(channel, "w")], task)
        saver.copy_thread(tid, copy_to)
        got = saver.get_tuple({"configurable": {"thread_id": copy_to, "checkpoint_ns": ns}})
        assert got is not None, name
        assert got.checkpoint["channel_values"] == {channel: "x" * 1000}, name
        assert got.pending_writes == [(task, channel, "w")], name
        for bad in (
            {"configurable": {"thread_id": tid + "x"}},
            {"configurable": {"thread_id": "t", "checkpoint_ns": ns + "x"}},
        ):
            with pytest.raises(ConfigError, match="bytes long"):
                saver.put(bad, dict(cp), {}, {channel: version})
        with pytest.raises(ConfigError, match="bytes long"):
            saver.put_writes(stored, [("c", 1)], task + "x")
        saver.delete_thread(tid)
        saver.delete_thread(copy_to)
        # run_id is an index key too (Postgres indexes metadata ->> 'run_id'):
        # the same limit, from metadata or from the config (#20.3)
        run = _incompressible(MAX_NAME_BYTES, 7)
        saver.put({"configurable": {"thread_id": tid}}, dict(cp), {"run_id": run}, {})
        saver.delete_for_runs([run])
        assert saver.get_tuple({"configurable": {"thread_id": tid}}) is None, name
        long_run = _incompressible(2800, 8)
        for conf, meta in (
            ({"configurable": {"thread_id": tid}}, {"run_id": long_run}),
            ({"configurable": {"thread_id": tid, "run_id": long_run}}, {}),
            ({"configurable": {"thread_id": tid}}, {"run_id": [long_run]}),
        ):
            with pytest.raises(ConfigError, match=r"run_id .* bytes long") as info:
                saver.put(conf, dict(cp), meta, {})
            assert long_run not in str(info.value)  # quoted in part, not whole
        assert saver.get_tuple({"configurable": {"thread_id": tid}}) is None, name
        # reads and deletes take an id of any length: the limit guards writes, and a
        # store written before it may hold a longer one (#20.3)
        past = _incompressible(3000, 9)
        assert saver.get_tuple({"configurable": {"thread_id": past}}) is None, name
        assert list(saver.list({"configurable": {"thread_id": past, "checkpoint_ns": ns}})) == []
        saver.delete_thread(past)
        saver.prune([past], strategy="delete")
        saver.delete_for_runs([long_run])
        with pytest.raises(ConfigError, match="bytes long"):
            saver.copy_thread(past, past + "x")


async def _aoutcome(coro: Any) -> tuple[str, Any]:
    try:
        return "ok", await coro
    except TetherError as exc:
        return type(exc).__name__, None


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=_config(), checkpoint=_checkpoint(), metadata=st.one_of(_json, st.just({})))
def test_the_async_methods_answer_odd_input_as_the_sync_ones(
    savers: dict[str, Any],
    pg_dsn: str,
    pg_schema: str,
    config: Any,
    checkpoint: Any,
    metadata: Any,
) -> None:
    """aput / aget_tuple / alist: a TetherError or success, as put / get_tuple / list do."""
    import asyncio

    cp, new_versions = checkpoint

    async def both() -> None:
        # An async pool belongs to its event loop: one per asyncio.run, same schema.
        async with PostgresSaver.from_conn_string(pg_dsn, schema=pg_schema, serde=_serde()) as apg:
            await each({**savers, "postgres": apg})

    async def each(targets: dict[str, Any]) -> None:
        for name, s in targets.items():
            sync = _outcome(lambda s=s: s.put(config, dict(cp), metadata, dict(new_versions)))
            kind, stored = await _aoutcome(s.aput(config, dict(cp), metadata, dict(new_versions)))
            assert kind == sync[0], (name, kind, sync)
            if kind == "ok":
                assert (await s.aget_tuple(stored)) is not None
                assert [t.config async for t in s.alist(stored)] == [stored]
            got = await _aoutcome(s.aget_tuple(config))
            assert got[0] == _outcome(lambda s=s: s.get_tuple(config))[0], name

    asyncio.run(both())

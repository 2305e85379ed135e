"""Property: every supported value, nested in dicts and lists, round-trips with its types."""

from __future__ import annotations

import collections
import decimal
import ipaddress
import pathlib
import uuid
import zoneinfo
from datetime import timedelta, timezone
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tether.serde import MsgpackSerializer

from . import models as m
from .test_roundtrip import _same

SERDE = MsgpackSerializer(allowlist=m.ALL)

text = st.text(max_size=20)
i64 = st.integers(-(2**63), 2**63 - 1)
hashable_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: beyond 64 bits too
    st.floats(allow_nan=False),
    text,
    st.binary(max_size=10),
    st.uuids(),
    st.decimals(allow_nan=False),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.datetimes(),
    st.datetimes(timezones=st.timezones()),
    st.datetimes(
        timezones=st.builds(timezone, st.timedeltas(-timedelta(hours=23), timedelta(hours=23)))
    ),
    st.sampled_from(list(m.Color) + list(m.Level)),
    st.builds(m.Point, st.integers(), st.integers()),
    st.builds(pathlib.PurePosixPath, text),
    st.ip_addresses(),
    st.sampled_from([zoneinfo.ZoneInfo("UTC"), zoneinfo.ZoneInfo("America/New_York")]),
)
hashables = st.recursive(
    hashable_scalars,
    lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
    max_leaves=6,
)
records = st.one_of(
    st.builds(m.Item, text, st.integers(-(2**63), 2**63 - 1), st.none() | text),
    st.builds(
        m.Frozen, st.uuids(), st.datetimes(timezones=st.timezones()), st.sampled_from(m.Color)
    ),
    st.builds(
        m.Person,
        name=text,
        age=st.integers(-(2**63), 2**63 - 1),
        address=st.builds(m.Address, city=text, zip=st.none() | text),
        tags=st.tuples(text, text),
    ),
    st.builds(m.Legacy, name=text, count=st.integers(-(2**63), 2**63 - 1)),
    st.builds(collections.deque, st.lists(hashables, max_size=3)),
    hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)),
)
values = st.recursive(
    st.one_of(hashables, records, st.sets(hashables, max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        # msgpack map keys are native ints: beyond 64 bits is an EncodeError
        st.dictionaries(st.one_of(text, i64, st.tuples(i64, text)), inner, max_size=4),
        st.tuples(inner, inner),
    ),
    max_leaves=12,
)


def _same_nan(got: Any, want: Any) -> bool:
    if isinstance(want, np.ndarray):
        return (
            isinstance(got, np.ndarray)
            and got.dtype == want.dtype
            and got.shape == want.shape
            and np.array_equal(got, want, equal_nan=want.dtype.kind in "fcmM")
        )
    if isinstance(want, dict) and type(got) is dict:
        return got.keys() == want.keys() and all(_same_nan(got[k], want[k]) for k in want)
    if isinstance(want, list | tuple) and type(got) is type(want):
        return len(got) == len(want) and all(
            _same_nan(a, b) for a, b in zip(got, want, strict=True)
        )
    return _same(got, want)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_round_trip(value: Any) -> None:
    got = SERDE.loads_typed(SERDE.dumps_typed(value))
    assert _same_nan(got, value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.one_of(
            st.none(),
            st.integers(-(2**63), 2**64 - 1),
            text,
            st.uuids(),
            st.dates(),
            st.builds(m.Item, text, st.integers(0, 9), st.none()),
            st.sets(st.integers(-(2**63), 2**63 - 1), max_size=3),
            st.decimals(allow_nan=False),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_tether_reads_langgraph_output(value: Any) -> None:
    official = JsonPlusSerializer(allowed_msgpack_modules=m.ALL)
    stored = official.dumps_typed(value)
    assert _same_nan(SERDE.loads_typed(stored), official.loads_typed(stored))


def test_strategies_cover_every_ext_code() -> None:
    """Guard against a strategy that silently stopped producing typed values."""
    seen: set[int] = set()
    samples = [
        uuid.UUID(int=1),
        pathlib.PurePosixPath("a"),
        m.Item("a", 1),
        decimal.Decimal(1),
        __import__("datetime").datetime(2020, 1, 1),
        m.Legacy(name="x"),
        m.Address(city="c"),
        np.arange(2),
        ipaddress.ip_address("::1"),
    ]
    import ormsgpack

    for v in samples:
        ormsgpack.unpackb(SERDE.dumps_typed(v)[1], ext_hook=lambda c, d: seen.add(c))
    assert seen == {0, 1, 2, 3, 4, 5, 6}

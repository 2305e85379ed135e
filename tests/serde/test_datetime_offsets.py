"""Datetimes whose UTC offset has microseconds (a ``timezone`` allows them).

The ISO form loses such an offset when it is under a second: CPython 3.11's
``datetime.fromisoformat`` reads ``"+00:00:00.000001"`` as UTC (found by
``test_hypothesis.py``). tether writes those datetimes in the keyword form it
uses for a ZoneInfo, which LangGraph reads too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tether.serde import MsgpackSerializer

OFFSETS = [
    timedelta(microseconds=1),
    timedelta(microseconds=-1),
    timedelta(seconds=1, microseconds=5),
    timedelta(hours=-5, microseconds=7),
]


@pytest.mark.parametrize("offset", OFFSETS, ids=str)
def test_sub_second_offsets_survive(offset: timedelta) -> None:
    serde = MsgpackSerializer()
    value = datetime(2000, 1, 1, 12, 30, tzinfo=timezone(offset))
    got = serde.loads_typed(serde.dumps_typed(value))
    assert got == value
    assert got.utcoffset() == offset
    official = JsonPlusSerializer().loads_typed(serde.dumps_typed(value))
    assert official == value
    assert official.utcoffset() == offset


def test_whole_second_offsets_keep_the_iso_form() -> None:
    """Unchanged wire format for every other datetime: the same bytes as LangGraph."""
    serde = MsgpackSerializer()
    for tz in (None, UTC, timezone(timedelta(hours=5, seconds=1))):
        value = datetime(2000, 1, 1, 12, 30, 0, 17, tzinfo=tz)
        assert serde.dumps_typed(value) == JsonPlusSerializer().dumps_typed(value)
        assert serde.loads_typed(serde.dumps_typed(value)) == value

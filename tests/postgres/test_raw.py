"""Statements sent with ``$n`` placeholders, converted once (``_raw``, #19 goal 7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg._queries
import pytest

from tether import PostgresSaver, make_config
from tether.backends.postgres._raw import positional

from .conftest import PlainSerializer, fresh_schema
from .helpers import MODES, call, chain, checkpoint


def test_named_placeholders_become_positional_in_first_appearance_order() -> None:
    text, args = positional(
        "SELECT %(b)s::int, %(a)s, %(b)s, 100 %% 7", {"a": "x", "b": 2, "unused": 3}
    )
    assert text == b"SELECT $1::int, $2, $1, 100 % 7"
    assert args == [2, "x"]


def test_positional_placeholders_keep_their_order() -> None:
    text, args = positional("SELECT %s, %s::text", ("a", None))
    assert text == b"SELECT $1, $2::text"
    assert args == ["a", None]


@pytest.mark.parametrize(
    ("query", "params", "error"),
    [
        ("SELECT %(a)s", {}, KeyError),
        ("SELECT %s, %s", ("a",), ValueError),
        ("SELECT %s", {"a": 1}, ValueError),
        ("SELECT %(a)s", ("a",), ValueError),
        ("SELECT %(a)s, %s", {"a": 1}, ValueError),
        ("SELECT 5 % 2, %s", (1,), ValueError),
    ],
)
def test_parameters_that_do_not_fit_are_refused(
    query: str, params: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        positional(query, params)


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The statements psycopg converted from its own placeholders (every execute
    through its ordinary cursors does, with a regex scan past 4,096 bytes)."""
    seen: list[bytes] = []
    for name in ("_query2pg", "_query2pg_nocache"):
        real = getattr(psycopg._queries, name)

        def counted(query: bytes, encoding: str, _real: Any = real) -> Any:
            seen.append(query)
            return _real(query, encoding)

        monkeypatch.setattr(psycopg._queries, name, counted)
    return seen


@pytest.fixture
def saver(pg_dsn: str) -> Iterator[PostgresSaver]:
    with PostgresSaver.from_conn_string(
        pg_dsn, schema=fresh_schema(), serde=PlainSerializer()
    ) as s:
        s.setup()
        yield s


@pytest.mark.parametrize("mode", MODES)
async def test_puts_writes_and_reads_leave_psycopg_nothing_to_convert(
    mode: str, saver: PostgresSaver, conversions: list[bytes]
) -> None:
    configs = await chain(mode, saver, "t", 2)
    # A put that names one channel only carries the other over: the longest
    # statement (blob rows, carried-over resolution, thread index), over 4 KB.
    cp = checkpoint(
        {"messages": ["m0", "m1", "m2"], "step": 2},
        {"messages": f"{3:032}.0", "step": f"{2:032}.0"},
    )
    last = await call(mode, saver, "put", configs[-1], cp, {"step": 2}, {"messages": f"{3:032}.0"})
    await call(mode, saver, "put_writes", last, [("x", 1), ("__error__", "boom")], "task")
    got = await call(mode, saver, "get_tuple", make_config("t"))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"messages": ["m0", "m1", "m2"], "step": 1}
    assert got.pending_writes == [("task", "__error__", "boom"), ("task", "x", 1)]
    assert [t.status for t in saver.threads()] == ["error"]
    assert conversions == []


def test_a_connection_with_its_own_cursor_class_keeps_it(pg_dsn: str) -> None:
    seen: list[str] = []

    class Logged(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            seen.append(str(query))
            return super().execute(query, params, **kwargs)

    with psycopg.connect(pg_dsn, autocommit=True, cursor_factory=Logged) as conn:
        s = PostgresSaver(conn, schema=fresh_schema(), serde=PlainSerializer())
        s.setup()
        seen.clear()
        s.put(make_config("t"), checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
        assert s.get_tuple(make_config("t")) is not None
    assert len(seen) == 2
    assert "%(thread_id)s" in seen[0]

"""The binary array parameters of puts and writes, read back by the real server."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.backends.postgres import _arrays
from tether.backends.postgres._arrays import BYTEA, INT2, INT4, TEXT


@pytest.fixture(scope="module")
def conn(pg_dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        yield c


def test_each_type_round_trips(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    row = conn.execute(
        "SELECT %s::text[], %s::bytea[], %s::smallint[], %s::integer[]",
        (
            TEXT(["a", None, "é\u2603", ""]),
            BYTEA([b"\x00\xff", b""]),
            INT2([0, -32768, 32767]),
            INT4([-(2**31), 2**31 - 1]),
        ),
    ).fetchone()
    assert row == (
        ["a", None, "é\u2603", ""],
        [b"\x00\xff", b""],
        [0, -32768, 32767],
        [-(2**31), 2**31 - 1],
    )


def test_empty_arrays_unnest_to_no_rows(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    rows = conn.execute(
        "SELECT * FROM unnest(%s::text[], %s::bytea[], %s::smallint[], %s::integer[])",
        (TEXT([]), BYTEA([]), INT2([]), INT4([])),
    ).fetchall()
    assert rows == []


def test_parallel_arrays_unnest_row_by_row(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    rows = conn.execute(
        "SELECT * FROM unnest(%s::text[], %s::bytea[], %s::smallint[])",
        (TEXT(["x", None]), BYTEA([b"1", b"22"]), INT2([1, 2])),
    ).fetchall()
    assert rows == [("x", b"1", 1), (None, b"22", 2)]


def test_out_of_range_integers_are_refused_before_sending() -> None:
    import struct

    with pytest.raises(struct.error):
        INT2([2**15])
    with pytest.raises(struct.error):
        INT4([2**31])


def test_a_connection_with_its_own_adapters_gets_the_dumpers(pg_dsn: str) -> None:
    # A connection that registered an adapter of its own has a private copy of
    # the adapters map: later global registrations do not reach it.
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.adapters.register_dumper(complex, psycopg.types.string.StrDumper)
        for cls, _ in _arrays._DUMPERS:
            c.adapters._dumpers[psycopg.adapt.PyFormat.BINARY].pop(cls, None)
            c.adapters._dumpers[psycopg.adapt.PyFormat.AUTO].pop(cls, None)
        with pytest.raises(psycopg.ProgrammingError, match="cannot adapt"):
            c.execute("SELECT %s::text[]", (TEXT(["a"]),))
        _arrays.ensure(c)
        assert c.execute("SELECT %s::text[]", (TEXT(["a"]),)).fetchone() == (["a"],)


# Any text a saver lets through: no NUL, no lone surrogate (check_text refuses
# both before a statement is built; test_names_no_backend_can_store_are_refused).
_STORABLE = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.none() | st.text(alphabet=_STORABLE)), blobs=st.lists(st.binary()))
def test_any_lists_round_trip(pg_dsn: str, texts: list[str | None], blobs: list[bytes]) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        got = c.execute("SELECT %s::text[], %s::bytea[]", (TEXT(texts), BYTEA(blobs))).fetchone()
    assert got == (texts, blobs)

"""Small primitive values kept in the checkpoint row (SQLite and Postgres), and when not.

The in-memory saver is the reference and keeps every value the same way; the
SQL savers keep small str/int/float/bool/None values in the row's JSON head
(``_records.inline_value``) under tether's serializer, and carry a parent's
over to its children, never from the caller's ``channel_values``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tether import PostgresSaver, SqliteSaver
from tether.backends._records import inline_value
from tether.base import BaseCheckpointSaver
from tether.checkpoint import copy_checkpoint, empty_checkpoint, make_config
from tether.ids import uuid6
from tether.serde import MsgpackSerializer

DSN = os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class Counting:
    """A serializer of the user's own (not tether's): counts the values it is given."""

    def __init__(self) -> None:
        self.inner = MsgpackSerializer()
        self.seen: list[Any] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.seen.append(obj)
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


Opener = Callable[..., Any]


@contextmanager
def _sqlite(tmp: Path, **options: Any) -> Iterator[tuple[BaseCheckpointSaver, Callable[[], int]]]:
    path = tmp / f"s{uuid6().hex[:8]}.db"
    with SqliteSaver(path, **options) as saver:

        def blobs() -> int:
            with sqlite3.connect(path) as conn:
                return int(conn.execute("SELECT count(*) FROM tether_blobs").fetchone()[0])

        yield saver, blobs


@contextmanager
def _postgres(tmp: Path, **options: Any) -> Iterator[tuple[BaseCheckpointSaver, Callable[[], int]]]:
    schema = f"inline_{uuid6().hex[:12]}"
    try:
        with PostgresSaver.from_conn_string(DSN, schema=schema, **options) as saver:
            saver.setup()

            def blobs() -> int:
                with psycopg.connect(DSN) as conn:
                    row = conn.execute(f'SELECT count(*) FROM "{schema}".tether_blobs').fetchone()
                    return int(row[0]) if row else 0

            yield saver, blobs
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


BACKENDS = {"sqlite": _sqlite, "postgres": pytest.param(_postgres, marks=pytest.mark.postgres)}


def _step(saver: BaseCheckpointSaver, config: Any, prev: Any, values: dict[str, Any]) -> Any:
    ckpt = empty_checkpoint() if prev is None else copy_checkpoint(prev)
    ckpt["id"] = str(uuid6())
    new = {}
    for channel, value in values.items():
        new[channel] = saver.get_next_version(ckpt["channel_versions"].get(channel), None)
        ckpt["channel_versions"][channel] = new[channel]
        ckpt["channel_values"][channel] = value
    return saver.put(config, ckpt, {}, new), ckpt


@pytest.mark.parametrize("backend", BACKENDS.values(), ids=list(BACKENDS))
def test_small_values_stay_in_the_row_and_carry_over(tmp_path: Path, backend: Opener) -> None:
    with backend(tmp_path) as (saver, blobs):
        first = {"n": 1, "s": "short", "f": 0.5, "b": True, "none": None, "big": [1] * 50}
        cfg, prev = _step(saver, make_config("t"), None, first)
        assert blobs() == 1  # only the list
        cfg, prev = _step(saver, cfg, prev, {"n": 2})
        # a caller's other value for a channel it does not name is not what is stored
        prev["channel_values"]["s"] = "lie"
        cfg, prev = _step(saver, cfg, prev, {"f": 1.5})
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {**first, "n": 2, "f": 1.5}
        got = tup.checkpoint["channel_values"]
        assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in first.items()}
        listed = list(saver.list(make_config("t")))
        assert [t.checkpoint["channel_values"]["n"] for t in listed] == [2, 2, 1]
        assert blobs() == 1


@pytest.mark.parametrize("backend", BACKENDS.values(), ids=list(BACKENDS))
def test_a_serializer_of_your_own_sees_every_value_by_default(
    tmp_path: Path, backend: Opener
) -> None:
    serde = Counting()
    with backend(tmp_path, serde=serde) as (saver, blobs):
        cfg, prev = _step(saver, make_config("t"), None, {"n": 1, "s": "secret"})
        cfg, prev = _step(saver, cfg, prev, {"n": 2})
        assert sorted(map(str, serde.seen)) == ["1", "2", "secret"]
        assert blobs() == 3
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"n": 2, "s": "secret"}


@pytest.mark.parametrize("backend", BACKENDS.values(), ids=list(BACKENDS))
def test_inline_primitives_false_stores_every_value_through_the_serializer(
    tmp_path: Path, backend: Opener
) -> None:
    with backend(tmp_path, inline_primitives=False) as (saver, blobs):
        cfg, prev = _step(saver, make_config("t"), None, {"n": 1, "s": "x"})
        cfg, prev = _step(saver, cfg, prev, {"n": 2})
        assert blobs() == 3
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"n": 2, "s": "x"}


@pytest.mark.parametrize(
    "value",
    [2**63, -(2**63) - 1, "x" * 257, "nul\x00", 1e16, -0.0, float("nan"), b"bytes", (1,)],
    ids=repr,
)
def test_values_json_would_change_are_not_inline(value: Any) -> None:
    assert not inline_value(value)


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), "x" * 256, 0.1, -2.5, 0, False, None])
def test_values_json_keeps_exactly_are_inline(value: Any) -> None:
    assert inline_value(value)

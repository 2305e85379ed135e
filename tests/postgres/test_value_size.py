"""``max_value_size`` on Postgres: refused at write and at read (issue #18.9).

A saver refuses to store a value larger than its ``max_value_size``
(EncodeError, nothing written), and a saver with a smaller limit refuses to
read one that another saver stored (StorageError): compressed, before it is
decompressed; stored plain, after the fact.
"""

from __future__ import annotations

import random

import pytest

from tether import EncodeError, PostgresSaver, StorageError, make_config

from .conftest import fresh_schema
from .helpers import checkpoint

pytestmark = pytest.mark.postgres

LIMIT = 4096


def _open(pg_dsn: str, schema: str, **kwargs: object) -> PostgresSaver:
    return PostgresSaver.from_conn_string(pg_dsn, schema=schema, pool_timeout=10.0, **kwargs)  # type: ignore[arg-type]


def _put(saver: PostgresSaver, thread_id: str, value: bytes) -> None:
    versions = {"blob": saver.get_next_version(None)}
    saver.put(make_config(thread_id), checkpoint({"blob": value}, versions), {}, versions)


def test_a_value_over_max_value_size_is_refused_at_write(pg_dsn: str) -> None:
    schema = fresh_schema()
    with _open(pg_dsn, schema, max_value_size=LIMIT) as saver:
        saver.setup()
        with pytest.raises(EncodeError, match="max_value_size"):
            _put(saver, "t", b"x" * (LIMIT + 1000))
        assert list(saver.list(None)) == []
        _put(saver, "t", b"x" * (LIMIT - 100))  # under the limit: stored and read back
        got = saver.get_tuple(make_config("t"))
        assert got is not None
        assert got.checkpoint["channel_values"]["blob"] == b"x" * (LIMIT - 100)


@pytest.mark.parametrize("stored", ["compressed", "plain"])
async def test_a_value_over_max_value_size_is_refused_at_read(pg_dsn: str, stored: str) -> None:
    schema = fresh_schema()
    # a compressible value is stored zstd-compressed, random bytes plain
    value = b"x" * 50_000 if stored == "compressed" else random.Random(1).randbytes(50_000)
    with _open(pg_dsn, schema) as writer:
        writer.setup()
        _put(writer, "t", value)
        got = writer.get_tuple(make_config("t"))
        assert got is not None
        assert got.checkpoint["channel_values"]["blob"] == value
    with _open(pg_dsn, schema, max_value_size=LIMIT) as reader:
        with pytest.raises(StorageError, match="max_value_size") as info:
            reader.get_tuple(make_config("t"))
        assert "'blob'" in str(info.value)
    # async code closes with aclose(): its pool belongs to this loop
    async with _open(pg_dsn, schema, max_value_size=LIMIT) as reader:
        with pytest.raises(StorageError, match="max_value_size"):
            await reader.aget_tuple(make_config("t"))

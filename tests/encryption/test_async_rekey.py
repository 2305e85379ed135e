"""An async rekey and copy on Postgres seal in a worker thread, never on the event loop (#17).

The async core hands each batch's sealing (``blob_updates`` and its siblings,
pure CPU) to ``asyncio.to_thread``; psycopg's own adaptation of a batch of
large payloads, which took the loop hundreds of milliseconds, is avoided by
framing them in binary. What the loop is spared is measured in
``bench/bench_encryption.py``; here, where the work runs.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tether import PostgresSaver
from tether.backends.postgres import _async

from ..postgres.conftest import fresh_schema
from .helpers import fill, ring, snapshot

pytestmark = pytest.mark.postgres


def test_async_rekey_and_copy_seal_off_the_event_loop(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = fresh_schema()
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema, encryption=ring("k1")) as saver:
        saver.setup()
        for t in range(3):
            fill(saver, f"t{t}", 3)
        before = {f"t{t}": snapshot(saver, f"t{t}") for t in range(3)}
    where: dict[str, set[int]] = {}
    for name in ("blob_updates", "write_updates", "meta_updates", "head_updates"):
        real = getattr(_async, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            where.setdefault(_name, set()).add(threading.get_ident())
            return _real(*args, **kwargs)

        monkeypatch.setattr(_async, name, spy)

    async def main() -> tuple[int, int]:
        saver = PostgresSaver.from_conn_string(pg_dsn, schema=schema, encryption=ring("k2", "k1"))
        try:
            done = await saver.arekey("k2", batch=4)
            await saver.acopy_thread("t0", "copy")
            return done, threading.get_ident()
        finally:
            await saver.aclose()
            saver.close()

    done, loop_thread = asyncio.run(main())
    assert done > 0
    assert set(where) == {"blob_updates", "write_updates", "meta_updates", "head_updates"}
    assert all(loop_thread not in idents for idents in where.values()), where
    with PostgresSaver.from_conn_string(pg_dsn, schema=schema, encryption=ring("k2")) as saver:
        assert saver.rekey_pending() == 0
        assert {t: snapshot(saver, t) for t in before} == before
        assert len(snapshot(saver, "copy")) == 3

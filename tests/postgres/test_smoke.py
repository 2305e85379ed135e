from __future__ import annotations

import pytest

from tether import empty_checkpoint, make_config
from tether.backends.postgres import PostgresSaver

pytestmark = pytest.mark.postgres


def test_put_get(saver: PostgresSaver) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": [1, 2], "b": "x", "c": 1.5}
    cp["channel_versions"] = {"a": "1", "b": "1", "c": "1"}
    cfg = saver.put(
        make_config("t1"), cp, {"source": "input", "step": -1}, {"a": "1", "b": "1", "c": "1"}
    )
    saver.put_writes(cfg, [("a", 1), ("__error__", "boom")], "task1")
    tup = saver.get_tuple(make_config("t1"))
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": [1, 2], "b": "x", "c": 1.5}
    assert tup.pending_writes == [("task1", "__error__", "boom"), ("task1", "a", 1)]
    assert [t.config for t in saver.list(make_config("t1"))] == [cfg]


async def test_async_put_get(asaver: PostgresSaver) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"a": [1, 2]}
    cp["channel_versions"] = {"a": "1"}
    cfg = await asaver.aput(make_config("t1"), cp, {}, {"a": "1"})
    tup = await asaver.aget_tuple(cfg)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": [1, 2]}
    assert [t.config async for t in asaver.alist(None)] == [cfg]

"""LangGraph's own conformance suite against every tether drop-in saver.

Run twice per backend: through the async methods (what the suite calls), and
through the sync methods, by a test-only subclass whose async methods run the
sync ones in a worker thread. Every capability must be detected and pass.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from tether.langgraph import TetherLangGraphSaver

from .savers import BACKENDS, aopen_saver

_seq = itertools.count()


class SyncThroughThreads(TetherLangGraphSaver):
    """Routes every async method to its sync twin in a worker thread."""

    def __init__(self, inner: TetherLangGraphSaver) -> None:
        super().__init__(inner.saver)

    async def aget_tuple(self, config: Any) -> Any:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(  # type: ignore[override]
        self, config: Any, *, filter: Any = None, before: Any = None, limit: Any = None
    ) -> AsyncIterator[Any]:
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Any, writes: Sequence[Any], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep: int = 1
    ) -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy, keep=keep)


# The full report of langgraph-checkpoint-conformance 0.0.2 (pinned): every
# capability detected, each suite's test count, nothing failed or skipped.
# A newer release with more tests changes the counts here on purpose.
EXPECTED_REPORT = {
    "put": (True, True, 17, 0, 0),
    "put_writes": (True, True, 10, 0, 0),
    "get_tuple": (True, True, 10, 0, 0),
    "list": (True, True, 16, 0, 0),
    "delete_thread": (True, True, 5, 0, 0),
    "delete_for_runs": (True, True, 7, 0, 0),
    "copy_thread": (True, True, 8, 0, 0),
    "prune": (True, True, 8, 0, 0),
}


def _summary(report: Any) -> dict[str, tuple[bool, bool | None, int, int, int]]:
    return {
        cap: (res.detected, res.passed, res.tests_passed, res.tests_failed, res.tests_skipped)
        for cap, res in report.results.items()
    }


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("backend", BACKENDS)
async def test_conformance_full(
    backend: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def factory() -> AsyncIterator[TetherLangGraphSaver]:
        # A fresh store per capability suite, as the suite expects.
        sub = tmp_path / f"suite{next(_seq)}"
        sub.mkdir()
        async with aopen_saver(backend, sub, request) as saver:
            yield SyncThroughThreads(saver) if mode == "sync" else saver

    registered = checkpointer_test(name=f"tether-{backend}-{mode}")(factory)
    report = await validate(registered)

    failures = {cap: res.failures for cap, res in report.results.items() if res.passed is not True}
    assert failures == {}
    assert set(report.results) == {c.value for c in ALL_CAPABILITIES}
    assert _summary(report) == EXPECTED_REPORT
    assert report.conformance_level() == "FULL"

"""tether's InMemorySaver vs LangGraph's InMemorySaver, in one run.

    python -m bench memory            (or: python -m bench.bench_memory [--quick])

W1 chat (N = 100, 300) and W2 (2,000 threads x 5) from :mod:`bench._workloads`,
and W2's put and ``get_tuple`` of one tiny state in microseconds (1,000 of
each per round, the savers in alternating order, median of the rounds).
tether's in-memory saver serializes everything it stores (no aliasing, the
same allowlist as the persistent backends), as LangGraph's does for values.
Ratios are official / tether (above 1: tether is faster or smaller).
The tiny-state rows have a ``floor`` column: :class:`FloorSaver`, a put and
get_tuple that check nothing and copy no value, timed in the same rounds; no
saver that checks its input can go below it.

Each workload runs once untimed for both savers before it is measured: the
first saver to run in a fresh process otherwise pays for growing the heap
(the first measured run was up to 1.5x slower whichever saver it was). Both
savers then run interleaved (:func:`bench._workloads.w1_pair`, ``w2_pair``):
run one after the other, the second met the heap the first had grown, and
the order alone moved W2's ratio from 1.25 to 0.85 on a quiet machine.
``retained_mb`` is what the saver holds after W1's writes (tracemalloc, in a
separate untimed pass).
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver as OfficialInMemorySaver

from bench._workloads import _advance, _checkpoint, _message, ratio, w1_pair, w2_pair
from tether import InMemorySaver
from tether.versions import next_str_version

RESULTS = Path(__file__).resolve().parent / "results"


def _retained_mb(factory: Callable[[], Any], n: int) -> float:
    """MB a saver holds after W1's N writes (its own objects only)."""

    def write() -> Any:
        saver = factory()
        cfg: dict[str, Any] = {"configurable": {"thread_id": "w1", "checkpoint_ns": ""}}
        prev = None
        messages: list[dict[str, Any]] = []
        for i in range(n):
            ckpt = _checkpoint(prev)
            messages = [*messages, _message(i)]
            values = {"messages": messages, "step": i, "status": f"step {i} done"}
            nv = _advance(saver, ckpt, values)
            cfg = saver.put(cfg, ckpt, {"source": "loop", "step": i, "parents": {}}, nv)
            saver.put_writes(cfg, [("messages", [_message(i)]), ("step", i)], f"task-{i}")
            prev = ckpt
        return saver

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        saver = write()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        del saver
    finally:
        tracemalloc.stop()
    return held / 1e6


class FloorSaver:
    """The least an in-memory put and get_tuple can do: the ``floor`` of the tiny-state rows.

    put copies the checkpoint's head, packs it and the metadata, stores the
    values themselves (no copy: a caller's later change to a value would
    reach the store) and returns the config; get_tuple unpacks them again.
    No input is checked, no version normalized, nothing else kept. A saver
    that validates its input, as tether's does, cannot get below it, so
    ``langgraph / floor`` bounds the ratio any such saver could reach.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str, str], tuple[bytes, bytes, str | None]] = {}
        self._blobs: dict[tuple[str, str, str, Any], Any] = {}
        self._latest: dict[tuple[str, str], str] = {}

    def get_next_version(self, current: Any, channel: Any) -> str:
        return next_str_version(current)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        tid, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        head = dict(checkpoint)
        values = head.pop("channel_values")
        data, meta = ormsgpack.packb(head), ormsgpack.packb(metadata)
        with self._lock:
            for channel, version in new_versions.items():
                self._blobs[(tid, ns, channel, version)] = values.get(channel)
            self._rows[(tid, ns, head["id"])] = (data, meta, conf.get("checkpoint_id"))
            self._latest[(tid, ns)] = head["id"]
        return {
            "configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": head["id"]}
        }

    def get_tuple(self, config: Any) -> CheckpointTuple:
        conf = config["configurable"]
        tid, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        with self._lock:
            cid = conf.get("checkpoint_id") or self._latest[(tid, ns)]
            data, meta, parent = self._rows[(tid, ns, cid)]
            head = ormsgpack.unpackb(data)
            blobs = self._blobs
            head["channel_values"] = {
                channel: blobs[(tid, ns, channel, version)]
                for channel, version in head["channel_versions"].items()
            }
        address = {"thread_id": tid, "checkpoint_ns": ns}
        return CheckpointTuple(
            {"configurable": {**address, "checkpoint_id": cid}},
            head,
            ormsgpack.unpackb(meta),
            {"configurable": {**address, "checkpoint_id": parent}} if parent else None,
            [],
        )


def _put_get_us(saver: Any, thread_id: str, n: int) -> tuple[float, float]:
    """Mean microseconds of ``n`` W2 puts (three tiny channels) and ``n`` reads of the latest."""
    clock = time.perf_counter
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    prev = None
    spent = 0.0
    for i in range(n):
        ckpt = _checkpoint(prev)
        new_versions = _advance(saver, ckpt, {"step": i, "user": "user-1", "flag": i % 2 == 0})
        metadata = {"source": "loop", "step": i, "parents": {}}
        t0 = clock()
        cfg = saver.put(cfg, ckpt, metadata, new_versions)
        spent += clock() - t0
        prev = ckpt
    get = saver.get_tuple
    t0 = clock()
    for _ in range(n):
        get(cfg)
    return spent / n * 1e6, (clock() - t0) / n * 1e6


def put_get(rounds: int, n: int) -> dict[str, dict[str, float]]:
    """put / get_tuple / both, each saver's median over ``rounds`` rounds taken in turns."""
    savers = {
        "tether": InMemorySaver(),
        "langgraph": OfficialInMemorySaver(),
        "floor": FloorSaver(),
    }
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in savers}
    for r in range(rounds + 1):
        for name in list(savers) if r % 2 == 0 else list(savers)[::-1]:
            gc.collect()
            result = _put_get_us(savers[name], f"pg-{r}", n)
            if r:  # round 0 warms both up
                got[name].append(result)
    return {
        name: {
            "put_us": statistics.median(p for p, _ in runs),
            "get_us": statistics.median(g for _, g in runs),
            "put_get_us": statistics.median(p + g for p, g in runs),
        }
        for name, runs in got.items()
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = [50, 100] if quick else [100, 300]
    threads = 200 if quick else 2000
    rows: list[dict[str, Any]] = []
    for n in sizes:
        w1_pair({"tether": InMemorySaver(), "langgraph": OfficialInMemorySaver()}, n, "warm-up")
        got = w1_pair({"tether": InMemorySaver(), "langgraph": OfficialInMemorySaver()}, n)
        t, o = got["tether"], got["langgraph"]
        for metric in ("step_ms", "get_ms", "list_ms"):
            rows.append(
                {
                    "workload": f"W1 chat N={n}",
                    "metric": metric,
                    "tether": round(t[metric], 3),
                    "langgraph": round(o[metric], 3),
                    "ratio": ratio(o[metric], t[metric]),
                }
            )
        t_mb = _retained_mb(InMemorySaver, n)
        o_mb = _retained_mb(OfficialInMemorySaver, n)
        rows.append(
            {
                "workload": f"W1 chat N={n}",
                "metric": "retained_mb",
                "tether": round(t_mb, 2),
                "langgraph": round(o_mb, 2),
                "ratio": ratio(o_mb, t_mb),
            }
        )
    # Interleaved thread by thread (as the Postgres and SQLite W2 are): run one
    # after the other, the second saver met the heap the first had grown, and
    # the order alone moved the ratio by 0.1-0.2 on a quiet machine.
    w2_pair({"tether": InMemorySaver(), "langgraph": OfficialInMemorySaver()}, threads)
    got = w2_pair({"tether": InMemorySaver(), "langgraph": OfficialInMemorySaver()}, threads)
    t, o = got["tether"], got["langgraph"]
    rows.append(
        {
            "workload": f"W2 {threads} threads x 5",
            "metric": "puts_per_s",
            "tether": round(t["puts_per_s"]),
            "langgraph": round(o["puts_per_s"]),
            "ratio": ratio(t["puts_per_s"], o["puts_per_s"]),
        }
    )
    pg = put_get(rounds=3 if quick else 9, n=300 if quick else 1000)
    for metric in ("put_us", "get_us", "put_get_us"):
        t_us, o_us = pg["tether"][metric], pg["langgraph"][metric]
        rows.append(
            {
                "workload": "W2 one tiny state",
                "metric": metric,
                "tether": round(t_us, 2),
                "langgraph": round(o_us, 2),
                "ratio": ratio(o_us, t_us),
                "floor": round(pg["floor"][metric], 2),
            }
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "memory.json").write_text(json.dumps({"quick": quick, "rows": rows}, indent=2))
    return rows


if __name__ == "__main__":
    from bench.__main__ import table

    print(table(run(quick="--quick" in sys.argv)))

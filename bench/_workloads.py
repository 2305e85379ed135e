"""The workloads every saver benchmark runs, against any saver with the LangGraph API.

Both tether's savers and LangGraph's official ones take the same calls
(``put``, ``put_writes``, ``get_tuple``, ``list``, ``get_next_version``) and the
same v4 checkpoint dicts, so one driver times both in the same process run.

W1 "chat": one thread of N steps. Each step appends one ~500-byte message dict
to the ``messages`` list channel and updates two small channels (``step``,
``status``), then stores the task's writes, as a graph step does. The
checkpoint carries the whole state (as LangGraph's loop hands it over).

W2 "many threads": T threads x 5 checkpoints of a few small channels.

Only the saver's own calls are timed, as a graph loop makes them:
``get_next_version`` per changed channel, ``put`` and (W1) ``put_writes``. The
harness's work (building checkpoint dicts, uuid6 ids, message dicts) is done
outside the timed region, so it dilutes neither saver's figure.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from tether.ids import uuid6

Saver = Any


def _message(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega"]) for _ in range(70))
    return {
        "type": "ai" if i % 2 else "human",
        "id": f"msg-{i:06d}",
        "content": words[:430],
        "additional_kwargs": {},
        "response_metadata": {"model": "m-1", "tokens": 120 + i % 17},
    }


def _checkpoint(prev: dict[str, Any] | None) -> dict[str, Any]:
    if prev is None:
        return {
            "v": 4,
            "id": str(uuid6()),
            "ts": "2026-12-02T00:00:00+00:00",
            "channel_values": {},
            "channel_versions": {},
            "versions_seen": {},
            "updated_channels": None,
        }
    return {
        "v": 4,
        "id": str(uuid6()),
        "ts": prev["ts"],
        "channel_values": dict(prev["channel_values"]),
        "channel_versions": dict(prev["channel_versions"]),
        "versions_seen": {k: dict(v) for k, v in prev["versions_seen"].items()},
        "updated_channels": None,
    }


def _advance(saver: Saver, ckpt: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    new_versions = {}
    for channel, value in values.items():
        version = saver.get_next_version(ckpt["channel_versions"].get(channel), None)
        ckpt["channel_versions"][channel] = version
        ckpt["channel_values"][channel] = value
        new_versions[channel] = version
    ckpt["updated_channels"] = sorted(values)
    ckpt["versions_seen"]["agent"] = dict(ckpt["channel_versions"])
    return new_versions


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def w1_steps(saver: Saver, n: int, thread_id: str = "w1") -> Iterator[float]:
    """W1's writes, one step per ``next()``; yields the seconds the saver took for it.

    A step is what the saver does for one graph step: ``get_next_version`` for
    the three changed channels, ``put`` and ``put_writes``.
    """
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    prev = None
    messages: list[dict[str, Any]] = []
    for i in range(n):
        ckpt = _checkpoint(prev)
        messages = [*messages, _message(i)]
        values = {"messages": messages, "step": i, "status": f"step {i} done"}
        metadata = {"source": "loop", "step": i, "parents": {}}
        writes = [("messages", [_message(i)]), ("step", i)]
        task_id = f"task-{i}"
        t0 = time.perf_counter()
        new_versions = _advance(saver, ckpt, values)
        cfg = saver.put(cfg, ckpt, metadata, new_versions)
        saver.put_writes(cfg, writes, task_id)
        yield time.perf_counter() - t0
        prev = ckpt


def w1_reads(saver: Saver, n: int, steps: list[float], thread_id: str = "w1") -> dict[str, float]:
    """W1's figures once its ``n`` steps are written: step median/p95, get_tuple, list."""
    steps = sorted(steps)
    latest = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    got = saver.get_tuple(latest)
    assert len(got.checkpoint["channel_values"]["messages"]) == n
    listed = len(list(saver.list(latest)))
    assert listed == n, listed
    return {
        "step_ms": statistics.median(steps) * 1000,
        "step_p95_ms": steps[int(len(steps) * 0.95) - 1] * 1000,
        "get_ms": median_ms(lambda: saver.get_tuple(latest), 21),
        "list_ms": median_ms(lambda: sum(1 for _ in saver.list(latest)), 5 if n <= 300 else 3),
    }


def alternate(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median ms of each call, the calls taken in turns (A B, B A, ...).

    Timing one saver's reads in a block and then the other's lets the
    process's state (heap size, garbage-collector generations, CPU frequency,
    other load) differ between the blocks; in turns they share it.
    """
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) * 1000 for name, ts in times.items()}


def w1_pair(savers: dict[str, Saver], n: int, thread_id: str = "w1") -> dict[str, dict[str, float]]:
    """W1 on several savers at once: steps interleaved, reads taken in turns."""
    steps = interleave({name: w1_steps(s, n, thread_id) for name, s in savers.items()})
    latest = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    out: dict[str, dict[str, float]] = {}
    for name, saver in savers.items():
        got = saver.get_tuple(latest)
        assert len(got.checkpoint["channel_values"]["messages"]) == n
        assert len(list(saver.list(latest))) == n
        ordered = sorted(steps[name])
        out[name] = {
            "step_ms": statistics.median(ordered) * 1000,
            "step_p95_ms": ordered[int(len(ordered) * 0.95) - 1] * 1000,
        }
    gets = alternate({name: lambda s=s: s.get_tuple(latest) for name, s in savers.items()}, 42)
    lists = alternate(
        {name: lambda s=s: sum(1 for _ in s.list(latest)) for name, s in savers.items()},
        6 if n <= 300 else 4,
    )
    for name in savers:
        out[name]["get_ms"] = gets[name]
        out[name]["list_ms"] = lists[name]
    return out


def w1_chat(saver: Saver, n: int, thread_id: str = "w1") -> dict[str, float]:
    """Write N steps; returns per-step median/p95 ms, get_tuple ms, full-history list ms."""
    return w1_reads(saver, n, list(w1_steps(saver, n, thread_id)), thread_id)


def w2_puts(saver: Saver, threads: int, per_thread: int = 5) -> Iterator[float]:
    """W2's puts, one thread's ``per_thread`` puts per ``next()``; yields their seconds.

    Timed per put: ``get_next_version`` for the three channels and ``put``.
    """
    clock = time.perf_counter
    for t in range(threads):
        cfg: dict[str, Any] = {"configurable": {"thread_id": f"w2-{t}", "checkpoint_ns": ""}}
        prev = None
        elapsed = 0.0
        for i in range(per_thread):
            ckpt = _checkpoint(prev)
            values = {"step": i, "user": f"user-{t}", "flag": i % 2 == 0}
            metadata = {"source": "loop", "step": i, "parents": {}}
            t0 = clock()
            nv = _advance(saver, ckpt, values)
            cfg = saver.put(cfg, ckpt, metadata, nv)
            elapsed += clock() - t0
            prev = ckpt
        yield elapsed


def w2_pair(
    savers: dict[str, Saver], threads: int, per_thread: int = 5
) -> dict[str, dict[str, float]]:
    """W2 on several savers at once: puts interleaved, get_tuple latencies taken in turns."""
    puts = interleave({name: w2_puts(s, threads, per_thread) for name, s in savers.items()})
    rng = random.Random(1)
    picks = [f"w2-{rng.randrange(threads)}" for _ in range(200)]
    times: dict[str, list[float]] = {name: [] for name in savers}
    names = list(savers)
    for i, tid in enumerate(picks):
        cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        for name in names if i % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            got = savers[name].get_tuple(cfg)
            times[name].append(time.perf_counter() - t0)
            assert got is not None
    return {
        name: {
            "puts_per_s": threads * per_thread / sum(puts[name]),
            "get_ms": statistics.median(times[name]) * 1000,
        }
        for name in savers
    }


def interleave(steppers: dict[str, Iterator[float]]) -> dict[str, list[float]]:
    """Advance several savers' workloads in turns; each one's timings, in order.

    The order alternates (A B, B A, ...) so that neither side always runs right
    after the other. For a server whose commits wait for a disk flush, the two
    sides then see the same disk, step by step, instead of one run meeting a
    quiet disk and the other a busy one.
    """
    names = list(steppers)
    out: dict[str, list[float]] = {name: [] for name in names}
    turn = 0
    while True:
        order = names if turn % 2 == 0 else names[::-1]
        progressed = False
        for name in order:
            value = next(steppers[name], None)
            if value is not None:
                out[name].append(value)
                progressed = True
        if not progressed:
            return out
        turn += 1


def ratio(official: float, tether: float) -> float:
    return round(official / tether, 2) if tether else float("inf")


def row(workload: str, metric: str, t: float, o: float, higher_is_better: bool) -> dict[str, Any]:
    """One table row: both figures and the ratio oriented so that above 1 favours tether."""
    digits = 0 if abs(t) >= 1000 else 3
    return {
        "workload": workload,
        "metric": metric,
        "tether": round(t, digits),
        "langgraph": round(o, digits),
        "ratio": ratio(t, o) if higher_is_better else ratio(o, t),
    }


def w3_fill(saver: Saver, n: int, thread_id: str = "w3") -> None:
    """W3's history: N checkpoints of a few small channels, each with three pending writes."""
    cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    prev = None
    for i in range(n):
        ckpt = _checkpoint(prev)
        nv = _advance(saver, ckpt, {"step": i, "route": f"node-{i % 4}", "done": False})
        cfg = saver.put(cfg, ckpt, {"source": "loop", "step": i, "parents": {}}, nv)
        saver.put_writes(cfg, [("step", i), ("route", "x"), ("done", i % 2 == 0)], f"task-{i}")
        prev = ckpt
    latest = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    got = list(saver.list(latest))
    assert len(got) == n
    assert all(len(t.pending_writes) == 3 for t in got)


def w3_history(saver: Saver, n: int, thread_id: str = "w3") -> dict[str, float]:
    """W3 filled, then the time to list it all (median ms)."""
    w3_fill(saver, n, thread_id)
    latest = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return {"list_ms": median_ms(lambda: sum(1 for _ in saver.list(latest)), 7)}

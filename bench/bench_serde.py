"""tether's MsgpackSerializer vs LangGraph's JsonPlusSerializer, in one run.

    python -m bench.bench_serde [--quick]

Five payloads: 200 chat-message dicts, 200 LangChain messages (what a
LangGraph ``add_messages`` state holds), 50 nested Pydantic v2 models, a
dataclass tree with datetimes / UUIDs / enums, and a 1 MB NumPy array. dumps
and loads are timed separately: the median of many repeats (each repeat times
a batch of calls with ``time.perf_counter``). tether's and LangGraph's batches
alternate (in alternating order), so a change in the machine's load during
the run falls on both rather than on whichever ran second. The ratio is
official / tether, so above 1 means tether is faster. Results go to
``bench/results/serde.json``.

LangGraph's serializer runs in its strict mode (``allowed_msgpack_modules``
with the payload types), the setting comparable to tether's allowlist; its
permissive default is also slowed by a warning per unregistered type.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tether.serde import MsgpackSerializer

RESULTS = Path(__file__).resolve().parent / "results"


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class Address(pydantic.BaseModel):
    street: str
    city: str
    zip: str


class Customer(pydantic.BaseModel):
    id: int
    name: str
    email: str
    tags: list[str]
    address: Address
    score: float


@dataclasses.dataclass
class Event:
    id: uuid.UUID
    at: datetime
    role: Role
    text: str


@dataclasses.dataclass
class Session:
    id: uuid.UUID
    started: datetime
    events: list[Event]
    children: list[Session]


def _messages() -> dict[str, Any]:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    msgs = [
        {
            "role": "user" if i % 2 else "assistant",
            "content": ("lorem ipsum dolor sit amet " * 15)[:400],
            "id": str(uuid.UUID(int=i)),
            "created_at": (base + timedelta(seconds=i)).isoformat(),
            "updated_at": (base + timedelta(seconds=i + 1)).isoformat(),
        }
        for i in range(200)
    ]
    return {"messages": msgs}


def _langchain_messages() -> list[Any]:
    text = ("lorem ipsum dolor sit amet " * 15)[:400]
    return [
        HumanMessage(f"{i}: {text}", id=f"h{i}")
        if i % 2 == 0
        else AIMessage(
            f"answer {i}",
            id=f"a{i}",
            response_metadata={"finish_reason": "stop", "model_name": "m"},
        )
        for i in range(200)
    ]


def _customers() -> list[Customer]:
    return [
        Customer(
            id=i,
            name=f"customer {i}",
            email=f"c{i}@example.com",
            tags=["a", "b", "c"],
            address=Address(street=f"{i} main st", city="Springfield", zip="12345"),
            score=i / 3,
        )
        for i in range(50)
    ]


def _session(depth: int = 3, width: int = 3) -> Session:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    events = [
        Event(uuid.UUID(int=i), base + timedelta(minutes=i), Role.USER, f"event {i}")
        for i in range(10)
    ]
    children = [_session(depth - 1, width) for _ in range(width)] if depth > 0 else []
    return Session(uuid.UUID(int=depth), base, events, children)


def _array() -> Any:
    return np.random.default_rng(0).random(131072)  # 131072 float64 = 1 MiB


PAYLOADS: dict[str, Callable[[], Any]] = {
    "chat messages (200 dicts)": _messages,
    "langchain messages (200)": _langchain_messages,
    "pydantic v2 (50 nested models)": _customers,
    "dataclass tree (datetime/UUID/enum)": _session,
    "numpy array (1 MiB)": _array,
}

ALLOW = [
    (__name__, "Role"),
    (__name__, "Address"),
    (__name__, "Customer"),
    (__name__, "Event"),
    (__name__, "Session"),
]


def _batch(fn: Callable[[], Any]) -> int:
    # a batch per repeat so that the timer's resolution does not matter
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, int(0.01 / once))


def _time_batch(fn: Callable[[], Any], batch: int) -> float:
    start = time.perf_counter()
    for _ in range(batch):
        fn()
    return (time.perf_counter() - start) / batch


def _median_us(
    ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int
) -> tuple[float, float]:
    """Median seconds per call (in µs) of both, their batches alternating."""
    batches = (_batch(ours), _batch(theirs))
    samples: tuple[list[float], list[float]] = ([], [])
    for i in range(repeats):
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            samples[k].append(_time_batch((ours, theirs)[k], batches[k]))
    return statistics.median(samples[0]) * 1e6, statistics.median(samples[1]) * 1e6


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Time both serializers on every payload; returns one row per payload and operation."""
    repeats = 5 if quick else 31
    tether = MsgpackSerializer(allowlist=ALLOW)
    official = JsonPlusSerializer(allowed_msgpack_modules=ALLOW)
    rows: list[dict[str, Any]] = []
    for name, make in PAYLOADS.items():
        value = make()
        t_data = tether.dumps_typed(value)
        o_data = official.dumps_typed(value)
        _check(tether.loads_typed(t_data), value, name)
        for op in ("dumps", "loads"):
            if op == "dumps":
                t_us, o_us = _median_us(
                    lambda v=value: tether.dumps_typed(v),
                    lambda v=value: official.dumps_typed(v),
                    repeats,
                )
            else:
                t_us, o_us = _median_us(
                    lambda d=t_data: tether.loads_typed(d),
                    lambda d=o_data: official.loads_typed(d),
                    repeats,
                )
            rows.append(
                {
                    "payload": name,
                    "op": op,
                    "tether_us": round(t_us, 1),
                    "langgraph_us": round(o_us, 1),
                    "ratio": round(o_us / t_us, 2),
                    "tether_bytes": len(t_data[1]),
                    "langgraph_bytes": len(o_data[1]),
                }
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "serde.json").write_text(
        json.dumps({"quick": quick, "python": sys.version.split()[0], "rows": rows}, indent=2)
    )
    return rows


def _check(got: Any, want: Any, name: str) -> None:
    same = bool((got == want).all()) if isinstance(want, np.ndarray) else got == want
    if not same:
        raise AssertionError(f"tether did not round-trip the {name} payload")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    rows = run(quick=parser.parse_args().quick)
    header = f"{'payload':38} {'op':6} {'tether µs':>10} {'langgraph µs':>13} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['payload']:38} {r['op']:6} {r['tether_us']:>10.1f} "
            f"{r['langgraph_us']:>13.1f} {r['ratio']:>6.2f}"
        )


if __name__ == "__main__":
    main()

"""A decoder fuzz loop (issue #18, standing tests): run as a script, in its own process.

    python tests/serde/fuzz_decoder.py --seconds 25 --seed 1 --last-input /tmp/last.bin

Seeds are real encoded values (LangChain messages, dataclasses, pydantic
models, NumPy arrays, datetimes, enums, append-delta tails, LangGraph
``Send``/``Interrupt``/``Command``/``_DeltaSnapshot``, legacy JSON). Each
input is a seed mutated atheris-style: byte flips, interesting bytes in
length fields, truncations, insertions, deletions, splices of two seeds,
duplicated chunks, and structural mutations of the decoded tree (a module or
class name swapped for one from a dictionary, an ext code changed, a value
wrapped in arrays or ext values many levels deep, an ext payload mutated in
place). Every input is decoded by a strict, a default and a permissive
serializer. The properties:

* nothing but :class:`~tether.errors.DecodeError` leaves ``loads_typed``;
* no module is imported by decoding (``sys.modules`` is compared after
  every input, against the modules present once the seeds were decoded);
* no crash: a segfault kills this process, and the test that runs it reads
  the input being decoded from ``--last-input`` (written before each decode).

Prints one JSON line (counts, and the failures with their inputs in hex);
exit status 1 when a property failed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import decimal
import json
import os
import random
import sys
import time
import traceback
import uuid
import warnings
import zoneinfo
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script: the repository root, so that the tests package is importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgspec
import numpy as np
import ormsgpack
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Command, Interrupt, Send

from tests.serde import models as m
from tether.errors import DecodeError
from tether.langgraph import LANGGRAPH_ALLOWLIST
from tether.serde import MsgpackSerializer
from tether.serde._paths import RawExt

# names a mutation may put into an envelope: safe, allowlisted, refused,
# denied, importable-but-not-imported, nonexistent, traversals
NAME_DICTIONARY: list[tuple[str, str]] = [
    ("uuid", "UUID"),
    ("datetime", "datetime"),
    ("builtins", "tuple"),
    ("builtins", "eval"),
    ("os", "system"),
    ("subprocess", "Popen"),
    ("venv", "subprocess.Popen"),
    ("http.server", "socket.socket"),
    ("logging", "FileHandler"),
    ("json.tool", "main"),
    ("xml.dom.minidom", "Document"),
    ("tests.serde.never_imported", "Gadget"),
    ("tests.serde.models", "Item"),
    ("tests.serde.models", "Person"),
    ("tests.serde.models", "Color"),
    ("tests.serde.models", "Fussy"),
    ("tests.serde.models", "Outer.Inner"),
    ("tests.serde.models", "Outer.__dict__"),
    ("tests.serde.models", "dataclasses.dataclass"),
    ("langchain_core.messages.ai", "AIMessage"),
    ("langgraph.types", "Send"),
    ("no.such.module", "Thing"),
    ("__main__", "Thing"),
    ("", ""),
]
INTERESTING = [0x00, 0x01, 0x7F, 0x80, 0x90, 0x91, 0xC0, 0xC1, 0xC4, 0xC5, 0xC6, 0xC7, 0xC9]
INTERESTING += [0xD4, 0xD8, 0xD9, 0xDC, 0xDD, 0xDE, 0xDF, 0xFF]


def seed_values() -> list[Any]:
    now = dt.datetime(2026, 3, 1, 12, 30, tzinfo=dt.UTC)
    person = m.Person(name="ada", age=36, address=m.Address(city="London"), seen=now)
    history = [
        SystemMessage("be brief", id="s"),
        HumanMessage("what is 2+2?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "add", "args": {"a": 2, "b": 2}, "id": "c1", "type": "tool_call"}],
        ),
        ToolMessage("4", tool_call_id="c1", id="t1"),
        AIMessage("4", id="a2", response_metadata={"finish_reason": "stop"}),
        AIMessageChunk("partial", id="a3"),
    ]
    return [
        {"messages": history},
        history[1:3],  # an append-delta tail: the elements appended, as a list
        {"ch": _DeltaSnapshot(history[:2])},
        [person, m.Item("a", 1, "note"), m.Point(1, 2), m.Color.RED, m.Level.HIGH, m.Flags.A],
        m.Holder(person, [m.Item("b", 2)], m.Point(0), {"d": dt.date(2020, 1, 1)}),
        m.Frozen(uuid.UUID(int=7), now, m.Color.BLUE),
        m.Outer.Inner(3),
        m.Legacy(name="old", count=2),
        {
            "naive": dt.datetime(2026, 1, 1, 1, 2, 3),
            "utc": now,
            "zone": dt.datetime(2026, 7, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
            "t": dt.time(1, 2, 3),
            "td": dt.timedelta(days=1, seconds=5),
            "tz": dt.timezone(dt.timedelta(hours=2), "X"),
        },
        {
            "u": uuid.UUID(int=1),
            "d": decimal.Decimal("1.25"),
            "s": {1, 2},
            "f": frozenset({(1, 2)}),
        },
        {"q": collections.deque([1, 2]), "t": (1, (2, 3)), "big": 2**90, "neg": -(2**70)},
        {1: "int key", (1, 2): "tuple key", None: "none key", 1.5: "float key"},
        np.arange(12, dtype=np.int32).reshape(3, 4),
        {"arr": np.linspace(0, 1, 5000), "f": np.zeros((2, 2), order="F")},
        [Send("node", {"x": 1}), Interrupt(value={"q": "ok?"}, id="i1")],
        Command(update={"a": 1}, resume="yes", goto=Send("n", 2)),
        {"plain": [1, 2.5, "x", b"bytes", None, True], "nested": [[[[{"k": "v"}]]]]},
    ]


def seeds() -> list[tuple[str, bytes]]:
    writer = MsgpackSerializer(allowlist=[*m.ALL, *LANGGRAPH_ALLOWLIST], env_allowlist=False)
    out = [writer.dumps_typed(v) for v in seed_values()]
    for value in _legacy_json():
        out.append(("json", json.dumps(value).encode()))
    return [(tag, data) for tag, data in out if tag in ("msgpack", "json")]


def _lc(module: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"lc": 2, "type": "constructor", "id": [*module.split("."), name], **fields}


def _legacy_json() -> list[Any]:
    """LangGraph's old "json" format: constructor objects, as it wrote them."""
    return [
        {
            "u": _lc("uuid", "UUID", args=[uuid.UUID(int=5).hex]),
            "s": _lc("builtins", "set", args=[[1, 2]]),
            "when": _lc("datetime", "datetime", method="fromisoformat", args=["2026-01-01"]),
            "day": _lc("datetime", "date", args=[2024, 1, 2]),
        },
        [_lc("tests.serde.models", "Item", kwargs={"k": "a", "count": 1})],
        {"messages": [HumanMessage("hi", id="1").to_json()]},
    ]


_tree_of = msgspec.msgpack.Decoder(ext_hook=lambda code, data: RawExt(code, bytes(data))).decode


def _pack_tree(tree: Any) -> bytes:
    return ormsgpack.packb(
        tree,
        default=lambda o: ormsgpack.Ext(o.code, o.data),
        option=ormsgpack.OPT_NON_STR_KEYS | ormsgpack.OPT_PASSTHROUGH_TUPLE,
    )


def _nodes(tree: Any, out: list[tuple[Any, Any]], parent: Any = None, key: Any = None) -> None:
    """Every (container, key) slot of ``tree`` in ``out``; lists and dict values only."""
    if len(out) > 500:
        return
    out.append((parent, key))
    if isinstance(tree, list):
        for i, v in enumerate(tree):
            _nodes(v, out, tree, i)
    elif isinstance(tree, dict):
        for k, v in list(tree.items()):
            _nodes(v, out, tree, k)


def _wrap(value: bytes, rng: random.Random) -> bytes:
    """The value inside many levels of arrays and ext envelopes (the #18.1 shape)."""
    levels = rng.choice([1, 2, 5, 20, 40])
    arrays = rng.choice([0, 1, 10, 300, 1000, 1100])
    for _ in range(levels):
        inner = b"\x91" * arrays + value
        envelope = b"\x93" + ormsgpack.packb("builtins") + ormsgpack.packb("tuple") + inner
        value = ormsgpack.packb(ormsgpack.Ext(rng.choice([0, 0, 1, 2, 5, 7]), envelope))
    return value


def mutate_tree(data: bytes, rng: random.Random, depth: int = 0) -> bytes:
    tree = _tree_of(data)
    holder = [tree]
    slots: list[tuple[Any, Any]] = []
    _nodes(tree, slots, holder, 0)
    parent, key = rng.choice(slots)
    target = parent[key]
    op = rng.randrange(6)
    if isinstance(target, RawExt) and op < 3 and depth < 4:
        # into the ext payload: an envelope name, the code, or deeper
        if op == 0:
            try:
                env = _tree_of(target.data)
            except Exception:
                env = None
            if isinstance(env, list) and len(env) >= 2:
                env[0], env[1] = rng.choice(NAME_DICTIONARY)
                parent[key] = RawExt(target.code, _pack_tree(env))
        elif op == 1:
            parent[key] = RawExt(rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, -1, 127]), target.data)
        else:
            try:
                parent[key] = RawExt(target.code, mutate_tree(target.data, rng, depth + 1))
            except Exception:
                parent[key] = RawExt(target.code, mutate_bytes(target.data, rng))
    elif op == 3:
        parent[key] = RawExt(
            rng.choice([0, 2, 5]), _pack_tree([*rng.choice(NAME_DICTIONARY), target])
        )
    elif op == 4 and isinstance(target, list) and target:
        target.extend(target[: rng.randrange(1, len(target) + 1)])
    else:
        return _wrap(_pack_tree(target), rng) if parent is holder else _pack_tree(holder[0])
    return _pack_tree(holder[0])


def mutate_bytes(data: bytes, rng: random.Random, other: bytes = b"") -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3, 8])):
        op = rng.randrange(8)
        pos = rng.randrange(len(buf)) if buf else 0
        if op == 0 and buf:
            buf[pos] = rng.randrange(256)
        elif op == 1 and buf:
            buf[pos] ^= 1 << rng.randrange(8)
        elif op == 2 and buf:
            buf[pos] = rng.choice(INTERESTING)
        elif op == 3:
            del buf[pos:]
        elif op == 4:
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
        elif op == 5 and buf:
            del buf[pos : pos + rng.randrange(1, 5)]
        elif op == 6 and other:
            cut = rng.randrange(len(other))
            buf[pos:] = other[cut:]
        elif buf:
            end = min(len(buf), pos + rng.randrange(1, 16))
            buf[pos:pos] = buf[pos:end]
    return bytes(buf)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--min-inputs", type=int, default=500, help="even past --seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--last-input", type=Path, required=True)
    args = parser.parse_args()
    warnings.simplefilter("error")  # as the test suite runs: a warning is a failure too
    rng = random.Random(args.seed)
    corpus = seeds()
    serializers: dict[str, Callable[[tuple[str, bytes]], Any]] = {
        "strict": MsgpackSerializer(
            allowlist=[*m.ALL, *LANGGRAPH_ALLOWLIST], env_allowlist=False
        ).loads_typed,
        "default": MsgpackSerializer(env_allowlist=False).loads_typed,
        "permissive": MsgpackSerializer(permissive=True, env_allowlist=False).loads_typed,
    }
    import logging

    logging.getLogger("tether.serde").setLevel(logging.ERROR)  # permissive mode's warnings
    for stored in corpus:  # warm-up: what decoding may import, it imports now
        for loads in serializers.values():
            with contextlib.suppress(DecodeError):
                loads(stored)
    for probe in (b"\xd4\x00\x00", _wrap(b"\xc0", random.Random(1))):
        for loads in serializers.values():
            with contextlib.suppress(DecodeError):
                loads(("msgpack", probe))
    baseline = set(sys.modules)
    fd = os.open(args.last_input, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    counts: collections.Counter[str] = collections.Counter()
    failures: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.seconds
    while (time.monotonic() < deadline or counts["inputs"] < args.min_inputs) and len(failures) < 5:
        tag, data = rng.choice(corpus)
        if tag == "msgpack" and rng.random() < 0.4:
            try:
                data = mutate_tree(data, rng)
            except Exception:
                data = mutate_bytes(data, rng)
        else:
            data = mutate_bytes(data, rng, rng.choice(corpus)[1])
        record = tag.encode() + b"\x00" + data
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
        for name, loads in serializers.items():
            counts["decodes"] += 1
            try:
                loads((tag, data))
                counts["ok"] += 1
            except DecodeError:
                counts["decode_error"] += 1
            except BaseException as exc:  # the property: nothing else gets out
                failures.append(
                    {
                        "serializer": name,
                        "tag": tag,
                        "input": data.hex(),
                        "error": "".join(traceback.format_exception_only(exc)).strip(),
                        "traceback": traceback.format_exc()[-2000:],
                    }
                )
            if len(sys.modules) != len(baseline):
                new = sorted(set(sys.modules) - baseline)
                failures.append(
                    {"serializer": name, "tag": tag, "input": data.hex(), "imported": new}
                )
                baseline = set(sys.modules)
        counts["inputs"] += 1
    os.close(fd)
    print(json.dumps({"seed": args.seed, "counts": counts, "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

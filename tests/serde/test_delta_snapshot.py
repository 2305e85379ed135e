"""Ext 7: LangGraph's ``_DeltaSnapshot`` (DeltaChannel snapshots), byte for byte as LangGraph.

LangGraph writes a DeltaChannel's periodic snapshot as ``_DeltaSnapshot(value)``
in ``channel_values``, encoded as MessagePack ext 7 around the packed value
(no ``[module, name]`` envelope). tether writes the same bytes and reads them
back as the same NamedTuple when langgraph is importable.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np
import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Send

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer

from . import models as m

LG_ALLOW = [*m.ALL, ("builtins", "tuple"), ("builtins", "int")]

# values both libraries write identically
SAME_BYTES: list[Any] = [
    [],
    ["a", "b", 3],
    [HumanMessage(content="hi", id="1"), AIMessage(content="yo", id="2")],
    {"k": [1, 2], "when": datetime(2026, 1, 2, tzinfo=UTC), "u": uuid.UUID(int=7)},
    [m.Item("a", 1), m.Point(1, 2)],
    [Send("node", {"x": 1})],
    {1, 2},
    None,
    "plain",
    np.arange(6.0).reshape(2, 3),
]


class _Lookalike(NamedTuple):
    value: Any


# same class name, another module: an ordinary named tuple (ext 2)
_Lookalike.__name__ = _Lookalike.__qualname__ = "_DeltaSnapshot"


@pytest.fixture
def official() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=LG_ALLOW)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, _DeltaSnapshot):
        return type(b) is _DeltaSnapshot and _same(a.value, b.value)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and bool((a == b).all())
    return type(a) is type(b) and bool(a == b)


@pytest.mark.parametrize("value", SAME_BYTES, ids=lambda v: type(v).__name__)
def test_bytes_are_langgraphs(
    serde: MsgpackSerializer, official: JsonPlusSerializer, value: Any
) -> None:
    for obj in (_DeltaSnapshot(value), {"ch": _DeltaSnapshot(value), "other": [1]}):
        assert serde.dumps_typed(obj) == official.dumps_typed(obj)


@pytest.mark.parametrize("value", SAME_BYTES, ids=lambda v: type(v).__name__)
def test_round_trip_and_cross_reads(
    serde: MsgpackSerializer, official: JsonPlusSerializer, value: Any
) -> None:
    snap = _DeltaSnapshot(value)
    assert _same(snap, serde.loads_typed(serde.dumps_typed(snap)))
    # LangGraph reads tether's bytes, tether reads LangGraph's
    assert _same(snap, official.loads_typed(serde.dumps_typed(snap)))
    assert _same(snap, serde.loads_typed(official.dumps_typed(snap)))
    nested = {"ch": snap, "list": [snap]}
    got = serde.loads_typed(official.dumps_typed(nested))
    assert _same(snap, got["ch"])
    assert _same(snap, got["list"][0])


def test_tether_only_values_inside_a_snapshot(
    serde: MsgpackSerializer, official: JsonPlusSerializer
) -> None:
    """Inside a snapshot a value keeps tether's improvements (tuples, big ints)."""
    snap = _DeltaSnapshot({"t": (1, 2), "big": 2**80})
    assert serde.loads_typed(serde.dumps_typed(snap)) == snap
    assert official.loads_typed(serde.dumps_typed(snap)) == snap


def test_layout_is_ext_7_around_the_packed_value(serde: MsgpackSerializer) -> None:
    _tag, data = serde.dumps_typed(_DeltaSnapshot(["a", 1]))
    raw = ormsgpack.unpackb(data, ext_hook=lambda code, b: (code, b))
    assert raw == (7, ormsgpack.packb(["a", 1]))


def test_a_lookalike_named_tuple_is_not_ext_7(serde: MsgpackSerializer) -> None:
    _tag, data = serde.with_allowlist([_Lookalike]).dumps_typed(_Lookalike([1]))
    code = ormsgpack.unpackb(data, ext_hook=lambda code, b: code)
    assert code == 2


def test_inner_value_goes_through_the_allowlist(official: JsonPlusSerializer) -> None:
    """Only the NamedTuple is built by ext 7 itself; what it holds is checked as usual."""
    stored = official.dumps_typed({"ch": _DeltaSnapshot([1, m.Item("k", 1)])})
    with pytest.raises(DecodeError, match="not in the allowlist") as info:
        MsgpackSerializer().loads_typed(stored)
    assert info.value.path == "$.ch.value[1]"
    assert info.value.type_name == "tests.serde.models.Item"
    got = MsgpackSerializer(allowlist=[m.Item]).loads_typed(stored)
    assert got == {"ch": _DeltaSnapshot([1, m.Item("k", 1)])}


def test_malformed_ext_7(serde: MsgpackSerializer) -> None:
    bad = ormsgpack.packb(ormsgpack.Ext(7, b"\xc1"))  # 0xc1: never valid MessagePack
    with pytest.raises(DecodeError):
        serde.loads_typed(("msgpack", bad))
    truncated = ormsgpack.packb(ormsgpack.Ext(7, b"\x92\x01"))  # array of 2, one item
    with pytest.raises(DecodeError):
        serde.loads_typed(("msgpack", truncated))


def test_without_langgraph_ext_7_names_what_to_install(tmp_path: pathlib.Path) -> None:
    """In a fresh interpreter where langgraph cannot be imported: a clear DecodeError,
    and the snapshot's contents are not decoded (a refused module stays unimported)."""
    trace = tmp_path / "imported"
    gadget = ormsgpack.Ext(0, ormsgpack.packb(["tests.serde.never_imported", "Gadget", 1]))
    stored = ormsgpack.packb({"ch": ormsgpack.Ext(7, ormsgpack.packb([gadget]))})
    script = f"""
import sys
sys.modules["langgraph"] = None  # import langgraph... raises ImportError
from tether.serde import MsgpackSerializer
from tether.errors import DecodeError
s = MsgpackSerializer(allowlist=[("tests.serde.never_imported", "Gadget")])
assert s.loads_typed(s.dumps_typed({{"a": [1]}})) == {{"a": [1]}}
try:
    s.loads_typed(("msgpack", {stored!r}))
except DecodeError as exc:
    assert "pip install 'tether[langgraph]'" in str(exc), exc
    assert "DeltaChannel" in str(exc), exc
    assert exc.path == "$.ch", exc.path
    print("ok")
assert "tests.serde.never_imported" not in sys.modules
"""
    env = {**os.environ, "TETHER_TEST_IMPORT_TRACE": str(trace)}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(pathlib.Path(__file__).resolve().parents[2]), *sys.path]
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert not trace.exists()


def test_core_does_not_import_langgraph() -> None:
    """Writing and reading ordinary values never imports langgraph."""
    script = """
import sys
from tether.serde import MsgpackSerializer
s = MsgpackSerializer()
assert s.loads_typed(s.dumps_typed({"a": (1, 2), "b": [1]})) == {"a": (1, 2), "b": [1]}
assert not any(name.split(".")[0] == "langgraph" for name in sys.modules), sorted(sys.modules)
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"

"""Refused at write what would be refused at read (issue #13 item 4, SPEC S3.4).

A state holding a class the serializer would not construct used to be stored
fine and then be unreadable (found days later, on the resume). ``dumps_typed``
now refuses it before anything is stored, naming every such class, where it
is, and the fix as it can be typed.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import os
import re
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tether import InMemorySaver, PostgresSaver, SqliteSaver, empty_checkpoint
from tether.errors import EncodeError
from tether.serde import MsgpackSerializer
from tether.serde._allowlist import parse_allowlist

from . import models as m

PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"))


def state() -> dict[str, Any]:
    """Three user classes, one of them in three places, at known paths."""
    return {
        "orders": [m.Item("a", 1), m.Item("b", 2)],
        "meta": {"color": m.Color.RED, "point": m.Point(1, 2)},
        "more": [m.Item("c", 3)],
        "plain": [1, "x", {"y": 2.0}],
    }


def test_every_refused_class_is_named_with_its_path() -> None:
    with pytest.raises(EncodeError) as info:
        MsgpackSerializer().dumps_typed(state())
    text = str(info.value)
    assert (
        "tests.serde.models:Item at `$.orders[0]` and 2 more places: not in the allowlist" in text
    )
    assert "tests.serde.models:Color at `$.meta.color`: not in the allowlist" in text
    assert "tests.serde.models:Point at `$.meta.point`: not in the allowlist" in text
    assert text.startswith("refusing to store a value holding 3 types")
    assert info.value.path == "$.orders[0]"


def _allowlist_in(text: str, prefix: str) -> list[tuple[str, str]]:
    """The list literal that follows ``prefix`` in an error message."""
    start = text.index(prefix) + len(prefix)
    depth = 0
    for end in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[end], 0)
        if depth == 0:
            break
    return [tuple(entry) for entry in ast.literal_eval(text[start : end + 1])]


def test_each_suggested_fix_works_as_typed(tmp_path: Path) -> None:
    """Copy each fix out of the message and use it: the value then round-trips."""
    value = state()
    with pytest.raises(EncodeError) as info:
        MsgpackSerializer().dumps_typed(value)
    text = str(info.value)
    from_serde = _allowlist_in(text, "serde=MsgpackSerializer(allowlist=")
    from_clone = _allowlist_in(text, "saver = saver.with_allowlist(")
    env = re.search(r"TETHER_ALLOWLIST=(\S+)$", text)
    assert env is not None
    assert set(from_serde) == set(from_clone) == set(parse_allowlist(env.group(1)))
    serde = MsgpackSerializer(allowlist=from_serde)
    assert serde.loads_typed(serde.dumps_typed(value)) == value
    # and on a saver: with_allowlist returns the saver to use
    with SqliteSaver(str(tmp_path / "fix.db")) as saver:
        fixed = saver.with_allowlist(from_clone)
        assert fixed is not saver
        config = _put(fixed, value)
        got = fixed.get_tuple(config)
        assert got is not None
        assert got.checkpoint["channel_values"]["state"] == value


def test_classes_defined_in_a_function_are_refused_with_the_reason() -> None:
    @dataclasses.dataclass
    class Scratch:
        n: int

    class Mood(enum.Enum):
        OK = 1

    value = {"a": Scratch(1), "b": [m.Item("a", 1)], "c": Mood.OK}
    with pytest.raises(EncodeError) as info:
        MsgpackSerializer().dumps_typed(value)
    text = str(info.value)
    qual = Scratch.__qualname__
    assert f"test_write_check:{qual} at `$.a`: " in text
    assert "defined inside a function" in text
    assert f"test_write_check:{Mood.__qualname__} at `$.c`" in text
    assert "tests.serde.models:Item at `$.b[0]`: not in the allowlist" in text
    # the fix offered is for the allowlist only: a local class cannot be allowed
    assert "allowlist=[('tests.serde.models', 'Item')]" in text
    # allowlisting does not help a local class (it could never be imported)
    with pytest.raises(EncodeError, match="defined inside a function"):
        MsgpackSerializer(allowlist=[Scratch]).dumps_typed(Scratch(1))


def test_allowed_types_and_safe_built_ins_are_written() -> None:
    import datetime as dt
    import uuid

    serde = MsgpackSerializer(allowlist=m.ALL)
    value = {
        **state(),
        "person": PERSON,
        "when": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        "id": uuid.UUID(int=1),
        "s": {1, 2},
        "t": (1, 2),
    }
    assert serde.loads_typed(serde.dumps_typed(value)) == value
    # safe built-ins need no allowlist at all
    plain = {k: value[k] for k in ("when", "id", "s", "t")}
    assert MsgpackSerializer().loads_typed(MsgpackSerializer().dumps_typed(plain)) == plain


def test_nested_model_fields_are_not_types_of_their_own() -> None:
    """A model inside a pydantic model is written as its fields (model_dump): no entry needed."""
    serde = MsgpackSerializer(allowlist=[m.Person])
    assert serde.loads_typed(serde.dumps_typed(PERSON)) == PERSON


def test_a_module_wildcard_allows_that_module_only() -> None:
    serde = MsgpackSerializer(allowlist=[("tests.serde.models", "*")])
    value = state()
    assert serde.loads_typed(serde.dumps_typed(value)) == value
    with pytest.raises(EncodeError, match="test_write_check:Record"):
        serde.dumps_typed(Record(1))


@dataclasses.dataclass
class Record:
    n: int


def test_permissive_writes_what_permissive_reads() -> None:
    serde = MsgpackSerializer(permissive=True)
    value = state()
    assert serde.loads_typed(serde.dumps_typed(value)) == value


@dataclasses.dataclass
class Sneaky:
    n: int


Sneaky.__module__ = "subprocess"


def test_denied_modules_are_refused_in_every_mode() -> None:
    for serde in (
        MsgpackSerializer(),
        MsgpackSerializer(permissive=True),
        MsgpackSerializer(allowlist=[("subprocess", "Sneaky")]),
    ):
        with pytest.raises(EncodeError, match="module 'subprocess' is never allowed"):
            serde.dumps_typed({"x": Sneaky(1)})


def test_pickle_fallback_pickles_what_msgpack_would_not_read_back() -> None:
    serde = MsgpackSerializer(pickle_fallback=True)
    value = state()
    tag, data = serde.dumps_typed(value)
    assert tag == "pickle"
    assert serde.loads_typed((tag, data)) == value
    # an allowed value is still MessagePack
    assert MsgpackSerializer(pickle_fallback=True, allowlist=m.ALL).dumps_typed(value)[0] == (
        "msgpack"
    )


def test_unsupported_values_keep_their_message() -> None:
    with pytest.raises(EncodeError, match=r"cannot serialize builtins\.object") as info:
        MsgpackSerializer().dumps_typed({"a": [1, object()]})
    assert info.value.path == "$.a[1]"


def test_with_allowlist_decides_again() -> None:
    strict = MsgpackSerializer()
    with pytest.raises(EncodeError):
        strict.dumps_typed(m.Item("a", 1))
    wider = strict.with_allowlist([m.Item])
    assert wider.loads_typed(wider.dumps_typed(m.Item("a", 1))) == m.Item("a", 1)
    with pytest.raises(EncodeError):  # the original is unchanged
        strict.dumps_typed(m.Item("a", 1))


# --- through the savers: nothing is stored -------------------------------------------


def _put(saver: Any, value: Any) -> dict[str, Any]:
    ckpt = empty_checkpoint()
    ckpt["channel_values"] = {"state": value}
    ckpt["channel_versions"] = {"state": saver.get_next_version(None)}
    return saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        ckpt,
        {"source": "input", "step": -1},
        ckpt["channel_versions"],
    )


@pytest.mark.parametrize(
    "backend", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_savers_refuse_before_storing(backend: str, tmp_path: Path) -> None:
    saver: Any
    if backend == "memory":
        saver = InMemorySaver()
    elif backend == "sqlite":
        saver = SqliteSaver(str(tmp_path / "w.db"))
    else:
        dsn = os.environ.get("TETHER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
        schema = f"wcheck_{uuid.uuid4().hex[:12]}"
        saver = PostgresSaver.from_conn_string(dsn, schema=schema)
        saver.setup()
    try:
        with pytest.raises(EncodeError, match=r"tests\.serde\.models:Item"):
            _put(saver, state())
        assert list(saver.list(None)) == []
        config = _put(saver, {"ok": 1})
        with pytest.raises(EncodeError, match=r"tests\.serde\.models:Point at `\$`"):
            saver.put_writes(config, [("a", 1), ("b", m.Point(1, 2))], task_id="task")
        got = saver.get_tuple(config)
        assert got is not None
        assert got.pending_writes == []
    finally:
        if backend == "postgres":
            saver.close()
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        elif backend == "sqlite":
            saver.close()

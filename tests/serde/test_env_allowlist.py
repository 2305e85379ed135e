"""``TETHER_ALLOWLIST`` and ``module:*`` entries (issue #13 item 4).

The environment variable is read by every serializer made with its defaults,
so by every saver's default serializer and the LangGraph drop-ins'; a
deployment allows its own types once, without code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tether
import tether.langgraph as tl
from tether.errors import ConfigError, DecodeError, EncodeError
from tether.serde import MsgpackSerializer, parse_allowlist

from . import models as m

ROOT = Path(__file__).resolve().parents[2]  # where the tests package is
ITEM = m.Item("a", 1)


def roundtrip(serde: MsgpackSerializer, value: object) -> object:
    return serde.loads_typed(serde.dumps_typed(value))


def test_parse_allowlist() -> None:
    assert parse_allowlist(" myapp.models:Order, myapp.models:* ,a:B.C,,") == {
        ("myapp.models", "Order"),
        ("myapp.models", "*"),
        ("a", "B.C"),
    }
    assert parse_allowlist("") == frozenset()
    for bad in ("myapp.models.Order", "myapp models:Order", "m:", ":Order", "m:Order()"):
        with pytest.raises(ConfigError, match="allowlist"):
            parse_allowlist(bad)
    with pytest.raises(ConfigError, match="never allowed"):
        parse_allowlist("os:*")
    with pytest.raises(ConfigError, match="never allowed"):
        parse_allowlist("subprocess.foo:*")


def test_the_variable_is_read_by_default_serializers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_ALLOWLIST", raising=False)
    with pytest.raises(EncodeError):
        MsgpackSerializer().dumps_typed(ITEM)
    monkeypatch.setenv("TETHER_ALLOWLIST", "tests.serde.models:Item")
    assert roundtrip(MsgpackSerializer(), ITEM) == ITEM
    assert ("tests.serde.models", "Item") in MsgpackSerializer().allowlist
    # on top of an explicit allowlist, and kept by with_allowlist
    assert roundtrip(MsgpackSerializer(allowlist=[m.Point]), [ITEM, m.Point(1)]) == [
        ITEM,
        m.Point(1),
    ]
    clone = MsgpackSerializer().with_allowlist([m.Point])
    assert roundtrip(clone, [ITEM, m.Point(1)]) == [ITEM, m.Point(1)]
    # opting out
    with pytest.raises(EncodeError):
        MsgpackSerializer(env_allowlist=False).dumps_typed(ITEM)


def test_every_default_saver_reads_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TETHER_ALLOWLIST", "tests.serde.models:*")
    with (
        tether.SqliteSaver(str(tmp_path / "core.db")) as core,
        tl.SqliteSaver(str(tmp_path / "lg.db")) as dropin,
    ):
        for saver in (tether.InMemorySaver(), core, tl.InMemorySaver().saver, dropin.saver):
            serde = saver.serde
            assert isinstance(serde, MsgpackSerializer)
            assert roundtrip(serde, [ITEM, m.Color.RED]) == [ITEM, m.Color.RED]


def test_a_malformed_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_ALLOWLIST", "tests.serde.models.Item")
    with pytest.raises(
        ConfigError, match=r"TETHER_ALLOWLIST: 'tests\.serde\.models\.Item' is not module:Name"
    ):
        MsgpackSerializer()
    monkeypatch.setenv("TETHER_ALLOWLIST", "pickle:*")
    with pytest.raises(ConfigError, match=r"TETHER_ALLOWLIST.*never allowed"):
        MsgpackSerializer()


def test_module_wildcard_is_that_module_exactly() -> None:
    serde = MsgpackSerializer(allowlist=[("tests.serde.models", "*")], env_allowlist=False)
    value = [
        ITEM,
        m.Color.RED,
        m.Outer.Inner(1),
        m.Person(name="a", age=1, address=m.Address(city="c")),
    ]
    assert roundtrip(serde, value) == value
    # a module whose name is a prefix is another module
    with pytest.raises(EncodeError, match=r"tests\.serde\.models:Item"):
        MsgpackSerializer(allowlist=[("serde", "*")], env_allowlist=False).dumps_typed(ITEM)
    # a name that leads elsewhere (a class the module imported) is refused
    import ormsgpack

    stored = ormsgpack.packb(
        ormsgpack.Ext(2, ormsgpack.packb(["tests.serde.models", "datetime", {}]))
    )
    with pytest.raises(DecodeError, match="defined elsewhere"):
        serde.loads_typed(("msgpack", stored))
    with pytest.raises(ConfigError, match="never allowed"):
        MsgpackSerializer(allowlist=[("builtins", "*")])


def test_set_in_a_fresh_process(tmp_path: Path) -> None:
    """As a deployment sets it: in the environment of the process, no code change."""
    script = """
    import sys
    from tests.serde import models as m
    from tether import SqliteSaver, empty_checkpoint
    with SqliteSaver(sys.argv[1]) as saver:
        ckpt = empty_checkpoint()
        ckpt["channel_values"] = {"items": [m.Item("a", 1)], "color": m.Color.BLUE}
        ckpt["channel_versions"] = {"items": "1", "color": "1"}
        config = saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            ckpt, {"source": "input", "step": -1}, ckpt["channel_versions"],
        )
        print(saver.get_tuple(config).checkpoint["channel_values"])
    """
    env = {
        **os.environ,
        "TETHER_ALLOWLIST": "tests.serde.models:Item, tests.serde.models:Color",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path / "env.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "{'items': [Item(k='a', count=1, note=None)], 'color': <Color.BLUE: 'blue'>}"
    )

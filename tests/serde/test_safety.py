"""Decoding constructs only safe types and the allowlist (SPEC S3.4)."""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys
from typing import Any

import ormsgpack
import pytest

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer

from . import models as m


def ext(code: int, *envelope: Any) -> tuple[str, bytes]:
    """A stored value written by hand, as an attacker with database access would."""
    return "msgpack", ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(list(envelope))))


def _attacks(target: pathlib.Path) -> list[tuple[str, bytes]]:
    cmd = f"touch {target}"
    return [
        ext(0, "os", "system", cmd),
        ext(1, "os", "system", [cmd]),
        ext(2, "os", "system", {"command": cmd}),
        ext(0, "posix", "system", cmd),
        ext(1, "subprocess", "Popen", [["touch", str(target)]]),
        ext(2, "subprocess", "run", {"args": ["touch", str(target)]}),
        ext(0, "builtins", "eval", f"__import__('os').system({cmd!r})"),
        ext(0, "builtins", "exec", f"import os; os.system({cmd!r})"),
        ext(0, "builtins", "__import__", "os"),
        ext(1, "builtins", "getattr", ["os", "system"]),
        ext(3, "os", "system", cmd, "__call__"),
        ext(3, "datetime", "datetime", cmd, "__init_subclass__"),
        ext(5, "os", "system", {"command": cmd}, "model_validate_json"),
        ext(4, "os", "system", {"command": cmd}),
        ext(0, "importlib", "import_module", "os"),
        ext(0, "pickle", "loads", b"cos\nsystem\n(S'true'\ntR."),
    ]


@pytest.mark.parametrize("permissive", [False, True], ids=["strict", "permissive"])
def test_dangerous_callables_are_refused_and_never_called(
    tmp_path: pathlib.Path, permissive: bool
) -> None:
    target = tmp_path / "pwned"
    serde = MsgpackSerializer(permissive=permissive)
    for stored in _attacks(target):
        with pytest.raises(DecodeError, match="refusing"):
            serde.loads_typed(stored)
    assert not target.exists()


def test_even_an_allowlisted_function_is_not_called(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "pwned"
    serde = MsgpackSerializer(allowlist=[("os", "system"), ("shlex", "split")])
    with pytest.raises(DecodeError, match="never allowed"):
        serde.loads_typed(ext(0, "os", "system", f"touch {target}"))
    with pytest.raises(DecodeError, match="not a class"):
        serde.loads_typed(ext(0, "shlex", "split", "a b"))
    assert not target.exists()


def test_refusal_names_type_and_fix() -> None:
    with pytest.raises(DecodeError) as info:
        MsgpackSerializer().loads_typed(
            ("msgpack", MsgpackSerializer(allowlist=m.ALL).dumps_typed({"x": [m.Item("a", 1)]})[1])
        )
    err = info.value
    assert err.type_name == "tests.serde.models.Item"
    assert err.path == "$.x[0]"
    assert "MsgpackSerializer(allowlist=[('tests.serde.models', 'Item')])" in str(err)
    assert "with_allowlist" in str(err)


def test_refused_module_is_not_imported(tmp_path: pathlib.Path) -> None:
    """Checked in a fresh interpreter so that no other test has imported the module."""
    trace = tmp_path / "imported"
    stored = ext(0, "tests.serde.never_imported", "Gadget", 1)[1]
    script = f"""
import sys
from tether.serde import MsgpackSerializer
from tether.errors import DecodeError
try:
    MsgpackSerializer().loads_typed(("msgpack", {stored!r}))
except DecodeError as exc:
    assert "not in the allowlist" in str(exc), exc
assert "tests.serde.never_imported" not in sys.modules
# allowlisted, the same payload imports it and builds the class
g = MsgpackSerializer(allowlist=[("tests.serde.never_imported", "Gadget")]).loads_typed(
    ("msgpack", {stored!r})
)
assert type(g).__name__ == "Gadget" and g.value == 1
print("ok")
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
    assert trace.exists()  # the second, allowed decode did import it: the trace works


def test_only_the_safe_method_is_called() -> None:
    serde = MsgpackSerializer()
    assert (
        serde.loads_typed(
            ext(3, "datetime", "datetime", "2026-01-01T00:00:00", "fromisoformat")
        ).year
        == 2026
    )
    for method in ("fromtimestamp", "strptime", "now", "__reduce__"):
        with pytest.raises(DecodeError, match="refusing to call"):
            serde.loads_typed(ext(3, "datetime", "datetime", "0", method))


def test_permissive_mode_constructs_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    stored = MsgpackSerializer(allowlist=m.ALL).dumps_typed([m.Point(1, 2), m.Point(3, 4)])
    with pytest.raises(DecodeError):
        MsgpackSerializer().loads_typed(stored)
    with caplog.at_level(logging.WARNING, logger="tether.serde"):
        got = MsgpackSerializer(permissive=True).loads_typed(stored)
        MsgpackSerializer(permissive=True).loads_typed(stored)
    assert got == [m.Point(1, 2), m.Point(3, 4)]
    warned = [r for r in caplog.records if "tests.serde.models.Point" in r.getMessage()]
    assert len(warned) == 1
    assert "permissive" in warned[0].getMessage()


def test_main_module_types_need_an_explicit_entry() -> None:
    stored = ext(0, "__main__", "Thing", 1)
    with pytest.raises(DecodeError, match=r"\('__main__', 'Thing'\)"):
        MsgpackSerializer().loads_typed(stored)


def test_framework_types_are_allowed_by_default() -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.types import Send

    serde = MsgpackSerializer()
    value = {"m": [HumanMessage(content="x", id="1")], "s": Send("n", 1)}
    assert serde.loads_typed(serde.dumps_typed(value)) == value


def test_allowlist_entries_validated() -> None:
    from tether.errors import ConfigError

    with pytest.raises(ConfigError):
        MsgpackSerializer(allowlist=["tests.serde.models.Item"])  # type: ignore[list-item]
    with pytest.raises(ConfigError):
        MsgpackSerializer(on_mismatch="ignore")  # type: ignore[arg-type]
    # LangGraph-style (*module_parts, name) entries are accepted
    s = MsgpackSerializer(allowlist=[("tests.serde.models", "Item"), m.Point])
    assert s.allowlist == {("tests.serde.models", "Item"), ("tests.serde.models", "Point")}

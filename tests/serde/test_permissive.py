"""What ``permissive=True`` may still construct, and what it never reaches (issue #18.11).

Permissive mode used to check only the payload's module string and then look
the name up with ``getattr`` over its dotted parts: ``("venv",
"subprocess.Popen")`` ran a command, ``("http.server", "socket.socket")``
opened a socket, ``logging.FileHandler`` truncated any file, and every module
a payload named was imported. Each case runs in a fresh interpreter, so that
"nothing was imported" and "nothing ran" are facts about that payload alone.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

import ormsgpack
import pytest

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer

from . import models as m

ROOT = pathlib.Path(__file__).resolve().parents[2]  # where the tests package is


def ext(code: int, *envelope: Any) -> bytes:
    return ormsgpack.packb(ormsgpack.Ext(code, ormsgpack.packb(list(envelope))))


def run_fresh(script: str, env: dict[str, str] | None = None) -> str:
    """Run ``script`` in a new interpreter that can import the test models; its stdout."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


PROLOGUE = """
import os, sys
from tether.errors import DecodeError
from tether.serde import MsgpackSerializer
serde = MsgpackSerializer(permissive=True)
def refused(payload, *words):
    try:
        value = serde.loads_typed(("msgpack", payload))
    except DecodeError as exc:
        for word in words:
            assert word in str(exc), (word, str(exc))
        return True
    raise AssertionError(f"decoded {value!r}")
"""


def test_dotted_name_through_a_module_does_not_reach_subprocess(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "pwned"
    payloads = [
        ext(1, "venv", "subprocess.Popen", [["touch", str(target)]]),
        ext(2, "venv", "subprocess.Popen", {"args": ["touch", str(target)]}),
        ext(1, "venv", "os.system", [f"touch {target}"]),
        ext(1, "tarfile", "os.system", [f"touch {target}"]),
    ]
    out = run_fresh(
        PROLOGUE
        + f"""
import venv, tarfile  # already imported: permissive mode still must not reach through them
for payload in {payloads!r}:
    refused(payload, "refusing")
print("ok")
"""
    )
    assert out == "ok"
    assert not target.exists()


def test_dotted_name_does_not_reach_socket() -> None:
    out = run_fresh(
        PROLOGUE
        + f"""
import http.server
before = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()
refused({ext(1, "http.server", "socket.socket", [])!r}, "refusing")
refused({ext(2, "http.server", "socket.socket", {})!r}, "refusing")
after = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()
assert after <= before, "a file descriptor was opened"
print("ok")
"""
    )
    assert out == "ok"


def test_side_effect_classes_are_not_constructed(tmp_path: pathlib.Path) -> None:
    """FileHandler(mode='w') truncates its file; permissive mode builds data classes only."""
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    payloads = [
        ext(2, "logging", "FileHandler", {"filename": str(victim), "mode": "w"}),
        ext(1, "logging", "FileHandler", [str(victim), "w"]),
        ext(0, "logging", "FileHandler", str(victim)),
    ]
    out = run_fresh(
        PROLOGUE
        + f"""
import logging
for payload in {payloads!r}:
    refused(payload, "logging.FileHandler", "data")
print("ok")
"""
    )
    assert out == "ok"
    assert victim.read_text() == "keep me"


def test_permissive_mode_imports_nothing(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "imported"
    stored = ext(0, "tests.serde.never_imported", "Gadget", 1)
    out = run_fresh(
        PROLOGUE
        + f"""
before = set(sys.modules)
refused({stored!r}, "not imported", "tests.serde.never_imported")
refused({ext(2, "json.tool", "Anything", {})!r}, "not imported")
assert set(sys.modules) == before, sorted(set(sys.modules) - before)
print("ok")
""",
        env={"TETHER_TEST_IMPORT_TRACE": str(trace)},
    )
    assert out == "ok"
    assert not trace.exists()


def test_permissive_mode_still_reads_data_classes_of_imported_modules() -> None:
    value = [  # not Point: test_safety checks the once-per-type warning with it
        m.Item("a", 1),
        m.Color.RED,
        m.Person(name="a", age=1, address=m.Address(city="x")),
    ]
    stored = MsgpackSerializer(allowlist=m.ALL).dumps_typed(value)
    with pytest.raises(DecodeError, match="not in the allowlist"):
        MsgpackSerializer().loads_typed(stored)
    assert MsgpackSerializer(permissive=True).loads_typed(stored) == value


def test_nested_class_names() -> None:
    """A dotted name is a class nested in a class, looked up in the class itself."""
    inner = m.Outer.Inner(3)
    stored = MsgpackSerializer(allowlist=m.ALL).dumps_typed(inner)
    assert MsgpackSerializer(permissive=True).loads_typed(stored) == inner
    assert (
        MsgpackSerializer(allowlist=[("tests.serde.models", "Outer.Inner")]).loads_typed(stored)
        == inner
    )
    # a name that walks through anything but classes is refused in every mode
    for serde in (
        MsgpackSerializer(permissive=True),
        MsgpackSerializer(allowlist=[("tests.serde.models", "dataclasses.dataclass")]),
        MsgpackSerializer(allowlist=[("tests.serde.models", "pydantic.BaseModel")]),
    ):
        for name in ("dataclasses.dataclass", "pydantic.BaseModel", "Outer.__module__"):
            with pytest.raises(DecodeError, match="refusing"):
                serde.loads_typed(("msgpack", ext(2, "tests.serde.models", name, {})))


def test_an_allowlisted_name_must_resolve_to_a_class_of_an_allowed_module() -> None:
    """Even an explicit entry cannot reach a denied module through a re-export."""
    serde = MsgpackSerializer(allowlist=[("venv", "subprocess.Popen"), ("http.server", "socket")])
    with pytest.raises(DecodeError, match="refusing"):
        serde.loads_typed(("msgpack", ext(1, "venv", "subprocess.Popen", [["true"]])))
    with pytest.raises(DecodeError, match="refusing"):
        serde.loads_typed(("msgpack", ext(1, "http.server", "socket", [])))

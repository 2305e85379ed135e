"""The viewer's parts without a browser: CSRF tokens, value trees, fork edits, the command.

The command test runs ``tether ui`` as a user does, in a subprocess, and reads
the page it serves over HTTP (loopback only).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tether.errors import ConfigError
from tether.serde import MsgpackSerializer
from tether.ui._csrf import MAX_AGE, CsrfSigner
from tether.ui._edit import parse_edits
from tether.ui._server import is_loopback
from tether.ui._values import (
    MAX_DEPTH,
    MAX_ITEMS,
    LenientSerializer,
    Undecodable,
    as_plain_json,
    to_node,
)

# --- CSRF ---------------------------------------------------------------------------------


def test_a_token_is_valid_for_its_form_only_and_expires() -> None:
    now = [1_000_000.0]
    signer = CsrfSigner(b"k" * 32, clock=lambda: now[0])
    token = signer.token("/fork")
    assert signer.check("/fork", token)
    assert not signer.check("/delete", token)
    assert not signer.check("/fork", None)
    assert not signer.check("/fork", "")
    assert not signer.check("/fork", token + "0")
    assert not signer.check("/fork", "x.y.z")
    issued, nonce, sig = token.split(".")
    assert not signer.check("/fork", f"{int(issued) + 1}.{nonce}.{sig}")  # the time is signed
    assert not CsrfSigner(b"other" * 8).check("/fork", token)  # another process's secret
    now[0] += MAX_AGE
    assert signer.check("/fork", token)
    now[0] += 1
    assert not signer.check("/fork", token)


def test_a_spent_token_is_refused() -> None:
    signer = CsrfSigner()
    token, other = signer.token("/delete"), signer.token("/delete")
    assert signer.check("/delete", token)  # asking to confirm does not spend it
    assert signer.check("/delete", token, once=True)
    assert not signer.check("/delete", token)
    assert not signer.check("/delete", token, once=True)
    assert signer.check("/delete", other, once=True)


def test_each_signer_has_its_own_secret() -> None:
    assert not CsrfSigner().check("/copy", CsrfSigner().token("/copy"))


# --- value trees --------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "r"


class Point(NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    label: str
    inside: list[Any]


def test_scalars_and_containers() -> None:
    node = to_node(
        {
            "s": "text",
            "n": 3,
            "f": 1.5,
            "b": True,
            "none": None,
            "when": datetime.date(2026, 1, 2),
            "color": Color.RED,
            "raw": b"\x00\x01",
            "pt": Point(1, 2),
            "box": Box("b", [1]),
            "tup": (1, "a"),
        }
    )
    assert node.kind == "dict"
    assert node.label == "dict · 11 keys"
    kinds = {k: (c.kind, c.text) for k, c in node.items}
    assert kinds["s"] == ("str", "text")
    assert kinds["n"] == ("num", "3")
    assert kinds["f"] == ("num", "1.5")
    assert kinds["b"] == ("bool", "true")
    assert kinds["none"] == ("null", "null")
    assert kinds["when"] == ("text", "2026-01-02")
    assert kinds["color"] == ("text", "Color.RED")
    assert kinds["raw"] == ("text", "00 01")
    items = dict(node.items)
    assert items["pt"].kind == "object"
    assert items["pt"].label == "Point"
    assert [k for k, _ in items["pt"].items] == ["x", "y"]
    assert items["box"].label == "Box"
    assert items["tup"].label == "tuple · 2 items"
    assert [k for k, _ in items["tup"].items] == ["[0]", "[1]"]


def test_big_and_deep_values_are_cut() -> None:
    node = to_node(list(range(MAX_ITEMS + 7)))
    assert len(node.items) == MAX_ITEMS
    assert node.more == 7
    deep: Any = "bottom"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    cut = to_node(deep)
    while cut.kind == "list":
        cut = cut.items[0][1]
    assert cut.kind == "cut"
    assert to_node("x" * 401).folded
    assert not to_node("x" * 400).folded


def test_a_message_list_is_a_conversation() -> None:
    node = to_node(
        [
            HumanMessage(content="<b>hi</b>", id="1"),
            AIMessage(
                content="", id="2", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "c"}]
            ),
            ToolMessage(content="found", name="search", tool_call_id="c", id="3"),
            AIMessage(content=[{"type": "text", "text": "done"}], id="4"),
        ]
    )
    assert node.kind == "messages"
    roles = [(m.role, m.label, m.text) for m in node.messages]
    assert roles == [
        ("user", "human", "<b>hi</b>"),
        ("assistant", "ai", ""),
        ("tool", "tool (search)", "found"),
        ("assistant", "ai", "done"),
    ]
    assert node.messages[1].tool_calls is not None
    assert node.messages[3].parts is not None  # content blocks, shown as a tree too
    assert to_node([{"role": "user", "content": "plain"}]).kind == "messages"
    assert to_node([HumanMessage(content="a"), 3]).kind == "list"
    assert to_node([]).kind == "list"


def test_a_long_conversation_shows_its_end() -> None:
    node = to_node([HumanMessage(content=f"m{i}") for i in range(MAX_ITEMS + 3)])
    assert node.more == 3
    assert node.messages[-1].text == f"m{MAX_ITEMS + 2}"
    assert node.messages[0].text == "m3"


# --- undecodable values -----------------------------------------------------------------------


@dataclasses.dataclass
class Secret:
    value: int


def test_the_lenient_serializer_stands_in_for_a_refused_class() -> None:
    writer = MsgpackSerializer(allowlist=[(Secret.__module__, "Secret")])
    stored = writer.dumps_typed({"s": Secret(1)})
    lenient = LenientSerializer(MsgpackSerializer())
    value = lenient.loads_typed(stored)
    assert isinstance(value, Undecodable)
    assert value.type_name == f"{Secret.__module__}.Secret"
    assert f"--allow {Secret.__module__}:Secret" in value.hint
    node = to_node(value)
    assert node.kind == "undecodable"
    assert node.label == value.type_name
    damaged = lenient.loads_typed(("msgpack", b"\xc1"))
    assert isinstance(damaged, Undecodable)
    assert damaged.type_name is None
    assert "could not be read" in damaged.hint
    assert lenient.dumps_typed([1]) == MsgpackSerializer().dumps_typed([1])


# --- fork edits -------------------------------------------------------------------------------


def test_plain_json_values_are_editable() -> None:
    assert as_plain_json({"a": [1, 2.5, None, True, "x"]}) == (
        '{\n  "a": [\n    1,\n    2.5,\n    null,\n    true,\n    "x"\n  ]\n}'
    )
    assert as_plain_json("é") == '"é"'
    for value in [(1, 2), {1: "a"}, float("nan"), HumanMessage(content="x"), Color.RED, b"x"]:
        assert as_plain_json(value) is None, value


def test_parse_edits_keeps_the_changed_channels_only() -> None:
    current = {"a": "yes", "n": 1, "flag": True, "items": [1]}
    edits = parse_edits({"a": '"yes"', "n": "1.0", "flag": "true", "items": "[1, 2]"}, current)
    assert edits == {"n": 1.0, "items": [1, 2]}  # 1 -> 1.0 is a change of type
    with pytest.raises(ConfigError, match="'a' is not JSON"):
        parse_edits({"a": "{nope"}, current)
    with pytest.raises(ConfigError, match="cannot be edited"):
        parse_edits({"messages": "[]"}, current)


# --- the command ------------------------------------------------------------------------------


def test_loopback_hosts() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "127.8.0.1", "localhost", "::1", "[::1]"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.0.2.1", "example.org"]))


def _serve(*args: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    script = Path(sys.executable).with_name("tether")
    proc = subprocess.Popen(
        [str(script), "ui", *args, "--port", "0", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROWSER": "true", **env},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"tether ui did not start: {line!r} {err!r}")
    return proc, line


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def test_the_command_serves_the_store(tmp_path: Path) -> None:
    from tether.backends.sqlite import SqliteSaver
    from tether.checkpoint import empty_checkpoint, make_config

    path = tmp_path / "one.db"
    with SqliteSaver(str(path)) as saver:
        cp = empty_checkpoint()
        saver.put(make_config("thread <1>"), cp, {"source": "input", "step": -1}, {})
    proc, line = _serve(TETHER_STORE=str(path))  # the store from the environment
    try:
        assert "(read-only)" in line
        url = line[line.index("http://") :].split()[0]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read().decode()
            assert response.headers["content-security-policy"].startswith("default-src 'none'")
        assert "thread &lt;1&gt;" in body
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    assert "Traceback" not in err


def test_a_non_loopback_host_is_served_with_a_warning(tmp_path: Path) -> None:
    from tether.backends.sqlite import SqliteSaver

    path = tmp_path / "empty.db"
    SqliteSaver(str(path)).close()
    proc, line = _serve(str(path), "--host", "0.0.0.0", "--allow-edit")
    try:
        assert "(editing allowed)" in line
        port = line.split("http://0.0.0.0:")[1].split("/")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
            assert response.status == 200
    finally:
        code, err = _stop(proc)
    assert "warning: --host 0.0.0.0 serves the viewer beyond this machine" in err
    assert "fork, copy and delete" in err
    assert code == 0


def test_a_missing_store_is_a_one_line_error(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("tether")
    done = subprocess.run(
        [str(script), "ui", str(tmp_path / "nope.db"), "--no-open"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("Error: no tether store at ")
    assert "Traceback" not in done.stderr


def test_only_the_served_address_is_answered(tmp_path: Path) -> None:
    """A page of another site that rebinds its name to 127.0.0.1 gets a 400, not the store."""
    from starlette.testclient import TestClient

    from tether.backends.sqlite import SqliteSaver
    from tether.cli._stores import opened
    from tether.ui import Viewer, create_app

    path = tmp_path / "one.db"
    SqliteSaver(str(path)).close()
    with opened(str(path), read_only=True) as st:
        app = create_app(Viewer(st, allow_edit=False))
        for host in ("127.0.0.1", "localhost", "[::1]"):
            with TestClient(app, base_url=f"http://{host}:8700") as client:
                answer = client.get("/")
                assert answer.status_code == 200, host
                assert answer.headers["x-frame-options"] == "DENY"
        with TestClient(app, base_url="http://attacker.example:8700") as client:
            assert client.get("/").status_code == 400


def test_a_fork_keeps_a_value_the_viewer_cannot_read(tmp_path: Path) -> None:
    """Only the edited channels are written: a refused class elsewhere in the state is
    carried over by its version, never read or rewritten."""
    from tether.backends.sqlite import SqliteSaver
    from tether.checkpoint import empty_checkpoint, make_config
    from tether.cli._stores import opened
    from tether.ui import Viewer

    path = tmp_path / "mixed.db"
    allowed = MsgpackSerializer(allowlist=[(Secret.__module__, "Secret")])
    with SqliteSaver(str(path), serde=allowed) as saver:
        cp = empty_checkpoint()
        cp["channel_values"] = {"secret": Secret(7), "note": "a"}
        cp["channel_versions"] = {"secret": saver.get_next_version(None), "note": "1"}
        versions = dict(cp["channel_versions"])
        base = saver.put(make_config("t"), cp, {"source": "loop", "step": 3}, versions)
    base_id = base["configurable"]["checkpoint_id"]
    with opened(str(path)) as st:
        viewer = Viewer(st, allow_edit=True)
        point = viewer.point("t", "", base_id)
        assert isinstance(point.tup.checkpoint["channel_values"]["secret"], Undecodable)
        assert viewer.editable(point) == {"note": "a"}
        new_id = viewer.fork("t", base_id, {"note": '"b"'})
    with SqliteSaver(str(path), serde=allowed) as saver:
        fork = saver.get_tuple(make_config("t", "", new_id))
    assert fork is not None
    assert fork.checkpoint["channel_values"] == {"secret": Secret(7), "note": "b"}
    assert fork.checkpoint["channel_versions"]["secret"] == versions["secret"]
    assert fork.metadata == {"source": "fork", "step": 4, "parents": {}}

"""What a stored value may cost to read, and that it is read whole (issue #18.1, #18.3).

A value's nesting is counted before it is decoded, across typed (ext) values,
against a fixed limit (tether.serde._depth.MAX_DEPTH levels, a typed value
counting EXT_LEVELS): deeper is a DecodeError naming the limit and the path,
whatever sys.getrecursionlimit() says and on a thread with a 256 KiB stack;
and every MessagePack value (the stored one and each ext payload inside it)
must end exactly where its bytes end. Crash tests run in subprocesses, so a
segfault fails the test instead of killing pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import ormsgpack
import pytest

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer, _depth
from tether.serde._depth import EXT_LEVELS, MAX_DEPTH, too_deep

from . import models as m

SERDE = MsgpackSerializer(allowlist=m.ALL)
PERSON = m.Person(name="ada", age=36, address=m.Address(city="London"))


def _tuple_ext(inner: bytes) -> bytes:
    """An ext 0 ``tuple`` envelope whose argument is ``inner`` (already packed)."""
    envelope = b"\x93" + ormsgpack.packb("builtins") + ormsgpack.packb("tuple") + inner
    return ormsgpack.packb(ormsgpack.Ext(0, envelope))


def nested_ext_bomb(levels: int = 20, arrays: int = 1000) -> bytes:
    """``levels`` ext values inside each other, each holding ``arrays`` nested arrays.

    Each ext payload is within what one ``unpackb`` call allows, which is how
    the whole used to overflow the C stack: the ext hook starts a fresh call
    per level, each with a fresh depth count.
    """
    inner = ormsgpack.packb([None])
    for _ in range(levels):
        inner = _tuple_ext(b"\x91" * arrays + inner)
    return inner


def nested_arrays(levels: int) -> bytes:
    """``levels`` arrays inside each other, the innermost empty."""
    return b"\x91" * (levels - 1) + b"\x90"


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_nested_ext_values_are_a_decode_error_not_a_segfault() -> None:
    """#18.1: 20 ext levels x 1,000 arrays (~20 KB) killed the process (SIGSEGV)."""
    payload = nested_ext_bomb()
    assert len(payload) < 25_000
    proc = _run(
        f"""
        from tether.errors import DecodeError
        from tether.serde import MsgpackSerializer
        try:
            MsgpackSerializer().loads_typed(("msgpack", {payload!r}))
        except DecodeError as exc:
            print("DecodeError:", exc)
        else:
            print("decoded")
        """
    )
    assert proc.returncode == 0, f"exit {proc.returncode} (negative: killed by a signal)"
    assert proc.stdout.startswith("DecodeError:"), proc.stdout + proc.stderr
    assert "nested too deeply" in proc.stdout


def test_nested_ext_values_in_a_worker_thread(tmp_path: Path) -> None:
    """A thread with a 1 MiB stack (macOS gives threads 512 KiB, some servers less)."""
    stored = tmp_path / "bomb.bin"
    stored.write_bytes(nested_ext_bomb(levels=40))
    proc = _run(
        """
        import pathlib, sys, threading
        from tether.errors import DecodeError
        from tether.serde import MsgpackSerializer
        payload = pathlib.Path(sys.argv[1]).read_bytes()
        out = []
        def read():
            try:
                MsgpackSerializer().loads_typed(("msgpack", payload))
            except DecodeError as exc:
                out.append("DecodeError")
        threading.stack_size(1 << 20)
        t = threading.Thread(target=read)
        t.start()
        t.join()
        print(out)
        """,
        str(stored),
    )
    assert proc.returncode == 0, f"exit {proc.returncode} (negative: killed by a signal)"
    assert proc.stdout.strip() == "['DecodeError']", proc.stdout + proc.stderr


def test_ordinary_nesting_still_reads() -> None:
    """The limit is about the whole value's depth, not about ext values as such."""
    value: Any = "leaf"
    for i in range(60):  # typed values inside each other, with lists between
        value = m.Holder(PERSON, [], m.Point(i), {"v": [[value]]}) if i % 3 else (value,)
    assert SERDE.loads_typed(SERDE.dumps_typed(value)) == value
    deep: Any = None
    for _ in range(200):
        deep = [deep]
    assert SERDE.loads_typed(SERDE.dumps_typed((deep,))) == (deep,)


def test_a_hundred_nested_dicts_round_trip() -> None:
    """Sane deep state (LangChain messages nest a few levels; 100 is generous) still reads."""
    from langchain_core.messages import AIMessage

    serde = MsgpackSerializer()
    value: Any = {"leaf": AIMessage("hi", id="1", additional_kwargs={"a": {"b": [1]}})}
    for i in range(100):
        value = {f"k{i}": value, "n": i}
    state = {"messages": [AIMessage("x", id="2")], "deep": value}
    assert serde.loads_typed(serde.dumps_typed(state)) == state


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes are walked before decoding, as where the recursion guard may not hold."""
    monkeypatch.setattr(_depth, "guard_suffices", lambda: False)


def test_under_the_default_guard_the_depth_is_the_recursion_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """glibc, default limit, big stacks: msgspec's recursion guard bounds the depth, no walk."""
    monkeypatch.setattr(_depth, "guard_suffices", lambda: True)
    assert SERDE.loads_typed(("msgpack", nested_arrays(MAX_DEPTH + 100))) is not None
    with pytest.raises(DecodeError, match="nested too deeply"):
        SERDE.loads_typed(("msgpack", nested_arrays(5_000)))


def test_the_walk_runs_where_the_guard_may_not_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "getrecursionlimit", lambda: 100_000)
    assert not _depth.guard_suffices()
    monkeypatch.undo()
    monkeypatch.setattr(threading, "stack_size", lambda: 256 * 1024)
    assert not _depth.guard_suffices()


@pytest.mark.usefixtures("walked")
def test_the_limit_is_exact_and_the_error_names_it_and_the_path() -> None:
    # MAX_DEPTH levels read (as far as depth goes); one more is refused before decoding
    assert SERDE.loads_typed(("msgpack", nested_arrays(MAX_DEPTH))) is not None
    with pytest.raises(DecodeError, match=f"limit of {MAX_DEPTH} levels") as info:
        SERDE.loads_typed(("msgpack", nested_arrays(MAX_DEPTH + 1)))
    assert info.value.path.startswith("$[0][0][0]")
    # inside a map, under a typed value: the path is the decoded value's
    inner = _tuple_ext(nested_arrays(MAX_DEPTH))
    data = b"\x82" + ormsgpack.packb("messages") + ormsgpack.packb([1]) + ormsgpack.packb("deep")
    with pytest.raises(DecodeError, match="nested too deeply") as info:
        SERDE.loads_typed(("msgpack", data + b"\x91" + inner))
    assert info.value.path.startswith("$.deep[0][0][0]"), info.value.path
    assert f"a typed value counts {EXT_LEVELS}" in str(info.value)
    # typed values count EXT_LEVELS each, plus their envelope array
    levels = (MAX_DEPTH - 1) // (EXT_LEVELS + 1)
    assert SERDE.loads_typed(("msgpack", nested_ext_bomb(levels, 0))) is not None
    with pytest.raises(DecodeError, match="nested too deeply"):
        SERDE.loads_typed(("msgpack", nested_ext_bomb(levels + 1, 0)))


# Each script prints "DecodeError" with the message, or "decoded"; a negative exit is a signal.
_READ_BOMB = """
    import pathlib, sys, threading
    from tether.errors import DecodeError
    from tether.serde import MsgpackSerializer
    payload = pathlib.Path(sys.argv[1]).read_bytes()
    out = []
    def read():
        try:
            MsgpackSerializer().loads_typed((sys.argv[2], payload))
        except DecodeError as exc:
            out.append(f"DecodeError {exc}")
        else:
            out.append("decoded")
    if sys.argv[4:] == ["raised"]:
        sys.setrecursionlimit(100_000)
    if sys.argv[3] == "main":
        read()
    else:
        threading.stack_size(int(sys.argv[3]))
        t = threading.Thread(target=read)
        t.start()
        t.join()
    print(out[0])
"""


def _read_in_child(
    tmp_path: Path, payload: bytes, where: str, tag: str = "msgpack", limit: str = "raised"
) -> str:
    stored = tmp_path / "bomb.bin"
    stored.write_bytes(payload)
    proc = _run(_READ_BOMB, str(stored), tag, where, limit)
    assert proc.returncode == 0, f"exit {proc.returncode} (negative: killed by a signal)"
    return proc.stdout + proc.stderr


def test_a_raised_recursion_limit_does_not_raise_the_depth_limit(tmp_path: Path) -> None:
    """#18.1: with sys.setrecursionlimit(100000), 100 ext levels x 1,000 arrays segfaulted."""
    out = _read_in_child(tmp_path, nested_ext_bomb(levels=100), "main")
    assert out.startswith("DecodeError"), out
    assert f"limit of {MAX_DEPTH} levels" in out
    assert "at `$[0][0]" in out  # the path, shortened
    # plain arrays too: msgspec alone recursed ~28,000 levels into an 8 MB stack
    out = _read_in_child(tmp_path, nested_arrays(200_000), "main")
    assert out.startswith("DecodeError"), out


def test_a_256_kib_thread_stack(tmp_path: Path) -> None:
    """#18.1: 20 ext levels segfaulted a thread made with threading.stack_size(256 KiB)."""
    out = _read_in_child(tmp_path, nested_ext_bomb(), str(256 * 1024), limit="default")
    assert out.startswith("DecodeError"), out
    assert "nested too deeply" in out


@pytest.mark.parametrize("shape", ["arrays", "typed", "mixed"])
def test_the_deepest_allowed_values_read_on_a_256_kib_thread(tmp_path: Path, shape: str) -> None:
    """What the limit allows fits a small thread's stack (the recursion limit raised).

    Measured on CPython 3.11 x86-64: each of these needs 152-160 KiB of thread
    stack, so a 256 KiB thread keeps ~100 KiB for its caller's frames.
    """
    levels = (MAX_DEPTH - 1) // (EXT_LEVELS + 1)
    payload = {
        "arrays": nested_arrays(MAX_DEPTH),
        "typed": nested_ext_bomb(levels, 0),
        "mixed": nested_ext_bomb(20, (MAX_DEPTH - 1) // 20 - EXT_LEVELS - 1),
    }[shape]
    assert not too_deep(payload)
    out = _read_in_child(tmp_path, payload, str(256 * 1024))
    assert out.strip() == "decoded", out


def test_a_legacy_json_bomb(tmp_path: Path) -> None:
    """json.loads recursed in C as deep as the recursion limit let it: a segfault too."""
    out = _read_in_child(tmp_path, b"[" * 200_000 + b"]" * 200_000, "main", tag="json")
    assert out.startswith("DecodeError"), out
    assert f"limit of {MAX_DEPTH} levels" in out
    deep: Any = 1
    for _ in range(200):  # 400 levels; the brackets inside strings are not levels
        deep = {"s": "[[[{{", "v": [deep]}
    assert SERDE.loads_typed(("json", json.dumps(deep).encode())) == deep


_SQLITE_READ = """
    import sys, threading
    from tether import SqliteSaver
    from tether.errors import DecodeError
    out = []
    def read():
        with SqliteSaver(sys.argv[1]) as saver:
            try:
                saver.get_tuple({"configurable": {"thread_id": "t"}})
            except DecodeError as exc:
                out.append(f"DecodeError {exc}")
            else:
                out.append("read")
    sys.setrecursionlimit(100_000)
    if sys.argv[2] == "main":
        read()
    else:
        threading.stack_size(256 * 1024)
        t = threading.Thread(target=read)
        t.start()
        t.join()
    print(out[0])
"""


class _BombWriter(MsgpackSerializer):
    """Writes the bomb for the string "BOMB": a hostile or broken writer of the same file."""

    def __init__(self, bomb: bytes) -> None:
        super().__init__()
        self.bomb = bomb

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj == "BOMB":
            return "msgpack", self.bomb
        return super().dumps_typed(obj)


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_bomb_in_a_real_sqlite_file_is_a_decode_error(tmp_path: Path, where: str) -> None:
    """The reported route: a stored value read back by get_tuple, in a real file."""
    from tether import SqliteSaver, empty_checkpoint

    path = tmp_path / "store.db"
    # inline_primitives=False: the writer's bytes for the string go to a value row
    bomb = _BombWriter(nested_ext_bomb(levels=100))
    with SqliteSaver(path, serde=bomb, inline_primitives=False) as saver:
        ckpt = empty_checkpoint()
        ckpt["channel_values"] = {"messages": "BOMB", "ok": "fine"}
        versions = {"messages": saver.get_next_version(None), "ok": saver.get_next_version(None)}
        ckpt["channel_versions"] = versions
        saver.put({"configurable": {"thread_id": "t"}}, ckpt, {}, versions)
    proc = _run(_SQLITE_READ, str(path), where)
    assert proc.returncode == 0, f"exit {proc.returncode} (negative: killed by a signal)"
    out = proc.stdout + proc.stderr
    assert out.startswith("DecodeError"), out
    assert "nested too deeply" in out
    assert "'messages'" in out  # the backend names the channel


# --- #18.3: trailing bytes --------------------------------------------------------------


def test_trailing_bytes_after_the_value() -> None:
    """ormsgpack returns the first value and ignores the rest: [1, 2, 3] from 5 bytes."""
    with pytest.raises(DecodeError, match="1 byte after the end of the value") as info:
        SERDE.loads_typed(("msgpack", b"\x93\x01\x02\x03\x04"))
    assert info.value.path == "$"


def test_a_flipped_length_byte_does_not_shorten_a_history() -> None:
    """The reported case: a list of 3 messages whose array header says 1."""
    from langchain_core.messages import AIMessage, HumanMessage

    serde = MsgpackSerializer()
    history = [HumanMessage("hi", id="1"), AIMessage("hello", id="2"), HumanMessage("bye", id="3")]
    tag, data = serde.dumps_typed(history)
    assert data[0] == 0x93
    with pytest.raises(DecodeError, match="after the end of the value"):
        serde.loads_typed((tag, b"\x91" + data[1:]))


def test_trailing_bytes_inside_an_ext_payload_name_the_path() -> None:
    item = ormsgpack.packb(["tests.serde.models", "Item", {"k": "a", "count": 1}]) + b"\xc0"
    data = ormsgpack.packb({"items": [1, ormsgpack.Ext(2, item)]})
    with pytest.raises(DecodeError, match="1 byte after the end") as info:
        SERDE.loads_typed(("msgpack", data))
    assert info.value.path == "$.items[1]"
    assert "ext 2" in str(info.value)


@pytest.mark.parametrize("size", [8, 4096])
def test_trailing_bytes_inside_a_numpy_payload(size: int) -> None:
    """Both ways an array is read: unpacked whole (small) and found in place (large)."""
    import numpy as np

    arr = np.arange(size, dtype=np.float64)
    meta = ormsgpack.packb([arr.dtype.str, [size], "C"])[1:]
    buffer = ormsgpack.packb(arr.tobytes())
    good = b"\x94" + meta + buffer
    assert np.array_equal(
        SERDE.loads_typed(("msgpack", ormsgpack.packb(ormsgpack.Ext(6, good)))), arr
    )
    # a byte after the buffer, and a byte between the head and the buffer
    for bad in (good + b"\x00", b"\x94" + meta + b"\xc0" + buffer):
        with pytest.raises(DecodeError):
            SERDE.loads_typed(("msgpack", ormsgpack.packb([ormsgpack.Ext(6, bad)])))


def test_trailing_bytes_after_a_legacy_json_value() -> None:
    with pytest.raises(DecodeError):
        SERDE.loads_typed(("json", b'{"a": 1} {"b": 2}'))

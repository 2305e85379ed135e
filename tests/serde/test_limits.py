"""What a stored value may cost to read, and that it is read whole (issue #18.1, #18.3).

Every value is read by one decoder whose nesting is counted across typed (ext)
values: a value nested deeper than Python's recursion limit allows is a
DecodeError, never a C stack overflow; and every MessagePack value (the stored
one and each ext payload inside it) must end exactly where its bytes end.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
import serde_models as m

from tether.errors import DecodeError
from tether.serde import MsgpackSerializer

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
    item = ormsgpack.packb(["serde_models", "Item", {"k": "a", "count": 1}]) + b"\xc0"
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

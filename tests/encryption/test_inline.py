"""Small values sealed inline in the checkpoint head (#17), on SQLite files and Postgres.

An encrypting saver keeps small str/int/float/bool/None values in the head, as
a saver in clear does. Sealed on its own, a value is bound to (thread,
namespace, channel, version): a put that carries the channel over copies the
sealed value as it is, and a copy to another thread seals it again. That is
how Postgres keeps them, and SQLite when its ring keeps metadata in clear; a
SQLite saver that seals metadata seals the values a put names with it, in the
checkpoint's envelope (``test_envelope.py``), and a value it carries over on
its own. Tampering and moving tests make SQLite's row checksum agree first, so
what refuses the value is the AES-GCM tag.
"""

from __future__ import annotations

import base64
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import SqliteSaver
from tether.backends._inline import inline_value
from tether.checkpoint import empty_checkpoint
from tether.encryption import (
    Encryption,
    inline_place,
    key_id_of,
    open_inline,
    seal_inline,
)
from tether.errors import ConfigError, DecodeError
from tether.ids import uuid6

from ..postgres.conftest import fresh_schema
from .helpers import Raw, new_path, ring, snapshot

DATA = Path(__file__).parent / "data"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def raw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Raw]:
    if request.param == "sqlite":
        yield Raw("sqlite", new_path(tmp_path))
        return
    dsn = request.getfixturevalue("pg_dsn")
    yield Raw("postgres", dsn, fresh_schema())


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _put(saver: Any, config: dict[str, Any], values: dict[str, Any], **versions: str) -> Any:
    """A checkpoint after ``config`` naming only ``versions`` (the rest carried over)."""
    tup = saver.get_tuple(config) if config["configurable"].get("checkpoint_id") else None
    ck = tup.checkpoint if tup is not None else empty_checkpoint()
    ck["id"] = str(uuid6())
    ck["channel_values"] = {**ck["channel_values"], **values}
    ck["channel_versions"] = {**ck["channel_versions"], **versions}
    return saver.put(config, ck, {"source": "loop", "step": 0}, versions)


def _values(saver: Any, thread: str) -> dict[str, Any]:
    tup = saver.get_tuple(_config(thread))
    assert tup is not None
    return dict(tup.checkpoint["channel_values"])


def test_a_carried_over_value_stays_sealed_and_reads_back(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        v1 = saver.get_next_version(None)
        cfg = _put(saver, _config("t"), {"name": "Alice", "n": 1}, name=v1, n=v1)
        v2 = saver.get_next_version(v1)
        _put(saver, cfg, {"n": 2}, n=v2)  # "name" carried over from the parent's head
        assert _values(saver, "t") == {"name": "Alice", "n": 2}
    inline = raw.head("t")["channel_values"]
    assert set(inline) == {"name", "n"}
    # carried over: sealed on its own; named by the put: in its envelope on SQLite
    assert len(inline["name"]) == 1  # ["base64"]
    assert len(inline["n"]) == (0 if raw.kind == "sqlite" else 1)
    assert "Alice" not in str(inline)


def test_one_flipped_byte_of_a_sealed_head_value_is_refused(raw: Raw) -> None:
    with raw.saver(ring("k1", metadata=False)) as saver:  # each value sealed on its own
        v = saver.get_next_version(None)
        _put(saver, _config("t"), {"ssn": "111-22-3333"}, ssn=v)
    head = raw.head("t")
    sealed = base64.b64decode(head["channel_values"]["ssn"][0])
    for at in (1, len(sealed) // 2, len(sealed) - 1):  # header, body, tag
        changed = bytearray(sealed)
        changed[at] ^= 0x01
        text = base64.b64encode(bytes(changed)).decode()
        raw.set_head("t", {**head, "channel_values": {"ssn": [text]}})
        with raw.saver(ring("k1", metadata=False)) as saver, pytest.raises(DecodeError) as err:
            saver.get_tuple(_config("t"))
        assert "'t'" in str(err.value)
    # Not base64, or an object that is not a sealed value: damage, named.
    for bad in (["%%%"], [text, text], [], [1], {"y": text}):
        raw.set_head("t", {**head, "channel_values": {"ssn": bad}})
        with (
            raw.saver(ring("k1", metadata=False)) as saver,
            pytest.raises(DecodeError, match="channel 'ssn'"),
        ):
            saver.get_tuple(_config("t"))
    raw.set_head("t", head)
    with raw.saver(ring("k1", metadata=False)) as saver:
        assert _values(saver, "t") == {"ssn": "111-22-3333"}


def test_a_sealed_head_value_moved_to_another_thread_channel_or_version_is_refused(
    raw: Raw,
) -> None:
    keys = ring("k1", metadata=False)  # each value sealed on its own
    with raw.saver(keys) as saver:
        v = saver.get_next_version(None)
        _put(saver, _config("alice"), {"ssn": "111-22-3333", "name": "Alice"}, ssn=v, name=v)
        _put(saver, _config("mallory"), {"ssn": "999-99-9999", "name": "Mallory"}, ssn=v, name=v)
    alice, mallory = raw.head("alice"), raw.head("mallory")
    stolen = alice["channel_values"]["ssn"]
    moves = {
        "another thread": ("mallory", {**mallory["channel_values"], "ssn": stolen}, "ssn"),
        "another channel": ("alice", {**alice["channel_values"], "name": stolen}, "name"),
    }
    for what, (thread, inline, channel) in moves.items():
        head = mallory if thread == "mallory" else alice
        raw.set_head(thread, {**head, "channel_values": inline})
        with raw.saver(keys) as saver, pytest.raises(DecodeError) as err:
            saver.get_tuple(_config(thread))
        assert "does not authenticate under key 'k1'" in str(err.value), what
        assert f"channel {channel!r}" in str(err.value), what
        raw.set_head(thread, head)
    # The same ciphertext at another version of its own channel (a rolled-back value).
    versions = {**alice["channel_versions"], "ssn": "00000000000000000000000000000009.0.5"}
    raw.set_head("alice", {**alice, "channel_versions": versions})
    with raw.saver(keys) as saver, pytest.raises(DecodeError, match="authenticate"):
        saver.get_tuple(_config("alice"))


def test_a_saver_without_the_key_names_it_and_cannot_copy(raw: Raw) -> None:
    with raw.saver(ring("k1", metadata=False)) as saver:
        v = saver.get_next_version(None)
        _put(saver, _config("src"), {"flag": True}, flag=v)  # only a head value is sealed
    with raw.saver(False) as saver:
        with pytest.raises(DecodeError, match="key 'k1'") as err:
            saver.get_tuple(_config("src"))
        assert "channel 'flag'" in str(err.value)
        with pytest.raises(ConfigError, match="keyring"):
            saver.copy_thread("src", "dst")
        assert saver.get_tuple(_config("dst")) is None
    with raw.saver(ring("k2")) as saver, pytest.raises(DecodeError, match="does not have"):
        saver.get_tuple(_config("src"))


def test_copy_thread_seals_head_values_again_for_the_target(raw: Raw) -> None:
    with raw.saver(ring("k1", metadata=False)) as saver:
        v = saver.get_next_version(None)
        _put(saver, _config("src"), {"flag": True, "note": "hi"}, flag=v, note=v)
        saver.copy_thread("src", "dst")
        assert _values(saver, "dst") == {"flag": True, "note": "hi"}
    src, dst = raw.head("src")["channel_values"], raw.head("dst")["channel_values"]
    assert set(src) == set(dst) == {"flag", "note"}
    assert all(src[c] != dst[c] for c in src)


def test_a_store_written_before_head_sealing_reads_writes_and_rekeys(tmp_path: Path) -> None:
    """``data/sealed_rows_v1.db``: written by tether 0a42ad0, whose encrypting savers kept
    every value in a sealed row (nothing inline in the head), with key id ``old``.

    Made by a script like ``fill``: thread ``t1``, three steps of ``count`` (int),
    ``status`` (str, not named by the last step) and ``messages``, two writes a step.
    """
    path = tmp_path / "v1.db"
    shutil.copyfile(DATA / "sealed_rows_v1.db", path)
    conn = sqlite3.connect(path)
    old_heads = [h for (h,) in conn.execute("SELECT checkpoint FROM tether_checkpoints")]
    conn.close()
    assert len(old_heads) == 3
    assert not any(b"channel_values" in h for h in old_heads)  # every value in a row
    old = base64.b64decode("dGV0aGVyLWZpeHR1cmUta2V5LW5vdC1hLXNlY3JldCE=")
    keys = {"old": old, "new": b"\x05" * 32}
    with SqliteSaver(path, encryption=Encryption(keys, active="old")) as saver:
        before = snapshot(saver, "t1")
        assert [t[1]["count"] for t in before] == [2, 1, 0]
        assert before[0][1]["status"] == "step 1"  # carried over by the last step
        assert before[0][2]["user"] == "alice"
        assert before[0][3] == [("task-2", "count", 3), ("task-2", "messages", ["w"])]
        # A new step on the old thread: its small values go sealed into its head,
        # "status" is carried over from a value row.
        latest = saver.get_tuple(_config("t1")).checkpoint
        v = saver.get_next_version(latest["channel_versions"]["count"])
        _put(saver, before[0][0], {"count": 9}, count=v)
        assert _values(saver, "t1")["count"] == 9
        assert _values(saver, "t1")["status"] == "step 1"
        saver.copy_thread("t1", "t2")
        assert snapshot(saver, "t2")[1:] == [
            ({"configurable": {**c["configurable"], "thread_id": "t2"}}, *rest)
            for c, *rest in before
        ]
    with SqliteSaver(path, encryption=Encryption(keys, active="old")) as saver:
        # Format 1 (16-byte salts) is rewritten in format 2 even under the same key.
        assert saver.rekey_pending() > 0
    with SqliteSaver(path, encryption=Encryption(keys, active="new")) as saver:
        assert saver.rekey() > 0
        assert saver.rekey_pending() == 0
    with SqliteSaver(path, encryption=Encryption({"new": keys["new"]})) as saver:
        assert snapshot(saver, "t1")[1:] == before
    conn = sqlite3.connect(path)
    heads = [h for (h,) in conn.execute("SELECT checkpoint FROM tether_checkpoints")]
    conn.close()
    assert any(b'"count":[]' in h for h in heads)  # the new step's, in its envelope


_inline_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=256),
).filter(inline_value)
_kids = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_inline_values, kids=st.lists(_kids, min_size=1, max_size=3, unique=True))
def test_sealed_head_values_round_trip_exactly(value: Any, kids: list[str]) -> None:
    keys = {k: bytes([len(k)]) * 32 for k in kids}
    ring_ = Encryption(keys, active=kids[-1])
    place = inline_place("t", "", "c", "1")
    stored = seal_inline(ring_, place, value)
    assert key_id_of(base64.b64decode(stored[0])) == kids[-1]
    back = open_inline(Encryption(dict(reversed(keys.items()))), stored, place, str)
    assert back == value
    assert type(back) is type(value)
    with pytest.raises(DecodeError):
        open_inline(ring_, stored, inline_place("t", "", "c", "2"), str)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(["a", "b", "c"]), _inline_values, min_size=1))
def test_sealed_head_values_round_trip_through_sqlite(tmp_path_factory: Any, values: Any) -> None:
    path = tmp_path_factory.mktemp("inline") / "s.db"
    with SqliteSaver(path, encryption={"k": b"\x09" * 32}) as saver:
        v = saver.get_next_version(None)
        _put(saver, _config("t"), values, **dict.fromkeys(values, v))
        got = _values(saver, "t")
    assert got == values
    assert all(type(got[c]) is type(values[c]) for c in values)


def test_a_sealed_head_value_seeds_the_delta_history_walk(raw: Raw) -> None:
    """LangGraph's get_delta_channel_history: an ancestor's sealed head value is the seed."""
    with raw.saver(ring("k1")) as saver:
        v1 = saver.get_next_version(None)
        first = _put(saver, _config("t"), {"count": 41}, count=v1)
        saver.put_writes(first, [("count", 1)], task_id="a")
        second = _put(saver, first, {"other": [1]}, other=v1)
        got = saver.delta_history(second, ["count"])
        assert got is not None
        assert got["count"]["seed"] == 41
        assert got["count"]["writes"] == [("a", "count", 1)]
    with raw.saver(ring("k2")) as saver, pytest.raises(DecodeError, match="key 'k1'"):
        saver.delta_history(second, ["count"])

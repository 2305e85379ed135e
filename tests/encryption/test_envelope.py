"""A checkpoint's envelope (#17, format 3), on SQLite files.

An encrypting SQLite saver seals the small values a put names with the
checkpoint's metadata, as one value, and marks each ``[]`` in the head. These
tests tamper with real rows (the row checksum made to agree, so what refuses
a change is the AES-GCM tag or the envelope's own checks), carry values over
from envelopes, copy and rekey threads, and read a store written before the
envelope (``data/sealed_heads_v2.db``).
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tether import SqliteSaver
from tether.checkpoint import empty_checkpoint
from tether.encryption import SEALED_METADATA, Encryption, key_id_of
from tether.errors import DecodeError
from tether.ids import uuid6

from .helpers import Raw, new_path, ring, snapshot

DATA = Path(__file__).parent / "data"


@pytest.fixture
def raw(tmp_path: Path) -> Raw:
    return Raw("sqlite", new_path(tmp_path))


def _config(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        cfg["checkpoint_id"] = checkpoint_id
    return {"configurable": cfg}


def _put(
    saver: Any,
    config: dict[str, Any],
    values: dict[str, Any],
    metadata: dict[str, Any] | None = None,
    **versions: str,
) -> Any:
    """A checkpoint after ``config`` naming only ``versions`` (the rest carried over)."""
    tup = saver.get_tuple(config) if config["configurable"].get("checkpoint_id") else None
    ck = tup.checkpoint if tup is not None else empty_checkpoint()
    ck["id"] = str(uuid6())
    ck["channel_values"] = {**ck["channel_values"], **values}
    ck["channel_versions"] = {**ck["channel_versions"], **versions}
    return saver.put(config, ck, metadata or {"source": "loop", "step": 0}, versions)


def _values(saver: Any, config: dict[str, Any]) -> dict[str, Any]:
    tup = saver.get_tuple(config)
    assert tup is not None
    return dict(tup.checkpoint["channel_values"])


def _sealed(metadata_text: str) -> bytes:
    return base64.b64decode(json.loads(metadata_text)[SEALED_METADATA])


def _heads(path: str, thread: str = "t") -> list[dict[str, Any]]:
    """The stored heads of a thread, oldest first."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT checkpoint FROM tether_checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread,),
        )
        return [json.loads(h) for (h,) in rows]
    finally:
        conn.close()


def test_a_put_seals_its_small_values_with_its_metadata_in_one_envelope(raw: Raw) -> None:
    values = {"status": "secret status", "count": 7, "flag": None, "doc": ["a long"] * 50}
    with raw.saver(ring("k1", allow_plaintext=False)) as saver:
        v = saver.get_next_version(None)
        meta = {"source": "loop", "step": 3, "note": "secret note"}
        cfg = _put(saver, _config("t"), values, meta, **dict.fromkeys(values, v))
        tup = saver.get_tuple(cfg)
        assert tup.checkpoint["channel_values"] == values
        assert tup.metadata["note"] == "secret note"
    head = raw.head("t")
    assert head["channel_values"] == {"status": [], "count": [], "flag": []}
    text = raw.metadata("t")
    sealed = _sealed(text)
    assert sealed[0] == 3  # the envelope's format
    assert key_id_of(sealed) == "k1"
    assert "secret" not in text
    assert "secret" not in json.dumps(head)
    assert {b[0] for b in raw.blobs("t")} == {"doc"}  # only the list has a row


def test_an_envelope_changed_moved_or_contradicted_by_its_head_is_refused(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        v = saver.get_next_version(None)
        first = _put(saver, _config("alice"), {"ssn": "111-22-3333", "n": 1}, ssn=v, n=v)
        v2 = saver.get_next_version(v)
        _put(saver, first, {"ssn": "111-22-4444", "n": 2}, ssn=v2, n=v2)
        _put(saver, _config("mallory"), {"ssn": "999-99-9999", "n": 1}, ssn=v, n=v)
    head, text = raw.head("alice"), raw.metadata("alice")
    older = json.dumps(
        {
            **json.loads(text),
            SEALED_METADATA: json.loads(_first_metadata(raw, "alice"))[SEALED_METADATA],
        }
    )
    sealed = _sealed(text)
    flipped = bytearray(sealed)
    flipped[len(sealed) // 2] ^= 0x01
    relabelled = bytes([2]) + sealed[1:]  # the format is in the associated data
    changes = {
        "a flipped byte": base64.b64encode(bytes(flipped)).decode(),
        "format 3 relabelled 2": base64.b64encode(relabelled).decode(),
        "the parent's envelope": json.loads(older)[SEALED_METADATA],
        "another thread's": json.loads(raw.metadata("mallory"))[SEALED_METADATA],
    }
    for what, new in changes.items():
        raw.set_metadata("alice", json.dumps({**json.loads(text), SEALED_METADATA: new}))
        with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="authenticate"):
            saver.get_tuple(_config("alice"))
        raw.set_metadata("alice", text)
        assert what
    # The head edited around a sound envelope.
    edits = {
        "a value put in clear in its place": {**head["channel_values"], "ssn": "000-00-0000"},
        "a value dropped": {"n": []},
        "a marker for a value it does not hold": {**head["channel_values"], "x": []},
    }
    for what, inline in edits.items():
        raw.set_head("alice", {**head, "channel_values": inline})
        with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError) as err:
            saver.get_tuple(_config("alice"))
        assert "head was changed" in str(err.value), what
    versions = {**head["channel_versions"], "ssn": v}  # the parent's version of "ssn"
    raw.set_head("alice", {**head, "channel_versions": versions})
    with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="authenticate"):
        saver.get_tuple(_config("alice"))
    raw.set_head("alice", head)
    with raw.saver(ring("k1")) as saver:
        assert _values(saver, _config("alice")) == {"ssn": "111-22-4444", "n": 2}


def _first_metadata(raw: Raw, thread: str) -> str:
    with raw.conn() as c:
        (text,) = c.execute(
            "SELECT metadata FROM tether_checkpoints WHERE thread_id = ? "
            "ORDER BY checkpoint_id LIMIT 1",
            (thread,),
        ).fetchone()
    return str(text)


def test_a_value_carried_over_from_an_envelope_is_sealed_on_its_own_once(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        v1 = saver.get_next_version(None)
        cfg1 = _put(saver, _config("t"), {"name": "Alice", "n": 1}, name=v1, n=v1)
        v2 = saver.get_next_version(v1)
        cfg2 = _put(saver, cfg1, {"n": 2}, n=v2)  # "name" carried out of cfg1's envelope
        v3 = saver.get_next_version(v2)
        cfg3 = _put(saver, cfg2, {"n": 3}, n=v3)  # and on from cfg2's head as it is
        for cfg, n in ((cfg1, 1), (cfg2, 2), (cfg3, 3)):
            assert _values(saver, cfg) == {"name": "Alice", "n": n}
    heads = _heads(raw.where)
    assert [h["channel_values"]["n"] for h in heads] == [[], [], []]
    first, second, third = (h["channel_values"]["name"] for h in heads)
    assert first == []
    assert len(second) == 1  # sealed on its own: ["base64"]
    assert third == second  # copied as it is
    assert "Alice" not in json.dumps(heads)


def test_a_fork_carries_a_value_out_of_another_checkpoints_envelope(raw: Raw) -> None:
    """LangGraph's ``__copy__``: a put under one checkpoint naming no channel, whose
    versions are another's (the value is found inline in that one's head)."""
    with raw.saver(ring("k1")) as saver:
        v1 = saver.get_next_version(None)
        cfg1 = _put(saver, _config("t"), {"name": "Alice"}, name=v1)
        v2 = saver.get_next_version(v1)
        cfg2 = _put(saver, cfg1, {"name": "Bob"}, name=v2)
        old = saver.get_tuple(cfg1).checkpoint
        fork = {**old, "id": str(uuid6())}
        cfg3 = saver.put(cfg2, fork, {"source": "fork", "step": 2}, {})
        assert _values(saver, cfg3) == {"name": "Alice"}
        assert _values(saver, cfg2) == {"name": "Bob"}
    fork_head = _heads(raw.where)[-1]["channel_values"]["name"]
    assert len(fork_head) == 1  # sealed on its own: ["base64"]


def test_a_saver_without_the_key_cannot_carry_a_value_out_of_an_envelope(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        v1 = saver.get_next_version(None)
        cfg = _put(saver, _config("t"), {"name": "Alice", "n": 1}, name=v1, n=v1)
        ck = saver.get_tuple(cfg).checkpoint
    ck = {**ck, "id": str(uuid6()), "channel_versions": {**ck["channel_versions"], "n": "2"}}
    with raw.saver(False) as saver, pytest.raises(DecodeError, match="key 'k1'"):
        saver.put(cfg, ck, {"source": "loop", "step": 1}, {"n": "2"})
    with raw.saver(ring("k1")) as saver:
        assert _values(saver, _config("t")) == {"name": "Alice", "n": 1}  # nothing stored


def test_copy_thread_and_rekey_seal_envelopes_again_as_envelopes(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        v1 = saver.get_next_version(None)
        cfg = _put(saver, _config("src"), {"name": "Alice", "n": 1}, name=v1, n=v1)
        v2 = saver.get_next_version(v1)
        _put(saver, cfg, {"n": 2}, n=v2)
        saver.copy_thread("src", "dst")
        want = snapshot(saver, "src")
        got = snapshot(saver, "dst")
        assert [g[1:] for g in got] == [w[1:] for w in want]
    src, dst = raw.metadata("src"), raw.metadata("dst")
    assert _sealed(dst)[0] == 3
    assert _sealed(dst) != _sealed(src)
    assert raw.head("dst")["channel_values"]["n"] == []
    # rekey to k2 with a ring that keeps new metadata in clear: envelopes stay envelopes
    with raw.saver(ring("k2", "k1", metadata=False)) as saver:
        assert saver.rekey_pending() > 0
        assert saver.rekey() > 0
        assert saver.rekey_pending() == 0
    with raw.saver(ring("k2")) as saver:
        assert [g[1:] for g in snapshot(saver, "dst")] == [w[1:] for w in want]
        assert [g[1:] for g in snapshot(saver, "src")] == [w[1:] for w in want]
    sealed = _sealed(raw.metadata("src"))
    assert sealed[0] == 3
    assert key_id_of(sealed) == "k2"


def test_a_store_written_before_envelopes_reads_carries_copies_and_rekeys(tmp_path: Path) -> None:
    """``data/sealed_heads_v2.db``: written by tether bf773bb, whose SQLite saver sealed
    each small value on its own in the head and the metadata alone (format 2), key id
    ``old``. Thread ``t1``, three steps of ``count`` (int), ``status`` (str, not named by
    the last step: carried over, the same ciphertext) and ``messages``, two writes a step.
    """
    path = tmp_path / "v2.db"
    shutil.copyfile(DATA / "sealed_heads_v2.db", path)
    old_heads = _heads(str(path), "t1")
    assert all(len(v) == 1 for h in old_heads for v in h["channel_values"].values())
    old = base64.b64decode("dGV0aGVyLWZpeHR1cmUta2V5LW5vdC1hLXNlY3JldCE=")
    keys = {"old": old, "new": b"\x05" * 32}
    with SqliteSaver(path, encryption=Encryption(keys, active="old")) as saver:
        before = snapshot(saver, "t1")
        assert [t[1]["count"] for t in before] == [2, 1, 0]
        assert before[0][1]["status"] == "step 1"
        assert before[0][2]["user"] == "alice"
        assert before[0][3] == [("task-2", "count", 3), ("task-2", "messages", ["w"])]
        assert saver.rekey_pending() == 0  # format 2 under the active key is current
        # A new step: "count" goes into its envelope, "status" is carried as it is.
        latest = saver.get_tuple(_config("t1")).checkpoint
        v = saver.get_next_version(latest["channel_versions"]["count"])
        _put(saver, before[0][0], {"count": 9}, count=v)
        assert _values(saver, _config("t1")) == {**before[0][1], "count": 9}
        saver.copy_thread("t1", "t2")
        assert snapshot(saver, "t2")[1:] == [
            ({"configurable": {**c["configurable"], "thread_id": "t2"}}, *rest)
            for c, *rest in before
        ]
    new_head = _heads(str(path), "t1")[3]["channel_values"]
    assert new_head["count"] == []
    assert new_head["status"] == old_heads[2]["channel_values"]["status"]
    with SqliteSaver(path, encryption=Encryption(keys, active="new")) as saver:
        assert saver.rekey() > 0
        assert saver.rekey_pending() == 0
    with SqliteSaver(path, encryption=Encryption({"new": keys["new"]})) as saver:
        assert snapshot(saver, "t1")[1:] == before
        assert _values(saver, _config("t1"))["count"] == 9

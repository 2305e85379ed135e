"""Encryption at rest on SQLite files and the real Postgres (#17).

Every test runs on both persistent backends. Tampering and moving tests make
every non-cryptographic check agree first (the payload checksum, SQLite's row
checksums), so what they show is AES-GCM's tag, bound to the row's place,
refusing the ciphertext.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.backends._payload import ENCRYPTED
from tether.backends._sqlbase import row_checksum
from tether.checkpoint import empty_checkpoint
from tether.encryption import SEALED_METADATA
from tether.errors import ConfigError, DecodeError, StorageError
from tether.ids import uuid6

from ..postgres.conftest import fresh_schema
from .helpers import Raw, fill, flip, new_path, ring, snapshot


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def raw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Raw]:
    if request.param == "sqlite":
        yield Raw("sqlite", new_path(tmp_path))
        return
    dsn = request.getfixturevalue("pg_dsn")
    yield Raw("postgres", dsn, fresh_schema())


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


# --- what is stored ---------------------------------------------------------------------


def test_every_value_write_and_metadata_is_sealed(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        fill(saver, "t", 4)
        want = snapshot(saver, "t")
    blobs = raw.blobs("t")
    assert blobs
    assert all(enc & ENCRYPTED for _, _, _, enc, _, _ in blobs)
    assert all(b"secret note" not in p and b"message 0" not in p for *_, p in blobs)
    writes = raw.writes("t")
    assert writes
    assert all(b"write" not in p for *_, p in writes)
    meta = json.loads(raw.metadata("t"))
    assert set(meta) == {"source", "step", SEALED_METADATA}  # user_secret only sealed
    assert "pii" not in raw.metadata("t")
    # Small values are kept inline in the head, sealed: nothing in clear. SQLite seals
    # them with the metadata, in the checkpoint's envelope ("[]"); Postgres on their own.
    with raw.conn() as c:
        head = c.execute("SELECT checkpoint FROM tether_checkpoints").fetchall()
    assert len(head) == 4
    for (h,) in head:
        doc = json.loads(h) if isinstance(h, str | bytes) else h
        inline = doc["channel_values"]
        assert set(inline) == {"count", "status"}
        if raw.kind == "sqlite":
            assert all(v == [] for v in inline.values())
        else:
            assert all(type(v) is list and len(v) == 1 for v in inline.values())
        assert "secret status" not in json.dumps(doc)
    assert {b[0] for b in blobs} == {"messages", "note"}
    with raw.saver(ring("k1")) as saver:
        assert snapshot(saver, "t") == want


def test_inline_primitives_false_keeps_every_value_in_a_sealed_row(raw: Raw) -> None:
    with raw.saver(ring("k1"), inline_primitives=False) as saver:
        fill(saver, "t", 2)
        want = snapshot(saver, "t")
    assert not raw.head("t").get("channel_values")
    assert {b[0] for b in raw.blobs("t")} == {"messages", "note", "count", "status"}
    # Either way of storing reads back the same under the other setting.
    with raw.saver(ring("k1")) as saver:
        assert snapshot(saver, "t") == want


# --- tampering and moving ---------------------------------------------------------------


def test_one_flipped_byte_of_a_ciphertext_is_refused(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        fill(saver, "t", 2)
    for channel, version, _tag, _enc, _base, payload in raw.blobs("t"):
        if channel != "note":
            continue
        for at in (5, len(payload) // 2, -1):  # header, body, tag
            raw.set_blob("t", channel, version, flip(payload, at))
            with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError) as err:
                snapshot(saver, "t")
            text = str(err.value)
            assert "'t'" in text
            assert "note" in text or "header" in text
        raw.set_blob("t", channel, version, payload)
        # Not fixing the checksum: random damage, named as such.
        damaged = bytearray(payload)
        damaged[-3] ^= 0x40
        raw.set_blob("t", channel, version, bytes(damaged))
        with raw.saver(ring("k1")) as saver, pytest.raises(StorageError, match="damaged"):
            snapshot(saver, "t")
        raw.set_blob("t", channel, version, payload)
    with raw.saver(ring("k1")) as saver:
        assert len(snapshot(saver, "t")) == 2


def _one_step(saver: Any, thread: str, version: str, values: dict[str, Any]) -> dict[str, Any]:
    ck = empty_checkpoint()
    ck["id"] = str(uuid6())
    ck["channel_values"] = values
    ck["channel_versions"] = dict.fromkeys(values, version)
    cfg: dict[str, Any] = saver.put(
        _config(thread), ck, {"source": "input", "step": -1}, dict(ck["channel_versions"])
    )
    return cfg


def test_a_ciphertext_moved_to_another_thread_or_channel_is_refused(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        version = saver.get_next_version(None)
        # Lists: value rows (small scalars are sealed in the head: test_inline.py).
        _one_step(saver, "alice", version, {"ssn": ["111-22-3333"], "name": ["Alice"]})
        _one_step(saver, "mallory", version, {"ssn": ["999-99-9999"], "name": ["Mallory"]})
    alice = {b[0]: b[5] for b in raw.blobs("alice")}
    mallory = {b[0]: b[5] for b in raw.blobs("mallory")}
    # Alice's ciphertext in Mallory's row (same namespace, channel, version).
    raw.set_blob("mallory", "ssn", version, alice["ssn"])
    with raw.saver(ring("k1")) as saver:
        with pytest.raises(DecodeError, match="does not authenticate under key 'k1'") as err:
            saver.get_tuple(_config("mallory"))
        assert "mallory" in str(err.value)
        assert "ssn" in str(err.value)
        assert saver.get_tuple(_config("alice")).checkpoint["channel_values"]["ssn"] == [
            "111-22-3333"
        ]
    raw.set_blob("mallory", "ssn", version, mallory["ssn"])
    # Within one thread, to another channel.
    raw.set_blob("alice", "name", version, alice["ssn"])
    with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="channel 'name'"):
        saver.get_tuple(_config("alice"))


def test_a_pending_write_moved_to_another_task_is_refused(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        cfg = _one_step(saver, "t", saver.get_next_version(None), {"a": 1})
        saver.put_writes(cfg, [("a", "from task one")], task_id="one")
        saver.put_writes(cfg, [("a", "from task two")], task_id="two")
    rows = {r[1]: r[4] for r in raw.writes("t")}
    raw.set_write("t", "two", 0, rows["one"])
    with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="task 'two'"):
        saver.get_tuple(_config("t"))


def test_metadata_and_versions_changed_in_the_store_are_refused(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        fill(saver, "t", 2)
    stored = raw.metadata("t")
    meta = json.loads(stored)
    raw.set_metadata("t", json.dumps({**meta, "step": 7}))
    with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="sealed copy"):
        saver.get_tuple(_config("t"))
    # Another checkpoint's sealed metadata: bound to its own checkpoint id.
    with raw.conn() as c:
        other = c.execute(
            "SELECT metadata FROM tether_checkpoints ORDER BY checkpoint_id LIMIT 1"
        ).fetchone()[0]
    raw.set_metadata("t", other if isinstance(other, str) else json.dumps(other))
    with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="authenticate"):
        saver.get_tuple(_config("t"))
    raw.set_metadata("t", stored)
    with raw.saver(ring("k1")) as saver:
        assert saver.get_tuple(_config("t")).metadata["user_secret"] == "pii-t-1"


# --- keys -------------------------------------------------------------------------------


def test_a_missing_or_wrong_key_is_a_decode_error_naming_it(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        fill(saver, "t", 2)
    with raw.saver(False) as saver, pytest.raises(DecodeError, match="key 'k1'") as err:
        saver.get_tuple(_config("t"))
    assert "thread 't'" in str(err.value)
    with raw.saver(ring("k2")) as saver, pytest.raises(DecodeError) as err:
        saver.get_tuple(_config("t"))
    assert "key 'k1'" in str(err.value)
    assert "does not have" in str(err.value)
    from tether.encryption import Encryption

    impostor = Encryption({"k1": b"\x07" * 32})
    with raw.saver(impostor) as saver, pytest.raises(DecodeError, match="authenticate"):
        saver.get_tuple(_config("t"))


def test_a_store_encrypted_later_reads_both_and_rekey_seals_the_rest(raw: Raw) -> None:
    with raw.saver(False) as saver:
        fill(saver, "old", 3)
        plain = snapshot(saver, "old")
    with raw.saver(ring("k1")) as saver:
        assert snapshot(saver, "old") == plain
        fill(saver, "new", 2)
        both = snapshot(saver, "new")
        assert saver.rekey_pending() > 0
    # Refusing clear values before the store is sealed: the clear ones are named.
    with raw.saver(ring("k1", allow_plaintext=False)) as saver:
        assert snapshot(saver, "new") == both
        with pytest.raises(DecodeError, match="clear"):
            snapshot(saver, "old")
    with raw.saver(ring("k1")) as saver:
        assert saver.rekey(batch=2) > 0
        assert saver.rekey_pending() == 0
    # Now everything is sealed: a clear value is refused, none is left.
    with raw.saver(ring("k1", allow_plaintext=False)) as saver:
        assert snapshot(saver, "old") == plain
        assert snapshot(saver, "new") == both
    assert all(b[3] & ENCRYPTED for b in raw.blobs("old"))


# --- copy, filters ----------------------------------------------------------------------


def test_copy_thread_seals_the_copies_for_their_thread(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        fill(saver, "src", 3)
        want = snapshot(saver, "src")
        saver.copy_thread("src", "dst")
        got = snapshot(saver, "dst")
    strip = [(c["configurable"]["checkpoint_id"], v, m, w) for c, v, m, w in want]
    assert [(c["configurable"]["checkpoint_id"], v, m, w) for c, v, m, w in got] == strip
    src = {(b[0], b[1]): b[5] for b in raw.blobs("src")}
    dst = {(b[0], b[1]): b[5] for b in raw.blobs("dst")}
    assert src.keys() == dst.keys()
    assert all(src[k] != dst[k] for k in src)
    # A saver without keys cannot re-seal them: refused, nothing copied.
    with raw.saver(False) as saver:
        with pytest.raises(ConfigError, match="keyring"):
            saver.copy_thread("src", "other")
        assert saver.get_tuple(_config("other")) is None


def test_filters_on_sealed_metadata_keys_are_refused(raw: Raw) -> None:
    with raw.saver(ring("k1", clear_metadata=["tenant"])) as saver:
        for i, tenant in enumerate(["a", "b", "a"]):
            cfg = _one_step(saver, f"t{i}", saver.get_next_version(None), {"x": i})
            tup = saver.get_tuple(cfg)
            ck = tup.checkpoint
            ck["id"] = str(uuid6())
            saver.put(cfg, ck, {"source": "loop", "step": 0, "tenant": tenant, "secret": i}, {})
        assert len(list(saver.list(None, filter={"tenant": "a"}))) == 2
        assert len(list(saver.list(None, filter={"source": "loop", "step": 0}))) == 3
        with pytest.raises(ConfigError, match="'secret'"):
            list(saver.list(None, filter={"secret": 1}))


# --- rotation ---------------------------------------------------------------------------


def test_rekey_under_concurrent_writers_and_readers(raw: Raw) -> None:
    with raw.saver(ring("k1")) as saver:
        for t in range(4):
            fill(saver, f"old{t}", 4)
        before = {f"old{t}": snapshot(saver, f"old{t}") for t in range(4)}
    stop = threading.Event()
    errors: list[BaseException] = []
    written: list[str] = []

    def writer(saver: Any, n: int) -> None:
        try:
            i = 0
            while not stop.is_set():
                fill(saver, f"w{n}-{i}", 2)
                written.append(f"w{n}-{i}")
                i += 1
        except BaseException as exc:
            errors.append(exc)

    def reader(saver: Any) -> None:
        try:
            while not stop.is_set():
                for t in range(4):
                    assert snapshot(saver, f"old{t}") == before[f"old{t}"]
        except BaseException as exc:
            errors.append(exc)

    # Writers and readers hold both keys, sealing under k2 (the new active key).
    with raw.saver(ring("k2", "k1")) as saver, raw.saver(ring("k2", "k1")) as rotator:
        workers = [threading.Thread(target=writer, args=(saver, n)) for n in range(2)]
        workers.append(threading.Thread(target=reader, args=(saver,)))
        for w in workers:
            w.start()
        try:
            done = rotator.rekey("k2", batch=3)
            while rotator.rekey_pending("k2"):
                done += rotator.rekey("k2", batch=3)
        finally:
            stop.set()
            for w in workers:
                w.join()
        assert not errors, errors
        assert done > 0
    assert written
    # Only k2 is needed now.
    with raw.saver(ring("k2")) as saver:
        assert saver.rekey_pending() == 0
        for t in range(4):
            assert snapshot(saver, f"old{t}") == before[f"old{t}"]
        for t in written:
            assert len(snapshot(saver, t)) == 2


def test_a_head_pointed_at_another_version_is_refused(raw: Raw) -> None:
    """Rolling one channel of a checkpoint back to an older (authentic) value is refused."""
    with raw.saver(ring("k1")) as saver:
        configs = fill(saver, "t", 2)
        first = saver.get_tuple(configs[0]).checkpoint["channel_versions"]["note"]
    latest = configs[-1]["configurable"]["checkpoint_id"]
    with raw.conn() as c:
        if raw.kind == "sqlite":
            cid, parent, tag, head, versions, meta, unstored = c.execute(
                "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, channel_versions, "
                "metadata, unstored FROM tether_checkpoints WHERE checkpoint_id = ?",
                (latest,),
            ).fetchone()
            doc = json.loads(head)
            doc["channel_versions"]["note"] = first
            new = json.dumps(doc, separators=(",", ":")).encode()
            check = row_checksum(cid, parent, tag, new, versions, meta, unstored)
            c.execute(
                "UPDATE tether_checkpoints SET checkpoint = ?, checksum = ? "
                "WHERE checkpoint_id = ?",
                (new, check, cid),
            )
        else:
            c.execute(
                "UPDATE tether_checkpoints SET checkpoint = jsonb_set(checkpoint, "
                "'{channel_versions,note}', to_jsonb(%s::text)) WHERE checkpoint_id = %s",
                (first, latest),
            )
    with raw.saver(ring("k1")) as saver, pytest.raises(DecodeError, match="authenticate"):
        saver.get_tuple(_config("t"))


# --- the thread index (#15) of an encrypting saver ---------------------------------------


def test_the_thread_index_holds_no_sealed_metadata(raw: Raw) -> None:
    """The index keeps the clear metadata keys only; a filter on a sealed key is refused."""
    with raw.saver(ring("k1", clear_metadata=("tenant",))) as saver:
        fill(saver, "t", 2)
        config = {"configurable": {"thread_id": "u"}}
        ck = empty_checkpoint()
        ck["id"] = str(uuid6())
        saver.put(config, ck, {"source": "input", "step": -1, "tenant": "acme", "pii": "x"}, {})
        summaries = {s.thread_id: s for s in saver.threads().items}
        assert set(summaries) == {"t", "u"}
        assert summaries["t"].metadata == {}  # user_secret is sealed
        assert summaries["u"].metadata == {"tenant": "acme"}
        assert [s.thread_id for s in saver.threads(metadata={"tenant": "acme"}).items] == ["u"]
        with pytest.raises(ConfigError, match="pii"):
            saver.threads(metadata={"pii": "x"})

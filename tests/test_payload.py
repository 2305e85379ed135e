"""Stored payloads (tether.backends._payload): checksums, bounded decompression (#18.3, #18.9).

Every payload a persistent backend writes carries a checksum of its bytes, so
damage anywhere is a StorageError and never a silently different value; a
compressed payload also carries its uncompressed size, so a tampered frame
cannot make a reader allocate what it declares.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import zstandard

from tether import SqliteSaver, StorageError, empty_checkpoint
from tether.backends._payload import (
    CHECKSUM,
    ENCODING_ZSTD,
    BlobCodec,
    checksum,
)
from tether.errors import EncodeError
from tether.serde import MsgpackSerializer

SERDE = MsgpackSerializer()
HISTORY = [{"role": "user", "content": f"message {i} " + "words " * 40} for i in range(3)]


def _payloads() -> list[tuple[str, int, bytes]]:
    small = BlobCodec(compress_threshold=None).encode(SERDE, HISTORY)
    large = BlobCodec(compress_threshold=64).encode(SERDE, HISTORY * 20)
    assert small[1] == CHECKSUM
    assert large[1] == ENCODING_ZSTD | CHECKSUM
    return [small, large]


@pytest.mark.parametrize("kind", ["plain", "zstd"])
def test_every_single_byte_flip_is_a_storage_error(kind: str) -> None:
    """Each of the 8 bit flips at every position, and every truncation: never a value."""
    tag, encoding, payload = _payloads()[kind == "zstd"]
    codec = BlobCodec()
    assert SERDE.loads_typed((tag, codec.decode_bytes(encoding, payload))) is not None
    for pos in range(len(payload)):
        for bit in range(8):
            damaged = bytearray(payload)
            damaged[pos] ^= 1 << bit
            with pytest.raises(StorageError, match="damaged"):
                codec.decode_bytes(encoding, bytes(damaged), where="of channel 'm'")
    for cut in range(len(payload)):
        with pytest.raises(StorageError, match="damaged"):
            codec.decode_bytes(encoding, payload[:cut])
    with pytest.raises(StorageError, match="damaged"):
        codec.decode_bytes(encoding, payload + b"\x00")


def test_the_error_names_the_row_only_when_it_happens() -> None:
    _tag, encoding, payload = _payloads()[0]
    calls = []

    def where() -> str:
        calls.append(1)
        return "of thread 't', checkpoint 'c', channel 'messages'"

    BlobCodec().decode_bytes(encoding, payload, where=where)
    assert calls == []
    with pytest.raises(StorageError, match="of thread 't', checkpoint 'c', channel 'messages'"):
        BlobCodec().decode_bytes(encoding, payload[:-1], where=where)


def test_values_over_max_value_size_are_refused_on_write_and_read() -> None:
    data = b"\x00" * 5000
    with pytest.raises(EncodeError, match="max_value_size"):
        BlobCodec(max_value_size=4096).encode_bytes("bytes", data)
    _tag, encoding, payload = BlobCodec(compress_threshold=64).encode_bytes("bytes", data)
    assert encoding == ENCODING_ZSTD | CHECKSUM
    with pytest.raises(StorageError, match="max_value_size"):
        BlobCodec(max_value_size=4096).decode_bytes(encoding, payload)


def _declare(frame: bytes, size: int) -> bytes:
    """``frame`` with its Frame_Content_Size field rewritten to ``size`` (RFC 8878 3.1.1.1)."""
    fhd = frame[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    field = {0: 1 if single else 0, 1: 2, 2: 4, 3: 8}[fcs_flag]
    assert field in (4, 8), "compress more data to get a 4-byte size field"
    at = 5 + (0 if single else 1) + {0: 0, 1: 1, 2: 2, 3: 4}[dict_flag]
    return frame[:at] + size.to_bytes(field, "little") + frame[at + field :]


_BOMB = 2 << 30  # 2 GiB


def _bombs() -> dict[str, tuple[int, bytes]]:
    """Payloads a hostile writer could store, each declaring 2 GiB in about 100 KB."""
    frame = zstandard.ZstdCompressor(level=1).compress(random.Random(1).randbytes(100_000))
    lie = _declare(frame, _BOMB)
    body = len(frame).to_bytes(4, "little") + lie  # header honest, frame lying
    both = _BOMB.to_bytes(4, "little") + lie  # header and frame agree on 2 GiB
    return {
        "legacy frame": (ENCODING_ZSTD, lie),
        "frame lies": (ENCODING_ZSTD | CHECKSUM, checksum(body).to_bytes(4, "little") + body),
        "header lies too": (ENCODING_ZSTD | CHECKSUM, checksum(both).to_bytes(4, "little") + both),
    }


@pytest.mark.parametrize("name", list(_bombs()))
def test_a_frame_declaring_2_gib_allocates_nothing(name: str, tmp_path: Path) -> None:
    """A tampered frame is refused before zstd allocates what it declares: run under a
    1 GiB address-space limit, where the old code failed with MemoryError."""
    encoding, payload = _bombs()[name]
    blob = tmp_path / "bomb.bin"
    blob.write_bytes(payload)
    script = textwrap.dedent(
        f"""
        import resource, sys
        from tether.backends._payload import BlobCodec
        from tether.errors import StorageError
        data = open({str(blob)!r}, "rb").read()
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        try:
            BlobCodec().decode_bytes({encoding}, data, where="of the bomb")
        except StorageError as exc:
            print("StorageError:", exc)
            sys.exit(0)
        except MemoryError:
            print("MemoryError")
            sys.exit(3)
        print("decoded")
        sys.exit(4)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "of the bomb" in run.stdout


def test_a_flipped_byte_in_a_sqlite_file_is_a_storage_error_naming_the_row(
    tmp_path: Path,
) -> None:
    """A real file, damaged on disk: a flipped length byte used to make a 3-message history
    read back as 1 message with no error."""
    path = tmp_path / "store.db"
    saver = SqliteSaver(path, compress_threshold=None, delta_threshold=None)
    ckpt = empty_checkpoint()
    ckpt["channel_values"] = {"messages": HISTORY}
    ckpt["channel_versions"] = {"messages": saver.get_next_version(None)}
    config = saver.put({"configurable": {"thread_id": "t1"}}, ckpt, {}, ckpt["channel_versions"])
    saver.close()
    with sqlite3.connect(path) as conn:  # fold the WAL into the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = path.read_bytes()
    data = SERDE.dumps_typed(HISTORY)[1]
    at = raw.index(data)  # the value, behind its 4-byte checksum
    assert data[0] == 0x93  # a 3-element array: the byte the old damage hit
    damaged = bytearray(raw)
    damaged[at] = 0x91  # "an array of 1", a silently shorter history before checksums
    path.write_bytes(bytes(damaged))
    with SqliteSaver(path) as reopened, pytest.raises(StorageError) as info:
        reopened.get_tuple(config)
    message = str(info.value)
    assert "damaged" in message
    assert "'t1'" in message
    assert "'messages'" in message


def test_max_value_size_is_a_saver_option(tmp_path: Path) -> None:
    path = tmp_path / "small.db"
    with SqliteSaver(f"sqlite:///{path}", max_value_size=4096) as saver:
        assert saver.path == str(path)  # the store name the CLI prints is accepted
        cp = empty_checkpoint()
        cp["channel_values"] = {"blob": b"x" * 5000}
        cp["channel_versions"] = {"blob": saver.get_next_version(None)}
        with pytest.raises(EncodeError, match="max_value_size"):
            saver.put({"configurable": {"thread_id": "t"}}, cp, {}, cp["channel_versions"])
        assert list(saver.list(None)) == []


@pytest.mark.parametrize("name", list(_bombs()))
def test_a_bomb_put_into_a_sqlite_file_by_sql_allocates_nothing(name: str, tmp_path: Path) -> None:
    """#18.9 by the route a hostile writer has: a real file's blob row rewritten by raw SQL
    (with a matching row checksum), then read by get_tuple under a 1 GiB address-space
    limit. A tether StorageError, never MemoryError or an allocation of 2 GiB."""
    from tether.backends._sqlbase import value_checksum

    path = tmp_path / "store.db"
    with SqliteSaver(path) as saver:
        ckpt = empty_checkpoint()
        ckpt["channel_values"] = {"blob": b"x" * 100_000}
        ckpt["channel_versions"] = {"blob": saver.get_next_version(None)}
        saver.put({"configurable": {"thread_id": "t1"}}, ckpt, {}, ckpt["channel_versions"])
    encoding, payload = _bombs()[name]
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT rowid, channel, version, type, base FROM tether_blobs WHERE channel = 'blob'"
        ).fetchall()
        assert len(rows) == 1
        rowid, channel, version, type_, base = rows[0]
        crc = value_checksum(channel, version, type_, encoding, base, payload)
        conn.execute(
            "UPDATE tether_blobs SET encoding = ?, value = ?, checksum = ? WHERE rowid = ?",
            (encoding, payload, crc, rowid),
        )
    script = textwrap.dedent(
        f"""
        import resource, sys
        from tether import SqliteSaver
        from tether.errors import TetherError
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        try:
            with SqliteSaver({str(path)!r}) as saver:
                saver.get_tuple({{"configurable": {{"thread_id": "t1"}}}})
        except MemoryError:
            print("MemoryError")
            sys.exit(3)
        except TetherError as exc:
            print(type(exc).__name__ + ":", exc)
            sys.exit(0)
        print("read")
        sys.exit(4)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("StorageError:"), run.stdout
    # refused on what the frame or the header declares, before zstd allocates it
    assert "max_value_size" in run.stdout or "its header" in run.stdout, run.stdout
    assert "'blob'" in run.stdout
    assert "'t1'" in run.stdout

"""The blob codec every SQL backend shares: encodings, thresholds, damaged payloads."""

from __future__ import annotations

import threading
import zlib
from typing import Any

import pytest
import xxhash
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from tether.backends._payload import CHECKSUM
from tether.backends._sqlbase import (
    ENCODING_PLAIN,
    ENCODING_ZLIB,
    ENCODING_ZSTD,
    BlobCodec,
)
from tether.errors import ConfigError, StorageError
from tether.serde import MsgpackSerializer

SERDE = MsgpackSerializer()
BIG = {"messages": [{"content": f"message {i} " * 20} for i in range(200)]}


def test_large_values_are_zstd_and_round_trip() -> None:
    codec = BlobCodec(compress_threshold=1024)
    tag, encoding, payload = codec.encode(SERDE, BIG)
    assert encoding == ENCODING_ZSTD | CHECKSUM
    assert len(payload) < len(SERDE.dumps_typed(BIG)[1]) / 4
    assert SERDE.loads_typed((tag, codec.decode_bytes(encoding, payload))) == BIG


def test_small_or_incompressible_values_stay_plain() -> None:
    codec = BlobCodec(compress_threshold=1024)
    assert codec.encode(SERDE, {"a": 1})[1] == CHECKSUM  # plain, behind its checksum
    noise = bytes(range(256)) * 2 + b"\x00"
    import random

    rnd = random.Random(3).randbytes(4096)
    assert codec.encode_bytes("bytes", rnd)[1] == CHECKSUM
    assert BlobCodec().encode_bytes("bytes", noise * 100)[1] == CHECKSUM  # no threshold


def test_zlib_payloads_of_earlier_releases_are_still_read() -> None:
    raw = SERDE.dumps_typed(BIG)[1]
    assert BlobCodec().decode_bytes(ENCODING_ZLIB, zlib.compress(raw, 1)) == raw
    assert BlobCodec().decode_bytes(ENCODING_PLAIN, raw) == raw
    frame = zstandard.ZstdCompressor(level=1).compress(raw)
    assert BlobCodec().decode_bytes(ENCODING_ZSTD, frame) == raw


@pytest.mark.parametrize("encoding", [ENCODING_ZLIB, ENCODING_ZSTD])
def test_damaged_payload_is_a_storage_error(encoding: int) -> None:
    with pytest.raises(StorageError, match="damaged"):
        BlobCodec().decode_bytes(encoding, b"\x28\xb5\x2f\xfd garbage", where="of channel 'm'")


def test_unknown_encoding_says_upgrade() -> None:
    with pytest.raises(StorageError, match="newer tether"):
        BlobCodec().decode_bytes(7, b"x")


@pytest.mark.parametrize("kwargs", [{"compress_threshold": 0}, {"compress_level": 0}])
def test_bad_codec_settings(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        BlobCodec(**kwargs)  # type: ignore[arg-type]


def test_codec_is_safe_from_many_threads() -> None:
    codec = BlobCodec(compress_threshold=64)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(200):
                value = {"k": k, "i": i, "text": "x" * (100 + i)}
                tag, enc, data = codec.encode(SERDE, value)
                assert SERDE.loads_typed((tag, codec.decode_bytes(enc, data))) == value
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "n": 123456789012345678901234567890, "f": 1.5, "s": "x\\u00e9"}',
        '{"neg": -98765432109876543210, "l": [1, {"b": null}], "t": true}',
        '{"huge": 1e400}',  # beyond float range: the json module's inf, as before
    ],
)
def test_loads_json_reads_what_the_json_module_reads(text: str) -> None:
    """msgspec is the fast path; integers of any size stay exact (orjson's would not)."""
    import json
    import math

    from tether.contract import loads_json

    for data in (text, text.encode(), memoryview(text.encode())):
        got, want = loads_json(data), json.loads(text)
        assert got == want or all(math.isinf(v) and math.isinf(want[k]) for k, v in got.items()), (
            got,
            want,
        )
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


def _framed_as_specified(fields: tuple[object, ...]) -> bytes:
    """The framing stored checksums were computed with (the first implementation)."""
    texts = ["" if f is None else str(f) for f in fields]
    lengths = [-1 if f is None else len(t) for f, t in zip(fields, texts, strict=True)]
    return (":".join(map(str, lengths)) + "|" + "".join(texts)).encode("utf-8", "surrogatepass")


@given(
    st.tuples(
        st.one_of(st.none(), st.text(), st.integers(), st.binary(max_size=8), st.floats()),
        st.one_of(st.none(), st.text()),
        st.one_of(st.none(), st.integers(), st.text(alphabet="\ud800abc")),
    )
)
def test_row_framing_is_what_stored_checksums_used(
    fields: tuple[object, ...],
) -> None:
    from tether.backends._sqlbase import _framed

    assert _framed(fields) == _framed_as_specified(fields)


_TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.just("\ud800"), max_size=12)
_FIELD = st.one_of(st.none(), _TEXT, st.integers(), st.booleans(), st.binary(max_size=4))


@given(
    st.one_of(_TEXT, _FIELD),
    st.one_of(_TEXT, _FIELD),
    st.one_of(_TEXT, _FIELD),
    st.one_of(st.integers(-1, 7), _FIELD),
    st.one_of(st.none(), _TEXT, _FIELD),
    st.one_of(st.none(), st.binary(max_size=12)),
)
def test_value_checksums_are_what_stored_rows_hold(
    channel: Any, version: Any, type_: Any, encoding: Any, base: Any, payload: Any
) -> None:
    from tether.backends._sqlbase import _payload_digest, _signed, value_checksum

    try:
        digest = _payload_digest(encoding, payload)
    except TypeError:
        return  # a damaged row: refused either way
    want = _framed_as_specified((channel, version, type_, encoding, base)) + digest
    assert value_checksum(channel, version, type_, encoding, base, payload) == _signed(
        xxhash.xxh3_64_intdigest(want)
    )


@given(
    st.lists(st.one_of(_TEXT, _FIELD), min_size=7, max_size=7),
    st.one_of(st.none(), st.binary(max_size=12)),
)
def test_write_checksums_are_what_stored_rows_hold(fields: list[Any], payload: Any) -> None:
    """Schema 11 on: the fields and the payload digest as one MessagePack array; before
    it (``write_checksum_v1``, what the migration recognises): the text framing."""
    import ormsgpack

    from tether.backends._sqlbase import (
        _payload_digest,
        _signed,
        write_checksum,
        write_checksum_v1,
    )

    encoding = fields[6]
    try:
        digest = _payload_digest(encoding, payload)
    except TypeError:
        return
    old = _framed_as_specified(tuple(fields)) + digest
    assert write_checksum_v1(*fields, payload) == _signed(xxhash.xxh3_64_intdigest(old))
    try:
        packed = ormsgpack.packb((*fields, digest))
    except TypeError:  # a lone surrogate, an int beyond 64 bits: only in a damaged row
        with pytest.raises(TypeError):
            write_checksum(*fields, payload)
        return
    assert write_checksum(*fields, payload) == _signed(xxhash.xxh3_64_intdigest(packed))

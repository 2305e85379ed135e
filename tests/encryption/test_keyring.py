"""The keyring and the sealing primitives (#17), and a Hypothesis round trip."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import InMemorySaver, make_config
from tether.backends._payload import ENCRYPTED, BlobCodec
from tether.checkpoint import Address, empty_checkpoint
from tether.encryption import Encryption, encryption_from, value_place, write_place
from tether.errors import ConfigError, DecodeError
from tether.serde import MsgpackSerializer

KEY = base64.b64encode(b"\x05" * 32).decode()


def test_tether_keys_first_is_active_unless_told() -> None:
    k2 = base64.urlsafe_b64encode(b"\x06" * 32).decode()
    enc = Encryption.from_env({"TETHER_KEYS": f"k1:{KEY}, k2:{k2}"})
    assert enc is not None
    assert enc.key_ids == ["k1", "k2"]
    told = Encryption.from_env({"TETHER_KEYS": f"k1:{KEY},k2:{k2}", "TETHER_ACTIVE_KEY": "k2"})
    assert told is not None
    assert told.active == "k2"
    assert Encryption.from_env({}) is None
    assert encryption_from(False) is None
    assert encryption_from({"k": b"\x01" * 32}).key_ids == ["k"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("k1", "not `key_id:base64key`"),
        (f"k1:{KEY},k1:{KEY}", "twice"),
        ("k1:AAAA", "3 bytes"),
        (f"bad id:{KEY}", "key id"),
        ("k1:!!!", "base64|bytes"),
    ],
)
def test_malformed_keys_are_config_errors(spec: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Encryption.from_env({"TETHER_KEYS": spec})


def test_the_keys_never_show() -> None:
    raw = b"\x42" * 32
    enc = Encryption({"k1": raw})
    assert "k1" in repr(enc)
    assert repr(raw) not in repr(enc)
    assert base64.b64encode(raw).decode() not in repr(enc)
    with pytest.raises(ConfigError, match="active key"):
        Encryption({"k1": raw}, active="k2")


def test_a_value_sealed_twice_differs_and_opens_only_at_its_place() -> None:
    codec = BlobCodec(crypt=Encryption({"k1": os.urandom(32)}))
    place = value_place("t", "", "messages", "1", None)
    a = codec.encode_bytes("msgpack", b"hello", place)
    b = codec.encode_bytes("msgpack", b"hello", place)
    assert a[1] & ENCRYPTED
    assert a[2] != b[2]  # a fresh salt (key and nonce) per value
    assert codec.decode_bytes(a[1], a[2], tag="msgpack", place=place) == b"hello"
    for other, tag in [
        (value_place("u", "", "messages", "1", None), "msgpack"),
        (value_place("t", "", "messages", "2", None), "msgpack"),
        (value_place("t", "", "messages", "1", "~base"), "msgpack"),
        (write_place("t", "", "1", "task", 0, "messages"), "msgpack"),
        (place, "json"),  # the type column changed
    ]:
        with pytest.raises(DecodeError, match="does not authenticate"):
            codec.decode_bytes(a[1], a[2], tag=tag, place=other)
    with pytest.raises(DecodeError, match="does not authenticate"):
        codec.decode_bytes(a[1] ^ 2, a[2], tag="msgpack", place=place)  # encoding changed


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=300)
    | st.binary(max_size=3000),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=25,
)
_kids = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(_values, min_size=1, max_size=4),
    kids=st.lists(_kids, min_size=1, max_size=3, unique=True),
    active=st.integers(0, 2),
    compress=st.sampled_from([None, 64]),
)
def test_round_trip_over_values_and_keyrings(
    values: list[Any], kids: list[str], active: int, compress: int | None
) -> None:
    keys = {k: os.urandom(32) for k in kids}
    writer = Encryption(keys, active=kids[active % len(kids)])
    serde = MsgpackSerializer()
    codec = BlobCodec(compress_threshold=compress, crypt=writer)
    # Any ring holding the writer's key opens it; another ring with the same ids does not.
    reader = BlobCodec(crypt=Encryption(dict(reversed(list(keys.items())))))
    impostor = BlobCodec(crypt=Encryption({k: os.urandom(32) for k in kids}))
    for i, value in enumerate(values):
        place = value_place("thread", "ns", f"ch{i}", str(i), None)
        tag, enc, payload = codec.encode(serde, value, place)
        back = reader.decode(serde, tag, enc, payload, address=Address("thread"), place=place)
        assert back == value or (value != value and back != back)
        with pytest.raises(DecodeError):
            impostor.decode(serde, tag, enc, payload, address=Address("thread"), place=place)


@settings(max_examples=25, deadline=None)
@given(values=st.dictionaries(st.sampled_from(["a", "b", "c"]), _values, min_size=1))
def test_round_trip_through_a_saver(values: dict[str, Any]) -> None:
    saver = InMemorySaver(encryption={"k": b"\x09" * 32})
    ck = empty_checkpoint()
    ck["channel_values"] = values
    ck["channel_versions"] = dict.fromkeys(values, saver.get_next_version(None))
    note = repr(values.get("a"))  # metadata is JSON
    cfg = saver.put(make_config("t"), ck, {"note": note}, ck["channel_versions"])
    tup = saver.get_tuple(cfg)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == values
    assert tup.metadata["note"] == note

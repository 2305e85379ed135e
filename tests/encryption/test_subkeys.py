"""A writer's subkeys (#17): a fresh HKDF subkey every SUBKEY_USES values, from any thread."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from tether import encryption
from tether.encryption import Encryption, value_place

_SALT_AT = slice(2 + len("k1"), 2 + len("k1") + 8)  # after format, len(kid), kid


def test_a_writer_derives_a_fresh_subkey_every_subkey_uses_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(encryption, "SUBKEY_USES", 3)
    ring = Encryption({"k1": b"\x01" * 32})
    place = value_place("t", "", "c", "1", None)
    sealed = [ring.seal(place, b"value %d" % i) for i in range(7)]
    salts = [s[_SALT_AT] for s in sealed]
    assert salts[0] == salts[1] == salts[2]
    assert salts[3] == salts[4] == salts[5]
    assert len({salts[0], salts[3], salts[6]}) == 3
    reader = Encryption({"k1": b"\x01" * 32})
    assert [reader.open(place, s, str) for s in sealed] == [b"value %d" % i for i in range(7)]


def test_threads_sealing_at_once_share_the_budget_of_each_subkey(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(encryption, "SUBKEY_USES", 50)
    ring = Encryption({"k1": b"\x02" * 32})
    place = value_place("t", "", "c", "1", None)
    out: list[list[bytes]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        out[i].extend(ring.seal(place, b"x") for _ in range(500))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sealed = [s for part in out for s in part]
    uses = Counter(s[_SALT_AT] for s in sealed)
    # A subkey replaced by one thread may seal one more value in each other thread.
    assert max(uses.values()) <= 50 + 3
    assert sum(uses.values()) == 2000
    assert len(uses) >= 2000 // (50 + 3)
    assert len({s[_SALT_AT.stop : _SALT_AT.stop + 12] for s in sealed}) == 2000  # nonces
    assert all(ring.open(place, s, str) == b"x" for s in sealed)

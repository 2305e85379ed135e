"""Channel versions (SPEC S2.5)."""

from __future__ import annotations

import random

import pytest

from tether.errors import ConfigError
from tether.versions import next_int_version, next_str_version, version_major


def test_int_versions() -> None:
    assert next_int_version(None) == 1
    assert next_int_version(1) == 2
    assert next_int_version("00000000000000000000000000000007.0.5") == 8


def test_str_versions_are_padded_and_ordered() -> None:
    v = None
    seen = []
    for _ in range(120):
        v = next_str_version(v)
        seen.append(v)
    assert all(len(s.split(".")[0]) == 32 for s in seen)
    assert seen == sorted(seen), "string order must equal numeric order of the major"
    assert version_major(seen[-1]) == 120


def test_two_branches_get_distinct_versions_for_the_same_major() -> None:
    parent = next_str_version(None)
    a, b = next_str_version(parent), next_str_version(parent)
    assert version_major(a) == version_major(b) == 2
    assert a != b


def test_versions_accept_ints_and_floats() -> None:
    assert version_major(3) == 3
    assert version_major(3.0) == 3
    assert version_major(None) == 0
    assert next_str_version(5).startswith("0" * 31 + "6.")


@pytest.mark.parametrize("bad", ["abc", "x.1", True])
def test_bad_versions_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError):
        version_major(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["abc", "x.1", "", ".5"])
def test_bad_string_versions_are_config_errors_in_next_str_version(bad: str) -> None:
    with pytest.raises(ConfigError, match="is not "):
        next_str_version(bad)


def test_next_str_version_has_langgraphs_format(monkeypatch: pytest.MonkeyPatch) -> None:
    # LangGraph: f"{major + 1:032}.{random.random():016}"
    rng = random.Random(7)
    samples = [0.0, 0.5, 0.1, 1e-05, 5e-324, 9.99e-05, 0.999999999999999]
    samples += [rng.random() for _ in range(10_000)]
    cases = [("12.x", x) for x in samples]
    cases += [(c, x) for c in (None, 3, 4.0, "0" * 31 + "9.0.25") for x in samples[:50]]
    for current, x in cases:
        monkeypatch.setattr(random, "random", lambda x=x: x)
        assert next_str_version(current) == f"{version_major(current) + 1:032}.{x:016}"

"""``tether rekey``: a rotation killed by SIGKILL mid-way and finished by running it again.

The rekey runs in a child process on a real store (SQLite file, Postgres
schema), is killed after a few committed batches, and leaves a store that
reads with both keys; ``tether rekey`` (the CLI) then finishes it, and the
old key can leave the ring.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli._app import cli

from ..cli.graphs import as_url
from ..postgres.conftest import fresh_schema
from .helpers import K1, K2, Raw, fill, new_path, ring, snapshot

ROOT = Path(__file__).resolve().parents[2]


def _keys(*kids: str) -> str:
    keys = {"k1": K1, "k2": K2}
    return ",".join(f"{k}:{base64.b64encode(keys[k]).decode()}" for k in kids)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Raw, str]]:
    if request.param == "sqlite":
        path = new_path(tmp_path)
        yield Raw("sqlite", path), path
        return
    dsn = request.getfixturevalue("pg_dsn")
    schema = fresh_schema()
    yield Raw("postgres", dsn, schema), f"{as_url(dsn)}?schema={schema}"


@pytest.mark.slow
def test_a_rekey_killed_mid_way_is_finished_by_running_it_again(store: tuple[Raw, str]) -> None:
    raw, name = store
    with raw.saver(ring("k1")) as saver:
        for t in range(6):
            fill(saver, f"t{t}", 3)
        before = {f"t{t}": snapshot(saver, f"t{t}") for t in range(6)}
        total = saver.rekey_pending("k1") + 0
        assert total == 0
    with raw.saver(ring("k2", "k1")) as saver:
        total = saver.rekey_pending("k2")
    env = {**os.environ, "TETHER_KEYS": _keys("k2", "k1"), "PYTHONPATH": str(ROOT / "src")}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.encryption.rekey_child", name, "k2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    with child.stdout:
        for _ in range(5):
            line = child.stdout.readline()
            assert line.startswith("batch"), line
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    # Half rotated: every value still reads with both keys in the ring.
    with raw.saver(ring("k2", "k1")) as saver:
        left = saver.rekey_pending("k2")
        assert 0 < left < total
        for t, want in before.items():
            assert snapshot(saver, t) == want
    # Running it again (the CLI) finishes it.
    runner = CliRunner()
    result = runner.invoke(
        cli, ["rekey", name, "--to", "k2", "--json"], env={"TETHER_KEYS": _keys("k2", "k1")}
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["left"] == 0
    assert report["sealed"] == left
    # The old key can go.
    with raw.saver(ring("k2")) as saver:
        assert saver.rekey_pending() == 0
        for t, want in before.items():
            assert snapshot(saver, t) == want


def test_rekey_cli_names_a_key_it_does_not_have(tmp_path: Path) -> None:
    path = new_path(tmp_path)
    raw = Raw("sqlite", path)
    with raw.saver(ring("k1")) as saver:
        fill(saver, "t", 2)
    runner = CliRunner()
    result = runner.invoke(cli, ["rekey", path, "--to", "k2"], env={"TETHER_KEYS": _keys("k1")})
    assert result.exit_code == 1
    assert "key 'k2' is not in the keyring" in result.output
    # Without TETHER_KEYS there is nothing to seal with.
    result = runner.invoke(cli, ["rekey", path, "--to", "k1"], env={"TETHER_KEYS": ""})
    assert result.exit_code == 1
    assert "keyring" in result.output
    # A rekey to the key already active has nothing to do.
    result = runner.invoke(cli, ["rekey", path, "--to", "k1"], env={"TETHER_KEYS": _keys("k1")})
    assert result.exit_code == 0, result.output
    assert "sealed 0 row(s) under key 'k1'; 0 left" in result.output

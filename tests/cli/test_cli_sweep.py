"""``tether sweep`` (#15) on a store left by real graphs, through click's runner."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import tether.langgraph as tlg
from tether.cli._app import cli

from .graphs import run_scenario


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def ok_json(*args: str) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = tmp_path / "tether.db"
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        run_scenario(saver)
    time.sleep(1.1)  # every thread is now idle for more than --ttl 1s
    return str(path)


def _counts(store: str) -> dict[str, int]:
    return {t["thread_id"]: t["checkpoints"] for t in ok_json("threads", store)}


def test_dry_run_reports_and_deletes_nothing_then_the_sweep_deletes(store: str) -> None:
    before = _counts(store)
    assert before
    dry = ok_json("sweep", store, "--ttl", "1s", "--grace", "0s", "--dry-run")
    assert (dry["dry_run"], dry["threads"]) == (True, len(before))
    assert dry["checkpoints"] == sum(before.values())
    assert sorted(dry["thread_ids"]) == sorted(before)
    assert _counts(store) == before
    done = ok_json("sweep", store, "--ttl", "1s", "--grace", "0s", "--batch", "1")
    assert (done["threads"], done["checkpoints"], done["batches"]) == (
        dry["threads"],
        dry["checkpoints"],
        len(before),
    )
    assert done["bytes"] == dry["bytes"]
    assert _counts(store) == {}


def test_keep_last_and_the_text_output(store: str) -> None:
    result = run("sweep", store, "--keep-last", "1", "--grace", "0s", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "live thread(s) pruned" in result.stdout
    namespaces = {t["thread_id"]: t["namespaces"] for t in ok_json("threads", store)}
    assert _counts(store) == namespaces  # the newest checkpoint of each namespace
    # The grace period keeps threads just written: nothing is due with the default.
    again = ok_json("sweep", store, "--ttl", "1s")
    assert (again["threads"], again["checkpoints"]) == (0, 0)


def test_vacuum_gives_the_free_pages_back(store: str) -> None:
    size = Path(store).stat().st_size
    done = ok_json("sweep", store, "--ttl", "1s", "--grace", "0s", "--vacuum")
    assert done["threads"] > 0
    assert done["freed_bytes"] > 0
    assert Path(store).stat().st_size < size


def test_usage_errors(store: str) -> None:
    bad = run("sweep", store, "--grace", "1m")
    assert bad.exit_code == 2
    assert "--grace goes with --ttl" in bad.stderr
    bad = run("sweep", store, "--ttl", "7 days")
    assert bad.exit_code == 2
    assert "is not a duration" in bad.stderr
    assert run("sweep", store, "--batch", "0").exit_code == 2

"""The installed ``tether`` script in a real subprocess, and every command's help and docs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tether.cli._app import cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("tether")
COMMANDS = sorted(cli.commands)  # type: ignore[attr-defined]


def tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_installed_script_imports_and_lists(
    official_sqlite: tuple[Path, Any], tmp_path: Path
) -> None:
    assert SCRIPT.exists(), f"{SCRIPT} is missing: pip install -e '.[cli]'"
    source, before = official_sqlite
    target = str(tmp_path / "tether.db")
    done = tether("import", str(source), target, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["checkpoints"] == len(before["tuples"])
    listed = tether("threads", target, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["thread_id"] for t in json.loads(listed.stdout)] == ["chat-1", "chat-2"]
    failed = tether("show", target, "ghost")
    assert failed.returncode == 1
    assert failed.stderr.startswith("Error: thread 'ghost' not found")
    assert "Traceback" not in failed.stderr
    assert tether("--version").stdout.startswith("tether, version")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_docs(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage: " in result.output
    assert len(result.output.splitlines()) > 4
    docs = (ROOT / "docs" / "cli.md").read_text()
    assert f"tether {command} " in docs, f"docs/cli.md does not show `tether {command}`"


def test_group_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in COMMANDS:
        assert command in result.output

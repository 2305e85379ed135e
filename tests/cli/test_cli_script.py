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


def test_python_dash_m_tether_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tether", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tether, version")


_MODELS = """
from dataclasses import dataclass


@dataclass
class Order:
    sku: str
    qty: int
"""


def test_allow_finds_the_users_module_in_the_current_directory(tmp_path: Path) -> None:
    """#13.4: `--allow mymodels:Order` run from the project directory finds mymodels.py,
    as `python -m` would, so a stored user type is shown instead of refused."""
    (tmp_path / "mymodels.py").write_text(_MODELS)
    store = tmp_path / "app.db"
    write = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from mymodels import Order
from tether import SqliteSaver, empty_checkpoint
from tether.serde import MsgpackSerializer
with SqliteSaver({str(store)!r}, serde=MsgpackSerializer(allowlist=[Order])) as saver:
    cp = empty_checkpoint()
    cp["channel_values"] = {{"order": Order("lamp", 2)}}
    cp["channel_versions"] = {{"order": saver.get_next_version(None)}}
    saver.put({{"configurable": {{"thread_id": "t1"}}}}, cp, {{}}, cp["channel_versions"])
"""
    made = subprocess.run([sys.executable, "-c", write], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    # The command runs from the project directory; the script's own directory is
    # elsewhere (the venv's bin), so only the cwd rule can find mymodels.
    refused = subprocess.run(
        [str(SCRIPT), "show", str(store), "t1", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1
    assert "--allow mymodels:Order" in refused.stderr
    shown = subprocess.run(
        [str(SCRIPT), "show", str(store), "t1", "--json", "--allow", "mymodels:Order"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "lamp" in shown.stdout
    import os

    from_env = subprocess.run(
        [str(SCRIPT), "show", str(store), "t1", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TETHER_ALLOWLIST": "mymodels:*"},
    )
    assert from_env.returncode == 0, from_env.stderr
    assert "lamp" in from_env.stdout


def test_an_unexpected_exception_is_one_error_line_unless_debugging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The boundary's last resort: a non-tether exception (a bug) is one line, exit 1."""
    import click

    from tether.cli._common import boundary as _boundary

    @click.command()
    @_boundary
    def broken() -> None:
        raise KeyError("no such key\nsecond line")

    result = CliRunner().invoke(broken, [])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: unexpected KeyError:")
    assert "TETHER_DEBUG=1" in result.stderr
    monkeypatch.setenv("TETHER_DEBUG", "1")
    debug = CliRunner().invoke(broken, [])
    assert isinstance(debug.exception, KeyError)

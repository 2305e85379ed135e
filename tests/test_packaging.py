"""Installing tether into someone else's project: the wheel `make dist` builds (#13.6).

A real build, a real fresh virtual environment, a real `pip install` of the
wheel with the core dependencies only (as a project that wants the SQLite
saver would), then what a new user tries first.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=600, cwd=cwd, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a new venv holding the wheel of this checkout and its core deps."""
    tmp = tmp_path_factory.mktemp("dist")
    built = _run(
        sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(tmp), str(ROOT)
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp.glob("tether-*.whl")
    env = tmp / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    constraints = ROOT / "requirements" / "constraints.txt"
    done = _run(str(python), "-m", "pip", "install", "-q", "-c", str(constraints), str(wheel))
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def test_the_wheel_works_with_the_core_dependencies_only(installed: Path, tmp_path: Path) -> None:
    script = """
from tether import SqliteSaver, empty_checkpoint
with SqliteSaver("app.db") as saver:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": ["hi"]}
    cp["channel_versions"] = {"messages": saver.get_next_version(None)}
    config = saver.put({"configurable": {"thread_id": "t"}}, cp, {}, cp["channel_versions"])
    print(saver.get_tuple(config).checkpoint["channel_values"])
"""
    done = _run(str(installed), "-c", script, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "{'messages': ['hi']}" in done.stdout


def test_a_missing_extra_is_named(installed: Path) -> None:
    lg = _run(str(installed), "-c", "import tether.langgraph")
    assert lg.returncode == 1
    assert "pip install 'tether[langgraph]'" in lg.stderr
    cli = _run(str(installed), "-m", "tether", "--version")
    assert cli.returncode == 1
    assert cli.stderr.startswith("Error: the tether command needs the cli extra")
    pg = _run(str(installed), "-c", "from tether import PostgresSaver")
    assert pg.returncode == 1
    assert "tether[postgres]" in pg.stderr

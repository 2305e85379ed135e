"""The README's demo runs end to end in a real subprocess, twice on the same file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _run(db: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "tether.demo", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=db.parent,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_demo_kills_resumes_approves_and_forks(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    for _ in range(2):  # re-running on the same file is safe
        text = _run(db)
        assert "killed (exit -9)" in text
        assert "tasks whose writes were saved before the kill: ['price', 'stock']" in text
        # finished work was not repeated after the crash
        assert "price    finished 1 time(s)" in text
        assert "stock    finished 1 time(s)" in text
        assert "fraud    finished 1 time(s)" in text
        assert "fraud    started  2 time(s)" in text
        assert "outcome: shipped with tracking TR-1001" in text
        assert "new branch outcome: cancelled, customer refunded" in text
        assert "decision='yes' outcome='shipped with tracking TR-1001'" in text
        assert "decision='no' outcome='cancelled, customer refunded'" in text

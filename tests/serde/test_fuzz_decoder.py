"""The decoder fuzz target, run for a bounded time in its own process (issue #18).

``fuzz_decoder.py`` mutates real encoded values and decodes them with a
strict, a default and a permissive serializer; nothing but DecodeError may get
out, no module may be imported, and the process must not crash (which is why
it runs in a subprocess: a segfault fails this test instead of killing the
test run). CI runs it for ``TETHER_FUZZ_SECONDS`` (default 20); run it longer
locally, e.g. ``TETHER_FUZZ_SECONDS=3600 pytest tests/serde/test_fuzz_decoder.py``.
A failure names the seed (``TETHER_FUZZ_SEED`` replays it) and the input.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).with_name("fuzz_decoder.py")
MIN_INPUTS = 500


def test_decoder_fuzz(tmp_path: Path) -> None:
    seconds = float(os.environ.get("TETHER_FUZZ_SECONDS", "20"))
    seed = int(os.environ.get("TETHER_FUZZ_SEED") or random.SystemRandom().randrange(2**31))
    last = tmp_path / "last-input.bin"
    proc = subprocess.run(
        [
            sys.executable,
            str(FUZZ),
            *("--seconds", str(seconds), "--seed", str(seed)),
            *("--min-inputs", str(MIN_INPUTS), "--last-input", str(last)),
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 600,
        check=False,
    )
    replay = f"TETHER_FUZZ_SEED={seed}"
    if proc.returncode < 0:
        tag, _, data = last.read_bytes().partition(b"\x00")
        pytest.fail(
            f"the decoder killed the process (signal {-proc.returncode}) on a {tag.decode()!r} "
            f"input of {len(data)} bytes ({replay}; the input is in {last}): "
            f"{data[:2048].hex()}\n{proc.stderr[-2000:]}"
        )
    assert proc.stdout, f"no report ({replay}): {proc.stderr[-3000:]}"
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["failures"] == [], f"{replay}: {json.dumps(report['failures'], indent=1)}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = report["counts"]
    # it ran, and its inputs reached both outcomes on every serializer
    assert counts["inputs"] >= MIN_INPUTS
    assert counts["decodes"] == 3 * counts["inputs"]
    assert counts["ok"] > 0
    assert counts["decode_error"] > 0

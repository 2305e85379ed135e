"""Generate the sync twin of each async-first module (psycopg/httpcore style).

The async module is the source of truth and is written by hand; this script
rewrites it into the sync module by a fixed list of token substitutions.
``--check`` (run by ``make test``) fails when a generated file is stale, so
the two can never drift. Edit the async file, then run ``make gen-sync``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (async source, generated sync target)
PAIRS: list[tuple[str, str]] = [
    ("src/tether/backends/postgres/_async.py", "src/tether/backends/postgres/_sync.py"),
]

# Applied in order, as whole-word regexes where that matters.
SUBS: list[tuple[str, str]] = [
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncGenerator\b", "Generator"),
    (r"\bAsyncConnectionPool\b", "ConnectionPool"),
    (r"\bAsyncConnection\b", "Connection"),
    (r"\bAsyncCursor\b", "Cursor"),
    (r"\bAsyncPipeline\b", "Pipeline"),
    (r"\bAsyncServerCursor\b", "ServerCursor"),
    (r"\bAsyncTransaction\b", "Transaction"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\bAsyncExitStack\b", "ExitStack"),
    (r"\bAbstractAsyncContextManager\b", "AbstractContextManager"),
    (r"\benter_async_context\b", "enter_context"),
    (r"\b_Async([A-Z]\w*)", r"_\1"),
    (r"\bAwaitable\[(\w+)\]", r"\1"),
    (r"\bdef alist\b", "def list"),
    (r"\basync_to_sync\b", "identity"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\b_async_(\w+)", r"_sync_\1"),
    (r"\basync def __aenter__\b", "def __enter__"),
    (r"\basync def __aexit__\b", "def __exit__"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\b__anext__\b", "__next__"),
    (r"\bStopAsyncIteration\b", "StopIteration"),
    (r"\basync def (a)(\w+)", r"def \2"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait\s+", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basyncio\.Lock\b", "threading.Lock"),
    (
        r"\bself\.a(get_tuple|list|put_writes|put|delete_thread|delete_for_runs|copy_thread|prune|setup|close|lease)\b",
        r"self.\1",
    ),
    (r"# tether: async-only.*\n", ""),
]

HEADER = (
    "# GENERATED FILE: do not edit. Source: {src}\n"
    "# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.\n"
)


def transform(text: str, src: str) -> str:
    out_lines = []
    skip = False
    for line in text.splitlines(keepends=True):
        # Blocks between these markers exist only in the async source.
        # Markers are comment lines of their own (a docstring may quote them).
        marker = line.strip()
        if marker == "# tether: begin async-only":
            skip = True
            continue
        if marker == "# tether: end async-only":
            skip = False
            continue
        if skip:
            continue
        m = re.match(r"^(\s*)# tether: sync-only: (.*)$", line)
        if m:
            out_lines.append(f"{m.group(1)}{m.group(2)}\n")
            continue
        out_lines.append(line)
    body = "".join(out_lines)
    for pattern, repl in SUBS:
        body = re.sub(pattern, repl, body)
    return _ruff_format(HEADER.format(src=src) + body, src)


def _ruff_format(text: str, src: str) -> str:
    """Format the generated text as `ruff format` would the checked-in file.

    Dropping ``await``/``async`` shortens lines, so the formatter may join
    lines that had to be split in the source; without this the generated file
    would fail `ruff format --check`.
    """
    ruff = Path(sys.executable).parent / "ruff"
    exe = str(ruff) if ruff.exists() else shutil.which("ruff")
    if exe is None:
        raise SystemExit("gen_sync needs ruff (make .venv/.installed)")
    target = src.replace("_async", "_sync")
    # Imports first: the sync-only lines land where isort would not put them, and
    # async-only names and noqa comments turn unused.
    fixed = subprocess.run(
        [
            exe,
            "check",
            "--select",
            "I,F401,RUF100",
            "--fix",
            "--quiet",
            "--stdin-filename",
            target,
            "-",
        ],
        input=text,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    text = fixed.stdout or text
    out = subprocess.run(
        [exe, "format", "--stdin-filename", target, "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if out.returncode != 0:
        raise SystemExit(f"ruff format failed on the generated {target}:\n{out.stderr}")
    return out.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a target is stale")
    args = parser.parse_args()
    stale = []
    for src, dst in PAIRS:
        src_path, dst_path = ROOT / src, ROOT / dst
        if not src_path.exists():
            continue
        want = transform(src_path.read_text(), src)
        have = dst_path.read_text() if dst_path.exists() else None
        if have == want:
            continue
        if args.check:
            stale.append(dst)
        else:
            dst_path.write_text(want)
            print(f"wrote {dst}")
    if stale:
        print("stale generated files (run `make gen-sync`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Generate the sync twin of each async-first module (psycopg's async_to_sync style).

The async module is the source of truth and is written by hand; this script
rewrites it into the sync module: a fixed list of token substitutions (drop
``async``/``await``, ``Async``-prefixed names and ``a``-prefixed saver
methods), then ``ruff`` (imports, format). ``--check`` (``make check-sync``,
part of ``make test``) fails when a generated file is stale, so the two can
never drift. Edit the async file, then run ``make gen-sync``.

Where the two must differ, the async source says so in real code, as psycopg
does::

    if True:  # ASYNC
        await asyncio.gather(*(work(t) for t in todo))    # the async module runs this
    else:
        runner.run(work, todo)                            # the sync module gets this

The ``if True:  # ASYNC`` branch is dropped and the ``else:`` branch (if any)
is kept, one level less indented; sync-only code thus stays real code, linted
with the async source and type-checked in the generated module. Any other
line ending in ``# ASYNC`` is dropped: the short docstring of an async method
whose sync twin has a longer one, written as the string that follows it::

    async def ainvoke(self, ...):
        "Async :meth:`invoke`."  # ASYNC
        "Run to the end (or to an interrupt); returns the state values."
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
    ("src/tether/backends/postgres/_group_async.py", "src/tether/backends/postgres/_group_sync.py"),
    ("src/tether/graph/_persist_async.py", "src/tether/graph/_persist_sync.py"),
    ("src/tether/graph/_loop_async.py", "src/tether/graph/_loop_sync.py"),
    ("src/tether/graph/_pregel_async.py", "src/tether/graph/_pregel_sync.py"),
    ("src/tether/_delta_chains_async.py", "src/tether/_delta_chains_sync.py"),
    ("src/tether/langgraph/_adapter_async.py", "src/tether/langgraph/_adapter_sync.py"),
    ("src/tether/_sweep_async.py", "src/tether/_sweep_sync.py"),
]

# Names whose sync twin the generic rules below would get wrong, whole words.
RENAMES: list[tuple[str, str]] = [
    ("AsyncPersister", "SyncPersister"),
    ("run_async", "run_sync"),
    ("_call_async", "_call_sync"),
    ("_adrive", "_drive"),
    ("aprune_keeping_chains", "prune_keeping_chains"),
    ("adelete_runs_keeping_chains", "delete_runs_keeping_chains"),
    ("asweep", "sweep"),
]

# Applied in order, as whole-word regexes where that matters.
SUBS: list[tuple[str, str]] = [
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncGenerator\b", "Generator"),
    (r"\bAsyncConnectionPool\b", "ConnectionPool"),
    (r"\bAsyncConnection\b", "Connection"),
    (r"\bAsyncCursor\b", "Cursor"),
    (r"\bAsyncRawCursor\b", "RawCursor"),
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
    (r"\basync for (\w+) in (.*):\n\s+yield \1\n", r"yield from \2\n"),
    (r"\basync for\b", "for"),
    (r"\bawait\s+", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (
        r"\.a(get_tuple|get_writes|list|put_writes|put|delete_thread|delete_for_runs|copy_thread"
        r"|prune|setup|close|lease|invoke|stream|get_state_history|get_state|update_state"
        r"|delta_history|get_delta_channel_history|threads|sweep)\b",
        r".\1",
    ),
    (r"\._a(sweep_expired|sweep_prune|sweep_vacuum|retention_rows)\b", r"._\1"),
    (r"\b(tether\.[\w.]+?)_async\b", r"\1_sync"),  # imports of other generated pairs
]

HEADER = (
    "# GENERATED FILE: do not edit. Source: {src}\n"
    "# Regenerate with `make gen-sync` (tools/gen_sync.py); CI checks it is current.\n"
)

_ASYNC_IF = re.compile(r"^( *)if True: +# ASYNC\s*$")
_ASYNC_ONLY_LINE = "# ASYNC"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _in_block(line: str, indent: int) -> bool:
    """Whether ``line`` belongs to a block whose header is indented by ``indent``."""
    return not line.strip() or _indent(line) > indent


def _keep_sync_branches(lines: list[str], src: str) -> list[str]:
    """``if True:  # ASYNC`` blocks: drop the async branch, keep the ``else:`` one dedented."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _ASYNC_IF.match(lines[i])
        if m is None:
            if lines[i].rstrip().endswith(_ASYNC_ONLY_LINE):
                i += 1
                continue
            out.append(lines[i])
            i += 1
            continue
        indent = len(m.group(1))
        i += 1
        while i < len(lines) and _in_block(lines[i], indent):
            i += 1
        if i < len(lines) and _indent(lines[i]) == indent:
            head = lines[i].strip()
            if head.startswith("elif"):
                raise SystemExit(f"{src}:{i + 1}: `if True:  # ASYNC` takes an else:, not an elif")
            if head == "else:":
                i += 1
                start = i
                while i < len(lines) and _in_block(lines[i], indent):
                    i += 1
                # Recurse: an else branch may hold a block of its own.
                body = _keep_sync_branches(lines[start:i], src)
                out.extend(line[4:] if line.strip() else line for line in body)
    return out


def transform(text: str, src: str, dst: str) -> str:
    for marker in ("# tether: begin async-only", "# tether: sync-only:"):
        if marker in text:
            raise SystemExit(f"{src}: {marker!r} is gone; write `if True:  # ASYNC` ... `else:`")
    body = "".join(_keep_sync_branches(text.splitlines(keepends=True), src))
    for name, sync_name in RENAMES:
        body = re.sub(rf"\b{name}\b", sync_name, body)
    for pattern, repl in SUBS:
        body = re.sub(pattern, repl, body)
    return _ruff_format(HEADER.format(src=src) + body, dst)


def _ruff_format(text: str, target: str) -> str:
    """Format the generated text as `ruff format` would the checked-in file.

    Dropping ``await``/``async`` shortens lines, so the formatter may join
    lines that had to be split in the source; without this the generated file
    would fail `ruff format --check`.
    """
    ruff = Path(sys.executable).parent / "ruff"
    exe = str(ruff) if ruff.exists() else shutil.which("ruff")
    if exe is None:
        raise SystemExit("gen_sync needs ruff (make .venv/.installed)")
    # Imports first: an else branch's imports land where isort would not put them,
    # and async-only names and noqa comments turn unused.
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
        want = transform(src_path.read_text(), src, dst)
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

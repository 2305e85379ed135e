"""Child processes for the Postgres multi-process tests (run as scripts, real processes).

    python child.py setup DSN SCHEMA          setup() once "go" arrives on stdin
    python child.py append DSN SCHEMA THREAD  put + put_writes on THREAD until stdin closes
    python child.py lease DSN SCHEMA THREAD [wait]  hold the lease until stdin closes

Each prints ``ready`` once connected (so the parent can release them all at once)
and reports failures on stderr with a non-zero exit code.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tether import PostgresSaver, ThreadBusyError, make_config
from tether.ids import uuid6

STABLE = "stable value " * 40  # a blob written once, referenced by every later checkpoint


def history(step: int) -> list[str]:
    """The ``messages`` of a step: a growing list, stored as snapshots and tails once big."""
    return [f"m{j}-" + "x" * 200 for j in range(step + 1)]


def open_saver(dsn: str, schema: str, **kwargs: Any) -> PostgresSaver:
    """A URL-built saver; TETHER_CHILD_PREPARE=none turns prepared statements off (PgBouncer)."""
    if os.environ.get("TETHER_CHILD_PREPARE") == "none":
        kwargs["prepare_threshold"] = None
    return PostgresSaver.from_conn_string(dsn, schema=schema, **kwargs)


def say(line: str) -> None:
    print(line, flush=True)


def setup(dsn: str, schema: str) -> None:
    with open_saver(dsn, schema, pool_size=1) as saver:
        saver._sync_core()  # open the pool now, so "go" releases only the setup itself
        say("ready")
        sys.stdin.readline()
        saver.setup()
        say("done")


def checkpoint(prev: dict[str, Any] | None, values: dict[str, Any]) -> tuple[Any, Any]:
    versions = dict(prev["channel_versions"]) if prev else {}
    new = {}
    for channel in values:
        major = int(versions.get(channel, "0").split(".")[0]) + 1
        new[channel] = versions[channel] = f"{major:032}.0"
    cp = {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2026-12-02T00:00:00+00:00",
        "channel_values": dict(values),
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": sorted(values),
    }
    return cp, new


def append(dsn: str, schema: str, thread: str) -> None:
    """Extend THREAD (resuming at its latest checkpoint) until stdin closes; print each id."""
    import select

    with open_saver(dsn, schema, pool_size=2) as saver:
        say("ready")
        latest = saver.get_tuple(make_config(thread))
        cfg = latest.config if latest else make_config(thread)
        prev = latest.checkpoint if latest else None
        i = 0
        while True:
            values: dict[str, Any] = {"messages": history(i), "step": i}
            if prev is None:
                values["stable"] = STABLE
            cp, new = checkpoint(prev, values)
            cfg = saver.put(cfg, cp, {"step": i, "source": "loop"}, new)
            saver.put_writes(cfg, [("messages", f"w{i}")], f"task-{i}")
            say(cfg["configurable"]["checkpoint_id"])
            prev, i = cp, i + 1
            readable, _, _ = select.select([sys.stdin], [], [], 0)
            if readable and not sys.stdin.readline():
                return


def lease(dsn: str, schema: str, thread: str, how: str = "nowait") -> None:
    with open_saver(dsn, schema, pool_size=1) as saver:
        say("ready")
        try:
            with saver.lease(thread, wait=how == "wait", timeout=60):
                say("leased")
                sys.stdin.read()  # hold until the parent closes stdin
        except ThreadBusyError as exc:
            say(f"busy {exc}")
            return
        say("released")


if __name__ == "__main__":
    try:
        {"setup": setup, "append": append, "lease": lease}[sys.argv[1]](*sys.argv[2:])
    except BaseException:
        traceback.print_exc()
        sys.exit(1)

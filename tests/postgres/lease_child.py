"""Child processes of the lease tests (run as scripts: real processes, real connections).

    python lease_child.py advance DSN SCHEMA THREAD
        take the lease (waiting), put a child of the thread's latest checkpoint,
        release; prints ``put ID PARENT`` then ``released EPOCH``
    python lease_child.py rounds DSN SCHEMA THREAD SEED
        until stdin closes: take the lease (waiting), read the latest checkpoint,
        maybe sleep, put a child of it and a task write, maybe sleep, release

``rounds`` prints one line per event, for the parent to count: ``put ID PARENT``,
``lost-put EPOCH`` / ``lost-write EPOCH`` (a write refused: LeaseLostError),
``lost-exit EPOCH`` (the block ended on a lost lease), ``error NAME`` (another
tether error, e.g. StorageUnavailable while the server restarts; the child
carries on). Environment: ``TETHER_CHILD_PREPARE=none`` turns prepared
statements off (PgBouncer); ``TETHER_TEST_UNFENCED=1`` takes leases without
fencing, as tether did before issue #18.7, to show what the fence prevents.
"""

from __future__ import annotations

import os
import random
import select
import sys
import time
import traceback
from typing import Any

from tether import PostgresSaver, TetherError, make_config
from tether.backends.postgres._leases import LeaseRegistry
from tether.errors import LeaseLostError, ThreadBusyError
from tether.ids import uuid6


def say(line: str) -> None:
    print(line, flush=True)


def open_saver(dsn: str, schema: str) -> PostgresSaver:
    kwargs: dict[str, Any] = {"pool_size": 2, "pool_timeout": 5}
    if os.environ.get("TETHER_CHILD_PREPARE") == "none":
        kwargs["prepare_threshold"] = None
    if os.environ.get("TETHER_TEST_UNFENCED") == "1":
        # The lease without its fencing token: nothing is registered, so every
        # write goes out as the plain statement (the code before #18.7).
        LeaseRegistry.hold = lambda self, thread_id, epoch: None  # type: ignore[method-assign]
    return PostgresSaver.from_conn_string(dsn, schema=schema, **kwargs)


def put_child(saver: PostgresSaver, thread: str, name: str) -> tuple[str, str]:
    """Put a child of ``thread``'s latest checkpoint; (its id, the parent's id or '-')."""
    latest = saver.get_tuple(make_config(thread))
    return put_after(saver, thread, latest, name)


def put_after(saver: PostgresSaver, thread: str, latest: Any, name: str) -> tuple[str, str]:
    config = latest.config if latest is not None else make_config(thread)
    versions = dict(latest.checkpoint["channel_versions"]) if latest is not None else {}
    new = {
        "writer": saver.get_next_version(versions.get("writer")),
        "note": saver.get_next_version(versions.get("note")),
    }
    checkpoint: Any = {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2026-12-03T00:00:00+00:00",
        "channel_values": {"writer": name, "note": f"{name} " * 100},  # the note is a blob
        "channel_versions": {**versions, **new},
        "versions_seen": {},
        "updated_channels": sorted(new),
    }
    out = saver.put(config, checkpoint, {"source": "loop", "step": 0, "writer": name}, new)
    parent = config["configurable"].get("checkpoint_id") or "-"
    return out["configurable"]["checkpoint_id"], parent


def put_task_write(saver: PostgresSaver, thread: str, checkpoint_id: str, name: str) -> None:
    config = make_config(thread)
    config["configurable"]["checkpoint_id"] = checkpoint_id
    saver.put_writes(config, [("writer", name)], f"task-{name}")


def advance(dsn: str, schema: str, thread: str) -> None:
    with open_saver(dsn, schema) as saver:
        with saver.lease(thread, wait=True, timeout=60) as lease:
            name = f"advance-{os.getpid()}"
            cid, parent = put_child(saver, thread, name)
            put_task_write(saver, thread, cid, name)
            say(f"put {cid} {parent}")
        say(f"released {lease.epoch}")


def stopped() -> bool:
    """Whether the parent closed stdin (its signal to stop)."""
    readable, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(readable) and not sys.stdin.readline()


def rounds(dsn: str, schema: str, thread: str, seed: str) -> None:
    rng = random.Random(int(seed))
    name = f"w{seed}"
    with open_saver(dsn, schema) as saver:
        say("ready")
        while not stopped():
            epoch = 0
            try:
                with saver.lease(thread, wait=True, timeout=30) as lease:
                    epoch = lease.epoch
                    latest = saver.get_tuple(make_config(thread))
                    if rng.random() < 0.5:
                        time.sleep(rng.uniform(0, 0.05))  # a slow step: chaos lands here
                    try:
                        cid, parent = put_after(saver, thread, latest, name)
                    except LeaseLostError as exc:
                        say(f"lost-put {exc.epoch}")
                        continue
                    say(f"put {cid} {parent}")
                    try:
                        put_task_write(saver, thread, cid, name)
                    except LeaseLostError as exc:
                        say(f"lost-write {exc.epoch}")
                        continue
                    if rng.random() < 0.2:
                        time.sleep(rng.uniform(0, 0.02))
            except LeaseLostError:
                say(f"lost-exit {epoch}")
            except ThreadBusyError:
                say("busy")
            except TetherError as exc:
                say(f"error {type(exc).__name__}")
                time.sleep(0.05)


if __name__ == "__main__":
    try:
        {"advance": advance, "rounds": rounds}[sys.argv[1]](*sys.argv[2:])
    except BaseException:
        traceback.print_exc()
        sys.exit(1)

"""Lease test helpers: many holders in real processes, and the history they leave.

:class:`Fleet` runs ``lease_child.py rounds`` in several processes on one
thread and counts what they report; :func:`history` reads the thread's
checkpoints back and finds its forks (a checkpoint with two children: two
holders both advanced the thread from it). The rest drive one saver's lease
and writes through its sync or its async methods alike.
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tether import make_config
from tether.ids import uuid6

from .helpers import call

CHILD = str(Path(__file__).with_name("lease_child.py"))


def lease_key(schema: str, thread: str) -> str:
    """The text hashed into the thread's advisory-lock key (``Statements.lease_key``)."""
    return f"tether.lease:{schema}:{thread}"


#: The server processes holding a thread's lease lock (pg_locks splits the key in halves).
HOLDERS = """SELECT k.pid FROM pg_locks k
WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
  AND k.classid = ((hashtextextended(%(key)s, 0) >> 32) & 4294967295)::oid
  AND k.objid = (hashtextextended(%(key)s, 0) & 4294967295)::oid"""


def lock_holders(conn: psycopg.Connection[Any], schema: str, thread: str) -> list[int]:
    rows = conn.execute(HOLDERS, {"key": lease_key(schema, thread)}).fetchall()
    return [int(r[0]) for r in rows]


def terminate_holder(conn: psycopg.Connection[Any], schema: str, thread: str) -> bool:
    """End the session holding the thread's lease lock, if any; whether one was ended."""
    row = conn.execute(
        f"SELECT bool_or(pg_terminate_backend(h.pid)) FROM ({HOLDERS}) h",
        {"key": lease_key(schema, thread)},
    ).fetchone()
    return bool(row and row[0])


def wait_for(what: str, ready: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll until ``ready()``; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@dataclass
class History:
    """A thread's checkpoints as (id -> parent id) and the forks among them."""

    parents: dict[str, str | None]
    forks: dict[str | None, list[str]] = field(default_factory=dict)

    @property
    def single_chain(self) -> bool:
        return not self.forks


def history(conn: psycopg.Connection[Any], schema: str, thread: str) -> History:
    rows = conn.execute(
        f'SELECT checkpoint_id, parent_checkpoint_id FROM "{schema}".tether_checkpoints '
        "WHERE thread_id = %s AND checkpoint_ns = '' ORDER BY checkpoint_id",
        (thread,),
    ).fetchall()
    parents = {str(r[0]): (None if r[1] is None else str(r[1])) for r in rows}
    children: dict[str | None, list[str]] = collections.defaultdict(list)
    for cid, parent in parents.items():
        children[parent].append(cid)
    return History(parents, {p: c for p, c in children.items() if len(c) > 1})


class Fleet:
    """``n`` processes running ``lease_child.py rounds`` on one thread."""

    def __init__(
        self, dsn: str, schema: str, thread: str, n: int, *, env: dict[str, str] | None = None
    ) -> None:
        self.events: collections.Counter[str] = collections.Counter()
        self.puts: list[tuple[str, str]] = []  # (checkpoint id, parent id or '-')
        self._lock = threading.Lock()
        self.children = [
            subprocess.Popen(
                [sys.executable, CHILD, "rounds", dsn, schema, thread, str(seed)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, **(env or {})},
            )
            for seed in range(n)
        ]
        self._readers = [
            threading.Thread(target=self._read, args=(child,), daemon=True)
            for child in self.children
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, child: subprocess.Popen[str]) -> None:
        assert child.stdout is not None
        for line in child.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self._lock:
                self.events[kind] += 1
                if kind == "put":
                    cid, parent = rest.split()
                    self.puts.append((cid, parent))

    def count(self, kind: str) -> int:
        with self._lock:
            return self.events[kind]

    def alive(self) -> bool:
        return all(child.poll() is None for child in self.children)

    def stop(self) -> None:
        """Ask every child to stop after its round; fail if one of them crashed."""
        errors = []
        for child in self.children:
            if child.stdin is not None and not child.stdin.closed:
                child.stdin.close()
        for child, reader in zip(self.children, self._readers, strict=True):
            try:
                child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            reader.join(timeout=30)
            assert child.stderr is not None
            err = child.stderr.read()
            child.stderr.close()
            if child.stdout is not None:
                child.stdout.close()
            if child.returncode != 0:
                errors.append(err)
        assert not errors, "\n".join(errors)

    def kill(self) -> None:
        """Kill every child still running (cleanup after a failure)."""
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.wait()
            for stream in (child.stdin, child.stdout, child.stderr):
                if stream is not None and not stream.closed:
                    stream.close()


# --- driving one saver through its sync or async lease ------------------------------


@contextlib.asynccontextmanager
async def leased(mode: str, saver: Any, thread: str, **kwargs: Any) -> AsyncIterator[Any]:
    """``saver.lease`` or ``saver.alease``, as one async context manager."""
    if mode == "sync":
        with saver.lease(thread, **kwargs) as lease:
            yield lease
    else:
        async with saver.alease(thread, **kwargs) as lease:
            yield lease


async def under_lease(
    mode: str, saver: Any, thread: str, body: Callable[[Any], Awaitable[Any]], **kwargs: Any
) -> Any:
    """Run ``body(lease)`` under the lease of ``thread`` (the block's exit may raise)."""
    async with leased(mode, saver, thread, **kwargs) as lease:
        return await body(lease)


def under(cm: contextlib.AbstractContextManager[Any], body: Callable[[Any], Any]) -> Any:
    """Run ``body(lease)`` in the (sync) lease block ``cm``."""
    with cm as lease:
        return body(lease)


async def held(mode: str, lease: Any) -> bool:
    return bool(lease.is_held() if mode == "sync" else await lease.is_held())


async def check(mode: str, lease: Any) -> None:
    if mode == "sync":
        lease.check()
    else:
        await lease.check()


async def step(
    mode: str, saver: Any, parent: dict[str, Any] | None, n: int, *, big: bool = False
) -> dict[str, Any]:
    """Put checkpoint ``n`` of thread ``t`` after ``parent`` (``big``: blob values too)."""
    version = f"{n + 1:032}.0"
    values: dict[str, Any] = {"n": n}
    if big:
        values["note"] = f"note {n} " * 200  # a blob row
        values["history"] = [f"m{i} " * 100 for i in range(n + 30)]  # an append-encoded list
    cp = {
        "v": 4,
        "id": str(uuid6()),
        "ts": "2026-12-03T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": dict.fromkeys(values, version),
        "versions_seen": {},
        "updated_channels": sorted(values),
    }
    config = parent if parent is not None else make_config("t")
    out = await call(mode, saver, "put", config, cp, {"step": n}, dict.fromkeys(values, version))
    return dict(out)


def row_counts(admin: psycopg.Connection[Any], schema: str) -> tuple[int, int, int]:
    q = f'"{schema}"'
    row = admin.execute(
        f"SELECT (SELECT count(*) FROM {q}.tether_checkpoints), "
        f"(SELECT count(*) FROM {q}.tether_blobs), (SELECT count(*) FROM {q}.tether_writes)"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def epoch_of(admin: psycopg.Connection[Any], schema: str, thread: str) -> int | None:
    row = admin.execute(
        f'SELECT epoch FROM "{schema}".tether_leases WHERE thread_id = %s', (thread,)
    ).fetchone()
    return None if row is None else int(row[0])


def advance_elsewhere(dsn: str, schema: str, thread: str, **env: str) -> tuple[str, str]:
    """Another process takes the lease (waiting), puts a child of the latest checkpoint."""
    out = subprocess.run(
        [sys.executable, CHILD, "advance", dsn, schema, thread],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    kind, cid, parent = lines[0].split()
    assert kind == "put"
    return cid, parent


def end_lock_session(admin: psycopg.Connection[Any], schema: str, thread: str) -> None:
    assert terminate_holder(admin, schema, thread)
    wait_for("the lease's session to end", lambda: not lock_holders(admin, schema, thread))

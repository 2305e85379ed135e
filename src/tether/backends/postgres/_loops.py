"""One async pool per event loop for a URL-built saver (issue #18.8b).

psycopg's ``AsyncConnectionPool`` belongs to the event loop that opened it:
its connections wait on that loop's sockets and its workers (which replace
lost connections and refill the pool) are tasks of that loop. A saver shared
by two loops at once (two threads, each in ``asyncio.run``) left one loop's
operations waiting forever for the other loop's pool, and after ``asyncio.run``
ended a later run found a pool whose workers were gone: once its connections
were lost, every operation waited ``pool_timeout`` and failed. So each loop
gets a pool of its own, opened on first use there; the pools of loops that
have ended are dropped (their sockets closed) when the next loop opens one,
and on close.

Closing from any thread or loop: a pool is closed on its own loop when that
loop runs (awaited there, or scheduled on it); the pool of a loop that has
ended, or is idle while another loop runs in this thread, has its
connections' sockets closed directly: no loop is left to run its ``close()``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from tether.backends.postgres._async import _AsyncPostgresCore

__all__ = ["LoopPools"]

#: How long a close waits for a pool's workers on a loop it does not run on.
_CLOSE_TIMEOUT = 5.0


@dataclass(eq=False)
class _Entry:
    """The async pool of one event loop, and every connection it opened."""

    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock
    pool: AsyncConnectionPool[Any] | None = None
    core: _AsyncPostgresCore | None = None
    conns: weakref.WeakSet[AsyncConnection[Any]] = field(default_factory=weakref.WeakSet)

    async def track(self, conn: AsyncConnection[Any]) -> None:
        """The pool's ``configure`` hook: remember the connection, to close it without a loop."""
        self.conns.add(conn)

    def drop_sockets(self) -> None:
        """Close every connection's socket directly (the loop cannot run ``close()``)."""
        for conn in list(self.conns):
            with contextlib.suppress(Exception):
                conn.pgconn.finish()
        self.conns.clear()


class LoopPools:
    """The async pools of one saver, by event loop (thread-safe)."""

    def __init__(self) -> None:
        self._entries: dict[asyncio.AbstractEventLoop, _Entry] = {}
        self._lock = threading.Lock()
        # Closes scheduled on a running loop: kept referenced until they finish.
        self._closing: set[concurrent.futures.Future[None]] = set()
        self._scheduled_on: weakref.WeakKeyDictionary[
            concurrent.futures.Future[None], asyncio.AbstractEventLoop
        ] = weakref.WeakKeyDictionary()

    def __len__(self) -> int:
        return len(self._entries)

    async def core(
        self,
        open_pool: Callable[[Callable[[AsyncConnection[Any]], Awaitable[None]]], Awaitable[Any]],
        make_core: Callable[[AsyncConnectionPool[Any]], _AsyncPostgresCore],
        check: Callable[[], None],
    ) -> _AsyncPostgresCore:
        """The core of the running loop's pool, opened (``open_pool(configure)``) on first use.

        ``check`` raises when the saver was closed meanwhile.
        """
        loop = asyncio.get_running_loop()
        entry = self._entries.get(loop)
        if entry is not None and entry.core is not None:
            return entry.core
        with self._lock:
            ended = [e for e in self._entries.values() if e.loop.is_closed()]
            for e in ended:
                del self._entries[e.loop]
            entry = self._entries.get(loop)
            if entry is None:
                entry = self._entries[loop] = _Entry(loop, asyncio.Lock())
        for e in ended:
            e.drop_sockets()
        async with entry.lock:
            if entry.core is None:
                check()
                pool = await open_pool(entry.track)
                entry.pool = pool
                entry.core = make_core(pool)
                try:
                    check()  # closed while the pool opened: it must not outlive the saver
                except BaseException:
                    await pool.close()
                    raise
        return entry.core

    def pool(self, loop: asyncio.AbstractEventLoop) -> AsyncConnectionPool[Any] | None:
        """The pool of ``loop``, if it has one (for diagnostics and tests)."""
        entry = self._entries.get(loop)
        return None if entry is None else entry.pool

    async def closed(self) -> None:
        """Wait for the closes scheduled on the running loop (by a sync ``close()`` in it)."""
        loop = asyncio.get_running_loop()
        for future in list(self._closing):
            if self._scheduled_on.get(future) is loop:
                await asyncio.wrap_future(future)

    def cores(self) -> list[_AsyncPostgresCore]:
        with self._lock:
            return [e.core for e in self._entries.values() if e.core is not None]

    def _take(self) -> list[_Entry]:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        return entries

    def close(self) -> None:
        """Close every pool, from sync code (any thread, inside a running loop or not)."""
        for entry in self._take():
            self._release(entry)

    async def aclose(self) -> None:
        """Close every pool; the running loop's is awaited."""
        current = asyncio.get_running_loop()
        for entry in self._take():
            if entry.loop is current and entry.pool is not None:
                await entry.pool.close()
            else:
                self._release(entry)

    def _release(self, entry: _Entry) -> None:
        pool, loop = entry.pool, entry.loop
        if pool is None:
            return
        if loop.is_closed():
            entry.drop_sockets()
            return
        if loop.is_running():
            # On its loop's own schedule (this thread's loop too: it runs at the
            # caller's next await).
            future = asyncio.run_coroutine_threadsafe(pool.close(_CLOSE_TIMEOUT), loop)
            self._closing.add(future)
            self._scheduled_on[future] = loop
            future.add_done_callback(self._closing.discard)
            if _runs_here(loop):
                _stop_workers_now(pool)
            else:
                _wait_or_drop(entry, future)
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # An idle loop and no loop running here: run the close on it.
            with contextlib.suppress(Exception):
                loop.run_until_complete(pool.close(_CLOSE_TIMEOUT))
                return
        entry.drop_sockets()


def _stop_workers_now(pool: AsyncConnectionPool[Any]) -> None:
    """Queue a stop for each of the pool's workers now, from sync code on its loop.

    A sync ``close()`` inside a coroutine can only schedule ``pool.close()``;
    when that coroutine then returns, ``asyncio.run`` cancels every task before
    the close runs. psycopg_pool's workers catch ``CancelledError`` while they
    run a task (a connection attempt: "error connecting in ...") and go back to
    waiting on their queue, so ``asyncio.run`` waited for them forever
    (reproduced: a hang within 60-300 runs under CPU load, in each of four
    tries). A stop already in the queue ends such a worker instead.
    psycopg_pool 3.3's own ``close()`` queues the same item; it is pinned, and
    this does nothing if its internals differ.
    """
    try:
        from psycopg_pool.pool_async import StopWorker

        for _ in getattr(pool, "_workers", ()):
            pool.run_task(StopWorker(pool))
    except Exception:  # noqa: S110 -- a best effort; close() still runs as scheduled
        pass


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _wait_or_drop(entry: _Entry, future: concurrent.futures.Future[None]) -> None:
    """Wait (from another thread) for a close scheduled on ``entry``'s loop.

    Not waiting left it pending when that loop ended right after (its owner's
    ``run_until_complete`` returned, or ``asyncio.run`` cancelled it): the
    pool's connections stayed open until garbage collection, and asyncio
    warned "Task was destroyed but it is pending" (#18.2). When the loop stops
    first, or the close takes longer than it may, the sockets are closed here.
    """
    deadline = _CLOSE_TIMEOUT + 1.0
    waited = 0.0
    while waited < deadline:
        try:
            future.result(timeout=0.05)
            return
        except concurrent.futures.TimeoutError:
            waited += 0.05
            if not entry.loop.is_running():
                break
        except BaseException:  # cancelled with its loop, or the close failed
            break
    future.cancel()
    entry.drop_sockets()

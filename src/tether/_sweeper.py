"""The background sweeper (#15): ``sweep_interval=`` on a saver, off by default.

A daemon thread calls ``saver.sweep()`` every ``interval`` seconds, each
round bounded by ``max_seconds`` (the interval), so a round never runs into
the next. What a round deletes is batched as every sweep is (one
transaction a batch, each thread whole or not at all), so a process killed
mid-round leaves nothing half-deleted and the next round, in this process or
another, goes on. An error in a round (the database away, a policy that no
longer reads) is logged and the next round tries again: the sweeper never
dies of it. On Postgres only one process of all that share a schema sweeps
at a time: a round first takes the saver's ``sweep_lock()`` (a session
advisory lock the server drops with a dead holder) and skips when another
process holds it.

The thread holds the saver weakly and stops with ``close()``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from tether.errors import ConfigError
from tether.lifecycle import SweepReport

if TYPE_CHECKING:
    from tether.base import BaseCheckpointSaver

__all__ = ["Sweeper", "check_interval"]

log = logging.getLogger("tether.sweep")


def check_interval(interval: object) -> float | None:
    """``sweep_interval`` as seconds (``None``: no background sweeper)."""
    if interval is None:
        return None
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
        raise ConfigError(
            f"sweep_interval must be a positive number of seconds (or None: off), "
            f"got {interval!r:.80}"
        )
    return float(interval)


class _Stopped(Exception):
    """The saver closes: the round ends after the batch it committed."""


class Sweeper:
    """Runs ``saver.sweep()`` every ``interval`` seconds in a daemon thread.

    Attributes:
        rounds: rounds that swept.
        busy: rounds skipped because another process was sweeping (Postgres).
        failures: rounds that raised (logged on ``tether.sweep``).
        last: the report of the latest round that swept.
    """

    def __init__(self, saver: BaseCheckpointSaver, interval: float, *, batch: int = 100) -> None:
        self.interval = interval
        self.batch = batch
        self.rounds = 0
        self.busy = 0
        self.failures = 0
        self.last: SweepReport | None = None
        self._saver = weakref.ref(saver)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tether-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the batch in flight (waits up to ``timeout`` seconds for it)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _check_stop(self, report: SweepReport) -> None:
        """Between two batches: end the round when the saver is closing."""
        if self._stop.is_set():
            raise _Stopped

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            saver = self._saver()
            if saver is None:
                return
            try:
                self.run_once(saver)
            except Exception:  # logged; the next round tries again
                self.failures += 1
                log.exception("tether sweep of %r failed; next round in %ss", saver, self.interval)
            del saver

    def run_once(self, saver: BaseCheckpointSaver) -> SweepReport | None:
        """One round: ``None`` when another process holds the sweep lock."""
        lock: Callable[[], AbstractContextManager[bool]] | None = getattr(saver, "sweep_lock", None)
        with lock() if lock is not None else contextlib.nullcontext(True) as mine:
            if not mine:
                self.busy += 1
                return None
            try:
                report = saver.sweep(
                    batch=self.batch, max_seconds=self.interval, progress=self._check_stop
                )
            except _Stopped:
                return None
        self.rounds += 1
        self.last = report
        return report

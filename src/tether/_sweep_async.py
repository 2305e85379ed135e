"""``sweep``: apply retention policies (#15) through a saver's thread index.

The rules are :mod:`tether.lifecycle`'s; this module finds what is due and
hands it to the backend in batches, each one transaction of the backend's
own (``_asweep_expired``, ``_asweep_prune``), which checks again, inside that
transaction, that the thread is still due (not written since it was found,
not leased) before it deletes anything. A sweep killed at any point leaves
every thread either whole or gone, and the next sweep goes on. A dry run makes
the same calls with ``dry_run=True``: the backend runs the same checks (due,
idle, not leased) and counts what it would delete, so its report is the
sweep's as long as nobody writes in between.

1. TTL: the saver's policy pages through ``threads(updated_before=cutoff,
   order="-updated")``, the oldest first, which the index answers from its
   ``(bucket)`` index; threads with a policy of their own are taken from the
   backend's list of them (``_aretention_rows``) and judged by it instead.
   Whole threads go in batches of at most ``batch`` threads and, by the
   index's counts, of the checkpoints :class:`~tether.lifecycle.Pace` allows:
   on a backend with a ``_sweep_target`` (SQLite, whose writers queue behind
   the sweep's transaction) the batch grows or shrinks so that a call takes
   about that long; elsewhere at most 200 checkpoints.

   SQLite also copies the WAL into the file after each of the sweep's
   transactions, once its write lock is released, rather than in its commit
   (``SqliteSaver._write(autocheckpoint=False)``): a writer waits for neither.
2. Checkpoint retention (``keep_last``/``keep_within``): threads whose row says
   they may have checkpoints to drop (:func:`~tether.lifecycle.may_prune`) are
   read once (parent links and DeltaChannel needs, :mod:`tether._delta_chains`)
   and pruned to the count that keeps every kept checkpoint's walk.

``_sweep_async.py`` is written by hand; ``_sweep_sync.py`` is generated from it
by ``tools/gen_sync.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tether._delta_chains import ThreadChains
from tether.backends._threads import from_micros, now_micros, to_micros
from tether.base import BaseCheckpointSaver
from tether.lifecycle import (
    MAX_REPORTED,
    Pace,
    Retention,
    SweepReport,
    check_now,
    check_sweep_args,
    keep_count,
    may_prune,
    micros,
    stored_policy,
    ttl_cutoff,
)

__all__ = ["asweep"]


class _Run:
    """One sweep's clock, budget and report."""

    def __init__(self, dry_run: bool, max_seconds: float | None) -> None:
        self.report = SweepReport(dry_run=dry_run)
        self.started = time.monotonic()
        self.max_seconds = max_seconds
        self.expired: set[str] = set()  # a dry run's TTL threads: not pruned as well

    def out_of_time(self) -> bool:
        if self.max_seconds is None or time.monotonic() - self.started < self.max_seconds:
            return False
        self.report.finished = False
        return True

    def deleted(self, rows: list[tuple[str, int, int]]) -> None:
        r = self.report
        for tid, checkpoints, size in rows:
            r.threads += 1
            r.checkpoints += checkpoints
            r.bytes += size
            if r.dry_run:
                self.expired.add(tid)
            if len(r.thread_ids) < MAX_REPORTED:
                r.thread_ids.append(tid)


async def _thread_chains(saver: BaseCheckpointSaver, thread_id: str) -> ThreadChains:
    chains = ThreadChains()
    async for tup in saver.alist({"configurable": {"thread_id": thread_id}}):
        chains.add(tup)
    return chains


async def asweep(
    saver: BaseCheckpointSaver,
    *,
    dry_run: bool = False,
    batch: int = 100,
    max_seconds: float | None = None,
    now: Any = None,
    vacuum: bool = True,
    progress: Callable[[SweepReport], None] | None = None,
) -> SweepReport:
    """Apply ``saver.retention`` and the threads' own policies (``BaseCheckpointSaver.sweep``)."""
    batch, budget = check_sweep_args(batch, max_seconds)
    at = check_now(now)
    clock = at if at is not None else now_micros()
    run = _Run(bool(dry_run), budget)
    policy: Retention | None = saver.retention
    own = {tid: stored_policy(tid, text) for tid, text in await saver._aretention_rows()}

    pace = Pace(saver._sweep_target, batch)

    async def expire(due: list[tuple[str, int]], checkpoints: int = 0) -> None:
        if due:
            t0 = time.perf_counter()
            rows = await saver._asweep_expired(due, run.report.dry_run)
            pace.done(checkpoints, time.perf_counter() - t0)
            run.deleted(rows)
            run.report.skipped += len(due) - len(rows)
            run.report.batches += 0 if run.report.dry_run else 1
            if progress is not None:
                progress(run.report)

    # 1. TTL: threads with a policy of their own, then the saver's oldest first.
    due: list[tuple[str, int]] = []
    for tid, mine in own.items():
        cutoff = ttl_cutoff(mine, clock)
        if cutoff is not None:
            due.append((tid, cutoff))
    for start in range(0, len(due), batch):
        if run.out_of_time():
            break
        await expire(due[start : start + batch])
    cutoff = ttl_cutoff(policy, clock) if policy is not None else None
    cursor = None
    while cutoff is not None and run.report.finished and not run.out_of_time():
        page = await saver.athreads(
            updated_before=from_micros(cutoff), order="-updated", limit=batch, cursor=cursor
        )
        rows = [(r.thread_id, cutoff, r.checkpoints) for r in page if r.thread_id not in own]
        at_row = 0
        while at_row < len(rows):
            part, size, at_row = pace.take(rows, at_row)
            await expire(part, size)
        cursor = page.next_cursor
        if cursor is None:
            break

    # 2. Checkpoint retention of live threads, idle for at least their grace.
    if run.report.finished and (
        (policy is not None and policy.prunes) or any(p.prunes for p in own.values())
    ):
        await _aprune_all(saver, run, policy, own, clock, batch, progress)
    if not run.report.dry_run and vacuum and (run.report.checkpoints or run.report.threads):
        run.report.freed_bytes = await saver._asweep_vacuum()
    run.report.seconds = time.monotonic() - run.started
    return run.report


async def _aprune_all(
    saver: BaseCheckpointSaver,
    run: _Run,
    policy: Retention | None,
    own: dict[str, Retention],
    clock: int,
    batch: int,
    progress: Callable[[SweepReport], None] | None,
) -> None:
    # Idle for at least the shortest grace any policy has; each thread's own is checked below.
    graces = [p.grace for p in (policy, *own.values()) if p is not None and p.prunes]
    idle_before = clock - micros(min(graces))
    cursor = None
    while not run.out_of_time():
        page = await saver.athreads(
            updated_before=from_micros(idle_before), order="-updated", limit=batch, cursor=cursor
        )
        for row in page:
            mine = own.get(row.thread_id, policy)
            if mine is None or row.thread_id in run.expired:
                continue
            created = to_micros(row.created_at)
            active_before = clock - micros(mine.grace)
            if to_micros(row.updated_at) >= active_before:
                continue
            if not may_prune(mine, row.checkpoints, created, clock):
                continue
            chains = await _thread_chains(saver, row.thread_id)
            spaces = {ns: sorted(nodes, reverse=True) for ns, nodes in chains.spaces.items()}
            n = chains.keep_count(keep_count(mine, spaces, clock))
            doomed = sum(max(0, len(ids) - n) for ids in spaces.values())
            if not doomed:
                continue
            # A dry run asks the backend too: the same checks (still idle, not
            # leased) and the counts of what the prune would leave, nothing deleted.
            done = await saver._asweep_prune(row.thread_id, n, active_before, run.report.dry_run)
            if done is None:
                run.report.skipped += 1
                continue
            run.report.batches += not run.report.dry_run
            run.report.pruned_threads += 1
            run.report.checkpoints += done[0]
            run.report.bytes += done[1]
            if progress is not None:
                progress(run.report)
            if run.out_of_time():
                return
        cursor = page.next_cursor
        if cursor is None:
            return

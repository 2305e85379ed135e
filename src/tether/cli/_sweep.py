"""``tether sweep``: apply retention to a store, from cron (#15)."""

from __future__ import annotations

from typing import Any

import click

from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    boundary,
    json_option,
    out,
    print_json,
    progress_bar,
)
from tether.cli._stores import opened
from tether.cli._threads import parse_duration
from tether.errors import ConfigError
from tether.lifecycle import DEFAULT_GRACE, Retention, SweepReport

__all__ = ["sweep"]


def _duration(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> Any:  # click's callback signature
    return None if value is None else parse_duration(value)


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.option(
    "--ttl",
    callback=_duration,
    metavar="DURATION",
    help="Delete threads idle for longer than this (7d, 12h).",
)
@click.option(
    "--keep-last",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Keep the newest N checkpoints of each namespace of live threads.",
)
@click.option(
    "--keep-within",
    callback=_duration,
    metavar="DURATION",
    help="Keep the checkpoints younger than this (with --keep-last: either keeps).",
)
@click.option(
    "--grace",
    callback=_duration,
    metavar="DURATION",
    help="Never touch a thread written within this (default 5m).",
)
@click.option("--dry-run", is_flag=True, help="Delete nothing; report what would go.")
@click.option(
    "--batch",
    type=click.IntRange(min=1, max=10_000),
    default=100,
    show_default=True,
    metavar="N",
    help="The most threads deleted per transaction (fewer when they hold many checkpoints).",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="S",
    help="Stop after the batch that ends past S seconds (run again to go on).",
)
@click.option(
    "--vacuum",
    is_flag=True,
    help="SQLite: also give every free page back (converts an older file to incremental "
    "auto-vacuum once: rewrites the file).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr. Default: when stderr is a terminal.",
)
@json_option
@boundary
def sweep(
    store: str,
    ttl: Any,
    keep_last: int | None,
    keep_within: Any,
    grace: Any,
    dry_run: bool,
    batch: int,
    max_seconds: float | None,
    vacuum: bool,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Apply retention to STORE: delete idle threads and old checkpoints.

    The policy is --ttl, --keep-last and --keep-within; a thread's own policy
    (set with saver.set_retention) replaces it for that thread. Without any
    of them only the threads' own policies apply. Threads written within the
    grace period, and leased ones (Postgres), are left alone. Each batch is
    one transaction: an interrupted sweep leaves no thread half-deleted, and
    running it again goes on.
    """
    policy = None
    if ttl is not None or keep_last is not None or keep_within is not None:
        policy = Retention(
            ttl=ttl,
            keep_last=keep_last,
            keep_within=keep_within,
            grace=DEFAULT_GRACE if grace is None else grace,
        )
    elif grace is not None:
        raise click.UsageError("--grace goes with --ttl, --keep-last or --keep-within")
    with opened(store) as st:
        saver = st.saver
        saver.retention = policy
        total = 0
        if not dry_run and progress is not False:
            # What is due, for the bar's total (an index scan, nothing decoded but
            # the threads checkpoint retention prunes).
            ahead = saver.sweep(dry_run=True, batch=batch)
            total = ahead.threads + ahead.pruned_threads
        bar, report = progress_bar("sweeping", progress if total else False, unit="threads")

        def moved(so_far: SweepReport) -> None:
            if report is not None:
                report(min(total, so_far.threads + so_far.pruned_threads), total)

        with bar:
            done = saver.sweep(
                dry_run=dry_run, batch=batch, max_seconds=max_seconds, progress=moved
            )
        if vacuum and not dry_run:
            full = getattr(saver, "vacuum", None)
            if full is None:
                raise ConfigError(
                    f"--vacuum is for SQLite stores; {store} gives space back through "
                    "Postgres autovacuum"
                )
            done.freed_bytes += int(full())
    if as_json:
        print_json(done.as_dict())
        return
    verb = "would delete" if done.dry_run else "deleted"
    line = (
        f"{verb} {done.threads} thread(s) and {done.checkpoints} checkpoint(s) in all "
        f"({done.bytes} bytes); {done.pruned_threads} live thread(s) pruned"
    )
    if done.skipped:
        line += f"; {done.skipped} left for the next sweep (leased or written meanwhile)"
    if done.freed_bytes:
        line += f"; the file gave back {done.freed_bytes} bytes"
    if not done.finished:
        line += "; stopped at --max-seconds: run it again to go on"
    out().print(line, soft_wrap=True)

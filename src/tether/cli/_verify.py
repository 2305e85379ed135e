"""``tether verify``: read a whole store and say whether it is damaged."""

from __future__ import annotations

import click
from rich.markup import escape

from tether.cli._checks import verify_store
from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    allow_option,
    boundary,
    json_option,
    out,
    print_json,
    progress_bar,
)
from tether.cli._stores import opened
from tether.errors import shown

__all__ = ["verify"]


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr. Default: when stderr is a terminal.",
)
@allow_option
@json_option
@boundary
def verify(
    store: str, progress: bool | None, allow: tuple[tuple[str, str], ...], as_json: bool
) -> None:
    """Check that STORE is whole: read-only, exit code 1 when something is damaged.

    Every checkpoint is read back and decoded (checksums, values, the snapshots
    append tails extend, pending writes), every parent a checkpoint names must be
    in the store (a parent older than any kept checkpoint is what prune leaves,
    and is only noted), and every pending write must belong to a checkpoint.
    """
    with opened(store, allowlist=allow, read_only=True) as st:
        bar, report_progress = progress_bar("verifying", progress)
        with bar:
            report = verify_store(st, report_progress)
    if as_json:
        print_json({"store": store, **report.to_json()})
    else:
        console = out()
        for f in report.findings:
            where = ""
            if f.thread_id is not None:
                where = f"thread {shown(f.thread_id)}"
                if f.checkpoint_ns:
                    where += f", namespace {f.checkpoint_ns!r}"
                where += ": "
            label = {"refused-type": "not verified", "pruned-parent": "note"}.get(f.kind, "damaged")
            console.print(escape(f"{label}: {where}{f.message}"), soft_wrap=True)
        problems = sum(f.damage for f in report.findings)
        verdict = f"{problems} problem(s) found" if problems else "no damage found"
        console.print(
            escape(
                f"{store}: {report.threads} thread(s), {report.checkpoints} checkpoint(s) read, "
                f"{report.writes} pending write(s); {verdict}"
            ),
            soft_wrap=True,
        )
    if report.damaged:
        raise click.exceptions.Exit(1)

"""``tether threads`` and ``tether stats``: what a store holds."""

from __future__ import annotations

import datetime
import re
from typing import Any

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    allow_option,
    boundary,
    err,
    json_option,
    out,
    print_json,
    progress_bar,
    thread_config,
    when,
)
from tether.cli._stores import Store, ThreadInfo, opened
from tether.errors import DecodeError
from tether.history import Status, jsonable, status
from tether.threads import ThreadSummary

__all__ = ["stats", "threads"]


#: ``--older-than`` units: seconds, minutes, hours, days, weeks.
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str) -> datetime.timedelta:
    """``90s``, ``15m``, ``12h``, ``7d``, ``2w`` as a timedelta."""
    found = _DURATION.match(text)
    if found is None:
        raise click.BadParameter(
            f"{text!r} is not a duration: a number and a unit, s, m, h, d or w (7d, 12h)"
        )
    return datetime.timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2)])


def thread_status(st: Store, info: ThreadInfo) -> Status | None:
    """The status of a thread, from its latest checkpoint (``None``: a type it holds is
    not allowed, so its values cannot be read); ``tether ui``'s thread list."""
    tup = st.saver.get_tuple(thread_config(info.thread_id, "", info.latest_id))
    if tup is None:  # the latest is in a subgraph's namespace only
        tup = next(iter(st.saver.list(thread_config(info.thread_id, None, info.latest_id))), None)
    return status(tup) if tup is not None else None


def latest_status(st: Store, row: ThreadSummary) -> Status | None:
    """The status of a thread read from its decoded latest root checkpoint, with its next
    nodes and interrupt values (``None``: a type it holds is not allowed)."""
    if row.latest_checkpoint_id is None:
        return None
    try:
        tup = st.saver.get_tuple(thread_config(row.thread_id, "", row.latest_checkpoint_id))
    except DecodeError as exc:
        if not exc.type_name:
            raise
        return None  # a type that is not allowed: next and interrupts are unknown
    return status(tup) if tup is not None else None


def _pages(
    st: Store, limit: int | None, cursor: str | None, **query: Any
) -> tuple[list[ThreadSummary], str | None]:
    """One page (``limit``), or every page (no ``limit``), of ``saver.threads()``."""
    rows: list[ThreadSummary] = []
    while True:
        page = st.saver.threads(limit=limit if limit is not None else 500, cursor=cursor, **query)
        rows.extend(page.items)
        cursor = page.next_cursor
        if limit is not None or cursor is None:
            return rows, cursor


def _statuses(st: Store, rows: list[ThreadSummary]) -> list[Status | None]:
    found: list[Status | None] = []
    bar, report = progress_bar("reading", None, unit="threads")
    with bar:
        for i, row in enumerate(rows, 1):
            found.append(latest_status(st, row))
            if report is not None:
                report(i, len(rows))
    return found


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["idle", "interrupted", "pending", "error"]),
    help="Only threads with this status (repeat for several).",
)
@click.option(
    "--older-than",
    "older_than",
    metavar="DURATION",
    help="Only threads not written for this long: 90s, 15m, 12h, 7d, 2w.",
)
@click.option(
    "--order",
    type=click.Choice(["thread_id", "updated", "-updated"]),
    default="thread_id",
    show_default=True,
    help="By id, most recently updated first, or least recently updated first.",
)
@click.option("--limit", type=click.IntRange(min=1), help="At most this many threads (a page).")
@click.option("--cursor", help="The page after the one that printed this cursor.")
@allow_option
@json_option
@boundary
def threads(
    store: str,
    statuses: tuple[str, ...],
    older_than: str | None,
    order: str,
    limit: int | None,
    cursor: str | None,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """List the threads of STORE: status, checkpoint counts, latest step and time.

    Read from the store's thread index, so filtering and paging cost the
    page, not the store. The status (idle, interrupted, pending, error) is
    that of each thread's latest root checkpoint: "pending" means nodes are
    left to run (a run in progress, stopped before a node, or one that
    crashed). With --limit, a cursor for the next page is printed after the
    page (on stderr with --json).
    """
    before = None
    if older_than is not None:
        before = datetime.datetime.now(datetime.UTC) - parse_duration(older_than)
    with opened(store, allowlist=allow, read_only=True) as st:
        rows, after = _pages(
            st,
            limit,
            cursor,
            status=list(statuses) or None,
            updated_before=before,
            order=order,
        )
        read = _statuses(st, rows)
    if as_json:
        print_json([_thread_json(r, s) for r, s in zip(rows, read, strict=True)])
        if after is not None:
            err().print(f"next page: --cursor {after}", soft_wrap=True, highlight=False)
        return
    console = out()
    if not rows:
        console.print(f"no threads in {escape(str(store))}", soft_wrap=True)
        return
    console.print(f"{len(rows)} thread(s) in {escape(str(store))}", soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("thread", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("next", overflow="fold")
    table.add_column("checkpoints", justify="right", no_wrap=True)
    table.add_column("ns", justify="right", no_wrap=True)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    for r, s in zip(rows, read, strict=True):
        table.add_row(
            escape(r.thread_id),
            r.status or "?",
            "" if s is None else escape(", ".join(dict.fromkeys(s.next))),
            str(r.checkpoints),
            str(r.namespaces),
            "" if r.latest_step is None else str(r.latest_step),
            when(r.latest_ts),
        )
    console.print(table)
    if after is not None:
        console.print(f"next page: --cursor {after}", soft_wrap=True, highlight=False)


def _thread_json(row: ThreadSummary, st: Status | None) -> dict[str, Any]:
    return {
        "thread_id": row.thread_id,
        "checkpoints": row.checkpoints,
        "namespaces": row.namespaces,
        "latest_checkpoint_id": row.latest_checkpoint_id,
        "latest_step": row.latest_step,
        "latest_ts": row.latest_ts,
        "status": row.status,
        "next": None if st is None else list(st.next),
        "interrupts": None if st is None else st.to_json()["interrupts"],
        "updated_at": row.updated_at.isoformat(),
        "created_at": row.created_at.isoformat(),
        "bytes": row.bytes,
        "metadata": jsonable(row.metadata),
    }


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@json_option
@boundary
def stats(store: str, as_json: bool) -> None:
    """Show the row counts and sizes of STORE's tables."""
    with opened(store, read_only=True) as st:
        tables, total = st.stats()
        n_threads = len(st.threads())
    if as_json:
        print_json(
            {
                "threads": n_threads,
                "tables": {t.table: {"rows": t.rows, "bytes": t.bytes} for t in tables},
                "bytes": total,
            }
        )
        return
    table = Table(title=f"{escape(str(store))}: {n_threads} thread(s)", title_justify="left")
    table.add_column("table")
    table.add_column("rows", justify="right")
    table.add_column("bytes", justify="right")
    for t in tables:
        table.add_row(t.table, f"{t.rows:,}", "" if t.bytes is None else f"{t.bytes:,}")
    table.add_row("[bold]total[/bold]", "", "" if total is None else f"[bold]{total:,}[/bold]")
    out().print(table)

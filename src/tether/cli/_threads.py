"""``tether threads`` and ``tether stats``: what a store holds."""

from __future__ import annotations

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
    json_option,
    out,
    print_json,
    progress_bar,
    thread_config,
    when,
)
from tether.cli._stores import Store, ThreadInfo, opened
from tether.errors import DecodeError
from tether.history import Status, status

__all__ = ["stats", "threads"]


def thread_status(st: Store, info: ThreadInfo) -> Status | None:
    """The status of a thread, from its latest checkpoint (``None``: a type it holds is
    not allowed, so its values cannot be read)."""
    tup = st.saver.get_tuple(thread_config(info.thread_id, "", info.latest_id))
    if tup is None:  # the latest is in a subgraph's namespace only
        tup = next(iter(st.saver.list(thread_config(info.thread_id, None, info.latest_id))), None)
    return status(tup) if tup is not None else None


def _statuses(st: Store, infos: list[ThreadInfo]) -> list[Status | None]:
    found: list[Status | None] = []
    bar, report = progress_bar("reading", None, unit="threads")
    with bar:
        for i, info in enumerate(infos, 1):
            try:
                found.append(thread_status(st, info))
            except DecodeError as exc:
                if not exc.type_name:
                    raise
                found.append(None)  # a type that is not allowed: the status is unknown
            if report is not None:
                report(i, len(infos))
    return found


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@allow_option
@json_option
@boundary
def threads(store: str, allow: tuple[tuple[str, str], ...], as_json: bool) -> None:
    """List the threads of STORE: status, checkpoint counts, latest step and time.

    The status (idle, interrupted, pending, error) is read from each thread's
    latest checkpoint: "pending" means nodes are left to run (a run in
    progress, stopped before a node, or one that crashed).
    """
    with opened(store, allowlist=allow, read_only=True) as st:
        infos = st.threads()
        statuses = _statuses(st, infos)
    if as_json:
        print_json([_thread_json(i, s) for i, s in zip(infos, statuses, strict=True)])
        return
    console = out()
    if not infos:
        console.print(f"no threads in {escape(str(store))}", soft_wrap=True)
        return
    console.print(f"{len(infos)} thread(s) in {escape(str(store))}", soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("thread", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("next", overflow="fold")
    table.add_column("checkpoints", justify="right", no_wrap=True)
    table.add_column("ns", justify="right", no_wrap=True)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("updated", no_wrap=True)
    for i, s in zip(infos, statuses, strict=True):
        table.add_row(
            escape(i.thread_id),
            "?" if s is None else s.state,
            "" if s is None else escape(", ".join(dict.fromkeys(s.next))),
            str(i.checkpoints),
            str(i.namespaces),
            "" if i.latest_step is None else str(i.latest_step),
            when(i.latest_ts),
        )
    console.print(table)


def _thread_json(info: ThreadInfo, st: Status | None) -> dict[str, Any]:
    shape = info.as_dict()
    shape["status"] = None if st is None else st.state
    shape["next"] = None if st is None else list(st.next)
    shape["interrupts"] = None if st is None else st.to_json()["interrupts"]
    return shape


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

"""``tether history``: a thread's checkpoints, one line each, newest first or as a tree."""

from __future__ import annotations

from collections import Counter

import click
from rich.markup import escape
from rich.text import Text

from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    allow_hint,
    allow_option,
    boundary,
    err,
    json_option,
    ns_label,
    out,
    print_json,
)
from tether.cli._stores import opened
from tether.cli._views import (
    Row,
    ThreadView,
    check_limits,
    is_refused_type,
    row_changes,
    row_json,
    row_summary,
)
from tether.errors import DecodeError, describe
from tether.history import TreeRow, tree

__all__ = ["history"]

#: The longest "changes" cell, however wide the terminal: a row stays a line
#: one reads at a glance (``diff`` and ``show`` print whole values).
SUMMARY_WIDTH = 160


def next_text(nodes: tuple[str, ...] | list[str]) -> str:
    """``review``, ``part x3, reply``: each node once, with how many times it runs."""
    counts = Counter(nodes)
    return ", ".join(n if k == 1 else f"{n} x{k}" for n, k in counts.items())


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.argument("thread")
@click.option(
    "--ns",
    default=None,
    metavar="NS",
    help="Only this checkpoint namespace ('' = the root graph). Default: every namespace.",
)
@click.option(
    "--limit", "-n", type=click.IntRange(min=0), default=None, help="At most N checkpoints."
)
@click.option(
    "--page",
    "-p",
    type=click.IntRange(min=1),
    default=None,
    help="With --limit N: the P-th page of N rows (1: the newest).",
)
@click.option("--tree", "as_tree", is_flag=True, help="Draw the fork tree, oldest first.")
@click.option(
    "--internal",
    is_flag=True,
    help="Also show changes of the runtime's channels (branch:to:*, __start__, ...).",
)
@allow_option
@json_option
@boundary
def history(
    store: str,
    thread: str,
    ns: str | None,
    limit: int | None,
    page: int | None,
    as_tree: bool,
    internal: bool,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Show the checkpoints of THREAD, one line each, newest first.

    Each line: #N (what show and diff take), the id's unique prefix, step,
    source (input, loop, update, fork), the nodes the next step runs, a
    marker when a task waits on an interrupt or failed, and what the
    checkpoint changed in the state. --tree draws forks.
    """
    if page is not None and limit is None:
        raise click.UsageError("--page P needs --limit N (the page size)")
    offset, size = check_limits(limit, page)
    refused: DecodeError | None = None
    with opened(store, allowlist=allow, read_only=True) as st:
        view = ThreadView(st, thread, ns)
        rows = view.rows(offset, size)
        try:
            view.decode(rows)
        except DecodeError as exc:
            if not is_refused_type(exc):
                raise
            # A type the allowlist refuses: the rows are listed without values.
            refused = exc
            for r in rows:
                r.tup = r.parent = None
    laid = tree([(r.checkpoint_id, r.head.parent_id) for r in rows]) if as_tree else None
    if as_json:
        _print_rows(view, rows, laid, internal)
    else:
        _table(view, rows, laid, internal, offset)
    if refused is not None:
        err().print(
            escape(f"values not shown: {describe(refused)}{allow_hint(refused)}"),
            soft_wrap=True,
        )


def _print_rows(
    view: ThreadView, rows: list[Row], laid: list[TreeRow] | None, internal: bool
) -> None:
    if laid is None:
        print_json([row_json(view, r, internal=internal) for r in rows])
        return
    out_rows = []
    for t in laid:
        item = row_json(view, rows[t.index], internal=internal)
        item["tree"] = {
            "depth": t.depth,
            "branch": t.branch,
            "last": t.last,
            "guides": list(t.guides),
            "children": t.children,
        }
        out_rows.append(item)
    print_json(out_rows)


def _table(
    view: ThreadView, rows: list[Row], laid: list[TreeRow] | None, internal: bool, offset: int
) -> None:
    console = out()
    total = len(view.heads)
    numbers = f", #N over all {len(view.all_heads)} of the thread" if view.ns is not None else ""
    if not rows:
        where = "" if view.ns is None else f" in namespace {view.ns!r}"
        shown = f" (page past the last of {total})" if total else ""
        console.print(
            f"no checkpoints of {escape(view.where())}{escape(where)}{shown}", soft_wrap=True
        )
        return
    order = "as a tree, oldest first" if laid is not None else "newest first"
    part = f", rows {offset + 1}-{offset + len(rows)}" if len(rows) < total else ""
    console.print(
        f"{escape(view.where())}: {total} checkpoint(s){part}, {order}{numbers}", soft_wrap=True
    )
    short = view.short_ids()
    show_ns = any(r.head.checkpoint_ns for r in rows)
    header = ["#", "id", *(["ns"] if show_ns else []), "step", "source", "next", "", "changes"]
    right = {0, 3 if show_ns else 2}
    ordered = (
        [(t.prefix, rows[t.index]) for t in laid] if laid is not None else [("", r) for r in rows]
    )
    lines = []
    for prefix, r in ordered:
        cells = [f"#{r.n}", prefix + short[r.checkpoint_id]]
        if show_ns:
            cells.append(_cut(ns_label(r.head.checkpoint_ns), 16))
        st = r.status()
        marker = ""
        if st is not None and st.state == "interrupted":
            marker = "interrupt"
        elif st is not None and st.state == "error":
            marker = "error"
        changes = None if st is None else row_changes(r, internal=internal)
        summary = "?" if st is None else row_summary(changes, SUMMARY_WIDTH)
        cells += [
            "" if r.step is None else str(r.step),
            str(r.source or ""),
            "?" if st is None else _cut(next_text(st.next) or "-", 24),
            marker,
            summary,
        ]
        lines.append(cells)
    for line in _columns([header, *lines], right, console.width):
        console.print(Text(line), no_wrap=True, overflow="ignore", crop=False)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _columns(rows: list[list[str]], right: set[int], width: int) -> list[str]:
    """Rows of cells as aligned lines; the last column cut to what is left of ``width``."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    used = sum(widths) + 2 * len(widths)
    room = max(width - used, 20)
    out = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row[:-1])
        ]
        out.append(("  ".join(cells) + "  " + _cut(row[-1], room)).rstrip())
    return out

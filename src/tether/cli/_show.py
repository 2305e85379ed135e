"""``tether show`` and ``tether diff``: one checkpoint's values, and what changed between two.

A checkpoint is named as ``history`` prints it: a unique id prefix, ``#N``,
or ``--step S``. Long values are folded (a message list shows its first and
last messages, one line each; other values are cut by rich's ``Pretty``
limits); ``--full`` shows everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.pretty import Pretty
from rich.table import Table
from rich.text import Text

from tether.checkpoint import CheckpointTuple
from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    allow_option,
    boundary,
    json_option,
    out,
    print_json,
)
from tether.cli._history import next_text
from tether.cli._stores import HeadInfo, opened
from tether.cli._views import ThreadView
from tether.errors import ConfigError
from tether.history import diff as diff_values
from tether.history import error_text, is_internal, is_message, preview, status

__all__ = ["diff", "show"]

#: A folded list shows its first HEAD and last TAIL items.
HEAD, TAIL = 2, 3
#: rich Pretty limits of a folded value.
MAX_LENGTH, MAX_STRING, MAX_DEPTH = 10, 300, 4


def _pick(view: ThreadView, ref: str | None, step: int | None) -> HeadInfo:
    """The checkpoint a command names: REF, --step S, or the latest (root namespace first)."""
    if ref is not None and step is not None:
        raise ConfigError("give a checkpoint or --step S, not both")
    if step is not None:
        return view.resolve(f"step:{step}")
    if ref is not None:
        return view.resolve(ref)
    for h in view.heads:
        if not h.checkpoint_ns or view.ns is not None:
            return h
    raise ConfigError(f"no checkpoint of {view.where()} in the root namespace")


ref_argument = click.argument("checkpoint", required=False, metavar="[CHECKPOINT]")
ns_option = click.option(
    "--ns",
    default=None,
    metavar="NS",
    help="The namespace the checkpoint is in (default: any for an id or #N, the root "
    "graph for --step and for the latest).",
)
step_option = click.option(
    "--step", "-s", type=int, default=None, help="The checkpoint of step S (instead of an id)."
)


# --- show --------------------------------------------------------------------------------------


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.argument("thread")
@ref_argument
@ns_option
@step_option
@click.option("--full", is_flag=True, help="Show long values whole instead of folded.")
@click.option(
    "--internal", is_flag=True, help="Also show the runtime's channels (branch:to:*, ...)."
)
@allow_option
@json_option
@boundary
def show(
    store: str,
    thread: str,
    checkpoint: str | None,
    ns: str | None,
    step: int | None,
    full: bool,
    internal: bool,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Show one checkpoint of THREAD: status, metadata, channel values, pending writes.

    CHECKPOINT is an id or a unique prefix of one, or #N as history numbers
    rows; without it (and without --step), the latest checkpoint.
    """
    with opened(store, allowlist=allow, read_only=True) as st:
        view = ThreadView(st, thread, ns)
        head = _pick(view, checkpoint, step)
        tup = view.tuple(head)
    if as_json:
        print_json(show_json(tup))
        return
    _print_checkpoint(view, head, tup, full=full, internal=internal)


def show_json(tup: CheckpointTuple) -> dict[str, Any]:
    """The shape of ``tether show --json`` (docs/cli.md)."""
    cp = tup.checkpoint
    conf = tup.config["configurable"]
    parent = tup.parent_config["configurable"].get("checkpoint_id") if tup.parent_config else None
    return {
        "thread_id": conf["thread_id"],
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": cp["id"],
        "parent_checkpoint_id": parent,
        "ts": cp.get("ts"),
        "metadata": tup.metadata,
        "status": status(tup).to_json(),
        "channel_versions": cp.get("channel_versions", {}),
        "channel_values": cp.get("channel_values", {}),
        "pending_writes": [
            {"task_id": task, "channel": channel, "value": value}
            for task, channel, value in tup.pending_writes or ()
        ],
    }


def _print_checkpoint(
    view: ThreadView, head: HeadInfo, tup: CheckpointTuple, *, full: bool, internal: bool
) -> None:
    console = out()
    cp = tup.checkpoint
    meta = dict(tup.metadata)
    st = status(tup)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("thread", escape(view.thread_id))
    if head.checkpoint_ns:
        grid.add_row("namespace", escape(head.checkpoint_ns))
    grid.add_row("checkpoint", _numbered(view, cp["id"]))
    grid.add_row("parent", _numbered(view, head.parent_id) if head.parent_id else "-")
    grid.add_row("step", escape(f"{meta.get('step')} ({meta.get('source')})"))
    grid.add_row("time", escape(str(cp.get("ts", ""))))
    state = st.state + (f", next: {next_text(st.next)}" if st.next else "")
    grid.add_row("status", escape(state))
    for value in st.interrupts:
        grid.add_row("interrupt", _value(value, full))
    for value in st.errors:
        grid.add_row("error", escape(error_text(value)))
    rest = {k: v for k, v in meta.items() if k not in ("step", "source")}
    if rest:
        grid.add_row("metadata", _value(rest, full))
    console.print(grid)
    values = cp.get("channel_values", {})
    versions = cp.get("channel_versions", {})
    channels = sorted(set(values) | set(versions))
    hidden = [c for c in channels if is_internal(c) and not internal]
    console.rule("channel values", align="left")
    for channel in channels:
        if channel in hidden:
            continue
        title = Text.assemble(
            (channel, "bold"), "  ", (f"version {versions.get(channel, '')}", "dim")
        )
        console.print(title)
        body = _value(values[channel], full) if channel in values else Text("(empty)", "dim")
        console.print(Padding(body, (0, 0, 0, 4)))
    if hidden:
        console.print(Text(f"hidden: {', '.join(hidden)} (--internal shows them)", "dim"))
    writes = tup.pending_writes or ()
    console.rule(f"pending writes ({len(writes)})", align="left")
    for task, channel, value in writes:
        console.print(Text.assemble((channel, "bold"), "  ", (f"task {task}", "dim")))
        console.print(Padding(_value(value, full), (0, 0, 0, 4)))


def _numbered(view: ThreadView, checkpoint_id: str | None) -> str:
    n = view.row_number(checkpoint_id)
    return escape(f"{checkpoint_id}" + (f"  (#{n})" if n else ""))


def _value(value: Any, full: bool) -> RenderableType:
    """A stored value: messages one per line, long lists folded unless ``full``."""
    if isinstance(value, list | tuple) and value and all(is_message(v) for v in value):
        return _messages(value, full)
    if is_message(value):
        return _messages([value], full, numbered=False)
    if full:
        return Pretty(value)
    if isinstance(value, list | tuple) and len(value) > HEAD + TAIL + 1:
        return _folded(value)
    return Pretty(value, max_length=MAX_LENGTH, max_string=MAX_STRING, max_depth=MAX_DEPTH)


def _folded(items: Sequence[Any]) -> RenderableType:
    """A long list as its first and last items, one line each."""
    lines = [Text(f"{len(items)} items")]
    for i in range(HEAD):
        lines.append(Text(f"[{i}] {preview(items[i], 200)}"))
    lines.append(Text(f"… {len(items) - HEAD - TAIL} more (--full shows every item)", "dim"))
    for i in range(len(items) - TAIL, len(items)):
        lines.append(Text(f"[{i}] {preview(items[i], 200)}"))
    return Group(*lines)


def _messages(messages: Sequence[Any], full: bool, numbered: bool = True) -> RenderableType:
    """A conversation: one line per message (whole and wrapped with ``full``)."""
    n = len(messages)
    idx = list(range(n))
    if not full and n > HEAD + TAIL + 1:
        idx = [*range(HEAD), -1, *range(n - TAIL, n)]
    lines: list[RenderableType] = []
    if numbered and n > 1:
        lines.append(Text(f"{n} messages"))
    for i in idx:
        if i < 0:
            lines.append(Text(f"… {n - HEAD - TAIL} more (--full shows every message)", "dim"))
            continue
        label = f"[{i}] " if numbered else ""
        width = 10_000_000 if full else 200
        text = preview(messages[i], width)
        lines.append(Text(label + text, overflow="fold" if full else "ellipsis", no_wrap=not full))
    return Group(*lines)


# --- diff --------------------------------------------------------------------------------------

_SIGN = {"added": "+", "appended": "+", "removed": "-", "truncated": "-", "changed": "~"}


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.argument("thread")
@click.argument("a", metavar="A")
@click.argument("b", metavar="[B]", required=False)
@ns_option
@click.option(
    "--internal", is_flag=True, help="Also compare the runtime's channels (branch:to:*, ...)."
)
@allow_option
@json_option
@boundary
def diff(
    store: str,
    thread: str,
    a: str,
    b: str | None,
    ns: str | None,
    internal: bool,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Show what changed between two checkpoints of THREAD.

    With A alone: what A changed from its parent. With A and B: from A to B.
    Each is an id or unique prefix, #N as history numbers rows, or step:S.
    Lists are compared item by item (appended messages are one change),
    mappings and messages key by key (messages[3].content).
    """
    with opened(store, allowlist=allow, read_only=True) as st:
        view = ThreadView(st, thread, ns)
        head_a = view.resolve(a)
        if b is None:
            new = head_a
            old = view.head(head_a.parent_id) if head_a.parent_id else None
            if head_a.parent_id and old is None:
                raise ConfigError(
                    f"the parent of checkpoint {head_a.checkpoint_id} is not in the store "
                    "(pruned); name the checkpoint to compare with as B"
                )
        else:
            old, new = head_a, view.resolve(b)
        old_tup = view.tuple(old) if old is not None else None
        new_tup = view.tuple(new)
    old_values = old_tup.checkpoint.get("channel_values", {}) if old_tup else {}
    changes = diff_values(
        old_values, new_tup.checkpoint.get("channel_values", {}), internal=internal
    )
    if as_json:
        print_json(
            {
                "thread_id": thread,
                "from": _end(view, old),
                "to": _end(view, new),
                "changes": [c.to_json() for c in changes],
            }
        )
        return
    console = out()
    console.print(
        escape(f"{view.where()}: {_label(view, old)} -> {_label(view, new)}"), soft_wrap=True
    )
    if not changes:
        console.print(
            "no changes"
            + ("" if internal else " (--internal also compares the runtime's channels)")
        )
    for change in changes:
        line = f"{_SIGN[change.kind]} {change.describe(console.width - 2)}"
        console.print(Text(line), overflow="ellipsis", no_wrap=True)


def _end(view: ThreadView, head: HeadInfo | None) -> dict[str, Any] | None:
    if head is None:
        return None
    return {
        "checkpoint_id": head.checkpoint_id,
        "checkpoint_ns": head.checkpoint_ns,
        "n": view.row_number(head.checkpoint_id),
        "step": head.metadata.get("step"),
        "source": head.metadata.get("source"),
    }


def _label(view: ThreadView, head: HeadInfo | None) -> str:
    if head is None:
        return "(nothing: the first checkpoint)"
    short = view.short_ids()[head.checkpoint_id]
    return f"#{view.row_number(head.checkpoint_id)} {short} (step {head.metadata.get('step')})"

"""``tether prune``, ``delete`` and ``copy``: the commands that change a store's threads."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from tether._delta_chains_sync import prune_keeping_chains
from tether.cli._common import (
    STORE_HELP,
    StoreCommand,
    boundary,
    confirm,
    json_option,
    out,
    print_json,
    progress_bar,
    require_thread,
)
from tether.cli._stores import opened
from tether.errors import ConfigError, shown

__all__ = ["copy", "delete", "prune"]


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.argument("thread_ids", metavar="THREAD...", nargs=-1, required=True)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Keep the newest N checkpoints of each namespace.",
)
@click.option(
    "--delete", "delete_all", is_flag=True, help="Delete every checkpoint of the threads."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask before --delete.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr. Default: when stderr is a terminal.",
)
@json_option
@boundary
def prune(
    store: str,
    thread_ids: tuple[str, ...],
    keep: int | None,
    delete_all: bool,
    yes: bool,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Drop old checkpoints of THREAD... (with their writes and unused values).

    Give exactly one of --keep N (the newest N of each namespace stay) or --delete.
    A thread of a graph with LangGraph DeltaChannel state keeps, beyond N, the
    older checkpoints whose writes its kept checkpoints are rebuilt from.
    """
    if (keep is None) == (not delete_all):
        raise click.UsageError("give exactly one of --keep N or --delete")
    kept: dict[str, int] = {}
    with opened(store) as st:
        before = {t: require_thread(st, t).checkpoints for t in dict.fromkeys(thread_ids)}
        if delete_all:
            confirm(f"Delete every checkpoint of {len(before)} thread(s) in {store}?", yes)
        bar, report = progress_bar("pruning", progress, unit="threads")
        with bar:
            for i, tid in enumerate(before, 1):
                if delete_all:
                    st.saver.prune([tid], strategy="delete")
                else:
                    assert keep is not None
                    # A LangGraph DeltaChannel value is rebuilt from the writes of
                    # the checkpoint's ancestors: keep the newest N and those.
                    counts = prune_keeping_chains(st.saver, [tid], strategy="keep_last", keep=keep)
                    kept[tid] = counts.get(tid, keep)
                if report is not None:
                    report(i, len(before))
        after = {i.thread_id: i.checkpoints for i in st.threads_named(list(before))}
    if as_json:
        print_json(
            {
                "strategy": "delete" if delete_all else "keep_last",
                "keep": keep,
                "threads": [
                    {
                        "thread_id": tid,
                        "before": n,
                        "after": after.get(tid, 0),
                        "kept_per_namespace": kept.get(tid),
                    }
                    for tid, n in before.items()
                ],
            }
        )
        return
    console = out()
    for tid, n in before.items():
        line = f"{escape(tid)}: {n} -> {after.get(tid, 0)} checkpoint(s)"
        if keep is not None and kept.get(tid, keep) > keep:
            line += (
                f" (kept the newest {kept[tid]} per namespace, not {keep}: the kept "
                "checkpoints rebuild LangGraph DeltaChannel values from the older ones' writes)"
            )
        console.print(line, soft_wrap=True)


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.argument("thread")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@boundary
def delete(store: str, thread: str, yes: bool, as_json: bool) -> None:
    """Delete THREAD from STORE: every namespace, checkpoint, value and write."""
    with opened(store) as st:
        info = require_thread(st, thread)
        confirm(
            f"Delete thread {shown(thread)} ({info.checkpoints} checkpoint(s)) from {store}?", yes
        )
        st.saver.delete_thread(thread)
    if as_json:
        print_json({"thread_id": thread, "deleted_checkpoints": info.checkpoints})
        return
    out().print(
        f"deleted thread {escape(thread)} ({info.checkpoints} checkpoint(s))", soft_wrap=True
    )


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.argument("src")
@click.argument("dst")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Copy even when DST already has checkpoints (same ids are replaced).",
)
@json_option
@boundary
def copy(store: str, src: str, dst: str, overwrite: bool, as_json: bool) -> None:
    """Copy thread SRC to a new thread DST in STORE (same checkpoint ids, every namespace)."""
    if src == dst:
        raise ConfigError(f"source and target are the same thread {src!r}")
    with opened(store) as st:
        info = require_thread(st, src)
        existing = st.thread(dst)
        if existing is not None and not overwrite:
            raise ConfigError(
                f"thread {dst!r} already has {existing.checkpoints} checkpoint(s) in {store}; "
                "delete it first or pass --overwrite"
            )
        st.saver.copy_thread(src, dst)
    if as_json:
        shape: dict[str, Any] = {
            "source": src,
            "target": dst,
            "checkpoints": info.checkpoints,
            "overwritten": existing is not None,
        }
        print_json(shape)
        return
    out().print(
        f"copied {info.checkpoints} checkpoint(s) from {escape(src)} to {escape(dst)}",
        soft_wrap=True,
    )

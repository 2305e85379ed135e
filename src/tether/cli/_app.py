"""The ``tether`` command: click commands, rich output, and the one error boundary.

Library errors become CLI errors only here, at the boundary: every command
body runs inside :func:`_boundary`, which turns a :class:`~tether.errors.TetherError`
into a one-line ``Error: ...`` on stderr and exit code 1 (click's own usage
errors keep exit code 2). Options shared by several commands are decorators
(:func:`_json_option`, :func:`_allow_option`), as sqlite-utils does.

Why one long module: it is the command table, one click command per
function with its options and help text; what the commands do lives in the
library (``_stores.py``, the savers, the importer and exporter).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.pretty import Pretty
from rich.table import Table

from tether import __version__
from tether._delta_chains_sync import prune_keeping_chains
from tether.checkpoint import CheckpointTuple
from tether.cli._stores import HeadInfo, Store, ThreadInfo, opened, same_store
from tether.errors import (
    CheckpointNotFound,
    ConfigError,
    DecodeError,
    TetherError,
    describe,
    shown,
)
from tether.exporter import ExportSummary, export_store
from tether.importer import ImportSummary, OfficialSource, import_store, open_source
from tether.serde import parse_allowlist
from tether.stores import parse_store_url

__all__ = ["cli"]

F = TypeVar("F", bound=Callable[..., Any])

_STORE_HELP = (
    "STORE is a tether store: a SQLite file path (or sqlite:///path) or a "
    "postgresql:// URL, optionally with ?schema=NAME."
)


# --- shared plumbing ----------------------------------------------------------------------


def _out() -> Console:
    # Made per call: click's test runner swaps sys.stdout per invocation.
    return Console(highlight=False, soft_wrap=False)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def _boundary(fn: F) -> F:
    """Run a command body; any error becomes one ``Error: <message>`` line and exit code 1.

    A :class:`~tether.errors.TetherError` is shown as it is. Anything else is a
    bug in tether (every storage and decoding path raises tether's errors): it
    is shown as one line too, with its type, unless ``TETHER_DEBUG=1`` asks
    for the traceback. click's own errors (usage, abort) pass through.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DecodeError as exc:
            hint = ""
            if exc.type_name:
                module, _, name = exc.type_name.rpartition(".")
                hint = f"; if the type is yours, allow it with --allow {module}:{name}"
            raise click.ClickException(f"{describe(exc)}{hint}") from exc
        except TetherError as exc:
            raise click.ClickException(describe(exc)) from exc
        except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:
            if os.environ.get("TETHER_DEBUG") == "1":
                raise
            text = " ".join(str(exc).split())
            raise click.ClickException(
                f"unexpected {type(exc).__name__}: {text[:500]} (a bug in tether: please "
                "report it; TETHER_DEBUG=1 shows the traceback)"
            ) from exc

    return wrapper  # type: ignore[return-value]


def _json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        fn
    )


def _parse_allow(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    out: set[tuple[str, str]] = set()
    for value in values:
        try:
            out |= parse_allowlist(value, source="--allow")
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return tuple(sorted(out))


def _allow_option(fn: F) -> F:
    return click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="MODULE:NAME",
        callback=_parse_allow,
        help="Also decode values of this type (repeatable; MODULE:* allows every class "
        "defined in MODULE). LangGraph's and langchain-core's own types are always "
        "allowed, and so are those in TETHER_ALLOWLIST.",
    )(fn)


def _jsonable(value: Any) -> Any:
    """A JSON-friendly view of a stored value (messages and models as their fields)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        with contextlib.suppress(Exception):  # a model that cannot dump shows as repr
            return {"type": type(value).__name__, **dump()}
    if isinstance(value, bytes | bytearray):
        return {"bytes": len(value)}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "_asdict"):
        return value._asdict()
    return repr(value)


def _print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=_jsonable, ensure_ascii=False))


def _thread_config(thread_id: str, ns: str | None = None, cid: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def _require_thread(store: Store, thread_id: str) -> ThreadInfo:
    info = store.thread(thread_id)
    if info is None:
        raise CheckpointNotFound(
            f"thread {shown(thread_id)} not found in {store.url}; `tether threads {store.url}` "
            "lists the threads"
        )
    return info


def _when(ts: str | None) -> str:
    """A checkpoint timestamp to the second (``2026-01-02 03:04:05Z``); as stored otherwise."""
    if not ts:
        return ""
    try:
        at = datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if at.utcoffset() == timedelta(0):
        return at.strftime("%Y-%m-%d %H:%M:%SZ")
    return at.strftime("%Y-%m-%d %H:%M:%S%z")


# --- the group --------------------------------------------------------------------------


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_STORE_HELP,
)
@click.version_option(__version__, prog_name="tether")
def cli() -> None:
    """Inspect and manage tether checkpoint stores, and import LangGraph's.

    \b
    tether threads chat.db                 threads with checkpoint counts
    tether history chat.db THREAD          checkpoints of a thread, newest first
    tether show chat.db THREAD [ID]        values and pending writes of one checkpoint
    tether import langgraph.db chat.db     copy every thread of an official store
    tether export chat.db --to-langgraph langgraph.db   and back to the official format
    """
    if os.getcwd() not in sys.path and "" not in sys.path:
        # As `python -m` does: the user's modules (myapp/models.py), named by
        # --allow or TETHER_ALLOWLIST, are found from the directory the command
        # runs in.
        sys.path.insert(0, os.getcwd())


# --- threads ----------------------------------------------------------------------------


@cli.command(epilog=_STORE_HELP)
@click.argument("store")
@_json_option
@_boundary
def threads(store: str, as_json: bool) -> None:
    """List the threads of STORE with their checkpoint counts and latest step and time."""
    with opened(store, read_only=True) as st:
        infos = st.threads()
    if as_json:
        _print_json([i.as_dict() for i in infos])
        return
    out = _out()
    if not infos:
        out.print(f"no threads in {escape(str(store))}")
        return
    table = Table(title=f"{len(infos)} thread(s) in {escape(str(store))}", title_justify="left")
    table.add_column("thread", overflow="fold")
    table.add_column("checkpoints", justify="right")
    table.add_column("namespaces", justify="right")
    table.add_column("latest step", justify="right")
    table.add_column("latest time", overflow="fold")
    for i in infos:
        table.add_row(
            escape(i.thread_id),
            str(i.checkpoints),
            str(i.namespaces),
            "" if i.latest_step is None else str(i.latest_step),
            _when(i.latest_ts),
        )
    out.print(table)


# --- history ----------------------------------------------------------------------------


def _changed(head: HeadInfo, parent: HeadInfo | None) -> list[str]:
    updated = head.checkpoint.get("updated_channels")
    if updated is not None:
        return sorted(updated)
    mine = head.checkpoint.get("channel_versions", {})
    theirs = parent.checkpoint.get("channel_versions", {}) if parent else {}
    return sorted(c for c, v in mine.items() if theirs.get(c) != v)


def _history_rows(st: Store, heads: list[HeadInfo]) -> Iterator[dict[str, Any]]:
    by_id = {(h.checkpoint_ns, h.checkpoint_id): h for h in heads}
    for h in heads:
        parent = by_id.get((h.checkpoint_ns, h.parent_id)) if h.parent_id else None
        if h.parent_id and parent is None and h.checkpoint.get("updated_channels") is None:
            found = st.heads(h.thread_id, h.checkpoint_ns, checkpoint_id=h.parent_id)
            parent = found[0] if found else None
        yield {
            "checkpoint_id": h.checkpoint_id,
            "checkpoint_ns": h.checkpoint_ns,
            "step": h.metadata.get("step"),
            "source": h.metadata.get("source"),
            "parent_checkpoint_id": h.parent_id,
            "changed": _changed(h, parent),
            "pending_writes": h.pending_writes,
            "ts": h.checkpoint.get("ts"),
        }


@cli.command(epilog=_STORE_HELP)
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
@_allow_option
@_json_option
@_boundary
def history(
    store: str,
    thread: str,
    ns: str | None,
    limit: int | None,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Show the checkpoints of THREAD, newest first.

    Each row: checkpoint id, step, source (input, loop, update, fork), parent id,
    the channels that checkpoint changed, and its pending writes.
    """
    with opened(store, allowlist=allow, read_only=True) as st:
        _require_thread(st, thread)
        # No value is decoded: a history lists channel names, whatever types
        # the thread holds (allowed or not).
        rows = list(_history_rows(st, st.heads(thread, ns, limit=limit)))
    if as_json:
        _print_json(rows)
        return
    out = _out()
    if not rows:
        out.print(f"no checkpoints of thread {escape(thread)} in namespace {ns!r}")
        return
    show_ns = any(r["checkpoint_ns"] for r in rows)
    position = {(r["checkpoint_ns"], r["checkpoint_id"]): i for i, r in enumerate(rows, 1)}
    out.print(f"thread {escape(thread)}: {len(rows)} checkpoint(s), newest first")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("checkpoint", no_wrap=True, min_width=36)
    if show_ns:
        table.add_column("ns", overflow="fold")
    table.add_column("step", justify="right", min_width=4)
    table.add_column("source", min_width=6)
    table.add_column("parent", overflow="fold", min_width=6)
    table.add_column("changed", overflow="fold", min_width=10)
    table.add_column("writes", justify="right", min_width=6)
    for i, r in enumerate(rows, 1):
        parent = r["parent_checkpoint_id"]
        at = position.get((r["checkpoint_ns"], parent))
        cells = [str(i), r["checkpoint_id"]]
        if show_ns:
            cells.append(escape(_ns_label(r["checkpoint_ns"])))
        cells += [
            "" if r["step"] is None else str(r["step"]),
            str(r["source"] or ""),
            "-" if parent is None else (f"#{at}" if at else parent),
            escape(", ".join(r["changed"])),
            str(r["pending_writes"]),
        ]
        table.add_row(*cells)
    out.print(table)


def _ns_label(ns: str) -> str:
    """A namespace by its node names (``review:<task id>|ask:<id>`` -> ``review|ask``)."""
    return "|".join(part.partition(":")[0] for part in ns.split("|")) if ns else ""


# --- show -------------------------------------------------------------------------------


def _find(st: Store, thread: str, cid: str | None, ns: str | None) -> CheckpointTuple:
    tup = st.saver.get_tuple(_thread_config(thread, ns or "", cid))
    if tup is None and cid is not None and ns is None:
        # The id may belong to a subgraph's namespace: look in every namespace.
        tup = next(iter(st.saver.list(_thread_config(thread, None, cid), limit=1)), None)
    if tup is None:
        _require_thread(st, thread)
        where = f" in namespace {ns!r}" if ns else ""
        what = f"checkpoint {cid}" if cid else "no checkpoint"
        raise CheckpointNotFound(
            f"{what} of thread {shown(thread)}{where} not found in {st.url}; "
            f"`tether history {st.url} {thread}` lists them"
        )
    return tup


@cli.command(epilog=_STORE_HELP)
@click.argument("store")
@click.argument("thread")
@click.argument("checkpoint_id", required=False)
@click.option(
    "--ns", default=None, metavar="NS", help="The checkpoint's namespace (default: root)."
)
@_allow_option
@_json_option
@_boundary
def show(
    store: str,
    thread: str,
    checkpoint_id: str | None,
    ns: str | None,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Show one checkpoint of THREAD: metadata, channel values and pending writes.

    Without CHECKPOINT_ID, the latest checkpoint of the namespace.
    """
    with opened(store, allowlist=allow, read_only=True) as st:
        tup = _find(st, thread, checkpoint_id, ns)
    cp = tup.checkpoint
    conf = tup.config["configurable"]
    parent = tup.parent_config["configurable"].get("checkpoint_id") if tup.parent_config else None
    writes = [
        {"task_id": task, "channel": channel, "value": value}
        for task, channel, value in tup.pending_writes or ()
    ]
    if as_json:
        _print_json(
            {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": conf.get("checkpoint_ns", ""),
                "checkpoint_id": cp["id"],
                "parent_checkpoint_id": parent,
                "ts": cp.get("ts"),
                "metadata": tup.metadata,
                "channel_versions": cp.get("channel_versions", {}),
                "channel_values": cp.get("channel_values", {}),
                "pending_writes": writes,
            }
        )
        return
    out = _out()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("thread", escape(str(conf["thread_id"])))
    if conf.get("checkpoint_ns"):
        head.add_row("namespace", escape(conf["checkpoint_ns"]))
    head.add_row("checkpoint", cp["id"])
    head.add_row("parent", parent or "-")
    head.add_row("time", str(cp.get("ts", "")))
    head.add_row("metadata", Pretty(dict(tup.metadata)))
    out.print(head)
    values = cp.get("channel_values", {})
    versions = cp.get("channel_versions", {})
    out.rule("channel values", align="left")
    for channel in sorted(set(values) | set(versions)):
        version = escape(str(versions.get(channel, "")))
        out.print(f"[bold]{escape(channel)}[/bold]  [dim]version {version}[/dim]")
        value = Pretty(values[channel]) if channel in values else "[dim](empty)[/dim]"
        out.print(Padding(value, (0, 0, 0, 4)))
    out.rule(f"pending writes ({len(writes)})", align="left")
    for w in writes:
        out.print(f"[bold]{escape(w['channel'])}[/bold]  [dim]task {escape(w['task_id'])}[/dim]")
        out.print(Padding(Pretty(w["value"]), (0, 0, 0, 4)))


# --- stats ------------------------------------------------------------------------------


@cli.command(epilog=_STORE_HELP)
@click.argument("store")
@_json_option
@_boundary
def stats(store: str, as_json: bool) -> None:
    """Show the row counts and sizes of STORE's tables."""
    with opened(store, read_only=True) as st:
        tables, total = st.stats()
        n_threads = len(st.threads())
    if as_json:
        _print_json(
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
    _out().print(table)


# --- prune / delete / copy -------------------------------------------------------------


def _confirm(message: str, yes: bool) -> None:
    if not yes:
        click.confirm(message, abort=True, err=True)


@cli.command(epilog=_STORE_HELP)
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
@_boundary
def prune(
    store: str, thread_ids: tuple[str, ...], keep: int | None, delete_all: bool, yes: bool
) -> None:
    """Drop old checkpoints of THREAD... (with their writes and unused values).

    Give exactly one of --keep N (the newest N of each namespace stay) or --delete.
    A thread of a graph with LangGraph DeltaChannel state keeps, beyond N, the
    older checkpoints whose writes its kept checkpoints are rebuilt from.
    """
    if (keep is None) == (not delete_all):
        raise click.UsageError("give exactly one of --keep N or --delete")
    grown: dict[str, int] = {}
    with opened(store) as st:
        before = {t: _require_thread(st, t).checkpoints for t in dict.fromkeys(thread_ids)}
        if delete_all:
            _confirm(f"Delete every checkpoint of {len(before)} thread(s) in {store}?", yes)
            st.saver.prune(list(before), strategy="delete")
        else:
            assert keep is not None
            # A LangGraph DeltaChannel value is rebuilt from the writes of the
            # checkpoint's ancestors: keep the newest N and every one of those.
            counts = prune_keeping_chains(st.saver, list(before), strategy="keep_last", keep=keep)
            grown = {tid: count for tid, count in counts.items() if count > keep}
        after = {i.thread_id: i.checkpoints for i in st.threads_named(list(before))}
    out = _out()
    for tid, n in before.items():
        line = f"{escape(tid)}: {n} -> {after.get(tid, 0)} checkpoint(s)"
        if tid in grown:
            line += (
                f" (kept the newest {grown[tid]} per namespace, not {keep}: the kept "
                "checkpoints rebuild LangGraph DeltaChannel values from the older ones' writes)"
            )
        out.print(line)


@cli.command(epilog=_STORE_HELP)
@click.argument("store")
@click.argument("thread")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@_boundary
def delete(store: str, thread: str, yes: bool) -> None:
    """Delete THREAD from STORE: every namespace, checkpoint, value and write."""
    with opened(store) as st:
        info = _require_thread(st, thread)
        _confirm(
            f"Delete thread {shown(thread)} ({info.checkpoints} checkpoint(s)) from {store}?", yes
        )
        st.saver.delete_thread(thread)
    _out().print(f"deleted thread {escape(thread)} ({info.checkpoints} checkpoint(s))")


@cli.command(epilog=_STORE_HELP)
@click.argument("store")
@click.argument("src")
@click.argument("dst")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Copy even when DST already has checkpoints (same ids are replaced).",
)
@_boundary
def copy(store: str, src: str, dst: str, overwrite: bool) -> None:
    """Copy thread SRC to a new thread DST in STORE (same checkpoint ids, every namespace)."""
    if src == dst:
        raise ConfigError(f"source and target are the same thread {src!r}")
    with opened(store) as st:
        info = _require_thread(st, src)
        existing = st.thread(dst)
        if existing is not None and not overwrite:
            raise ConfigError(
                f"thread {dst!r} already has {existing.checkpoints} checkpoint(s) in {store}; "
                "delete it first or pass --overwrite"
            )
        st.saver.copy_thread(src, dst)
    _out().print(f"copied {info.checkpoints} checkpoint(s) from {escape(src)} to {escape(dst)}")


# --- import -----------------------------------------------------------------------------


def _summary_table(summary: ImportSummary, target: str) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("imported", style="bold")
    table.add_column("count", justify="right")
    for key in ("threads", "namespaces", "checkpoints", "writes"):
        table.add_row(key, f"{getattr(summary, key):,}")
    return table


def _import(
    reader: OfficialSource,
    st: Store,
    thread_ids: tuple[str, ...],
    progress: bool,
    allow: tuple[tuple[str, str], ...],
) -> ImportSummary:
    bar, report = _progress_bar("importing", progress)
    with bar:
        return import_store(
            reader, st.saver, threads=thread_ids or None, progress=report, allowlist=allow
        )


@cli.command(name="import", epilog=_STORE_HELP)
@click.argument("source")
@click.argument("target")
@click.option(
    "--thread",
    "-t",
    "thread_ids",
    multiple=True,
    metavar="THREAD",
    help="Import only this thread (repeatable). Default: every thread.",
)
@click.option("--progress/--no-progress", default=True, help="Show a progress bar on stderr.")
@_allow_option
@_json_option
@_boundary
def import_(
    source: str,
    target: str,
    thread_ids: tuple[str, ...],
    progress: bool,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Copy the threads of a LangGraph store at SOURCE into the tether store TARGET.

    SOURCE is a store of LangGraph's official savers: a langgraph-checkpoint-sqlite
    file (path or sqlite:///path) or a langgraph-checkpoint-postgres database
    (postgresql://..., ?schema=NAME if not public). It is only read. TARGET is
    created if missing. Every namespace, checkpoint id, parent link, channel
    version, metadata and pending write is kept; running it again overwrites the
    same ids and duplicates nothing.
    """
    src, dst = parse_store_url(source), parse_store_url(target)
    # One SQLite file may hold both: LangGraph's tables are read, tether's written.
    if same_store(src, dst) and src.kind != "sqlite":
        raise ConfigError(f"source and target are the same store ({source}); name a new target")
    # The source is opened and checked first: a missing, unreachable or
    # non-official source creates no target (#20.1c).
    reader = open_source(source, allowlist=allow)
    try:
        with opened(target, create=True, allowlist=allow) as st:
            summary = _import(reader, st, thread_ids, progress, allow)
    finally:
        reader.close()
    if as_json:
        _print_json({**summary.as_dict(), "target": target})
        return
    out = _out()
    out.print(f"imported {escape(summary.source)} into {escape(target)}")
    out.print(_summary_table(summary, target))


# --- export -----------------------------------------------------------------------------


def _progress_bar(verb: str, show: bool | None) -> tuple[Any, Callable[[int, int], None] | None]:
    """A rich progress bar on stderr, and the callback that moves it.

    ``show=None``: only when stderr is a terminal, so a pipe or a log file gets
    nothing extra. Returns a null context and no callback when hidden.
    """
    console = _err()
    if show is False or (show is None and not console.is_terminal):
        return contextlib.nullcontext(), None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn(verb),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("checkpoints"),
        TimeRemainingColumn(),
        console=console,
    )
    task = bar.add_task(verb, total=None)

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, report


def _export_table(summary: ExportSummary) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("exported", style="bold")
    table.add_column("count", justify="right")
    for key in ("threads", "namespaces", "checkpoints", "writes"):
        table.add_row(key, f"{getattr(summary, key):,}")
    return table


@cli.command(epilog=_STORE_HELP)
@click.argument("store")
@click.option(
    "--to-langgraph",
    "target",
    required=True,
    metavar="TARGET",
    help="The LangGraph store to write: a SQLite file (path or sqlite:///path) for "
    "langgraph-checkpoint-sqlite, or postgresql://...[?schema=NAME] for "
    "langgraph-checkpoint-postgres. Created if missing.",
)
@click.option(
    "--thread",
    "-t",
    "thread_ids",
    multiple=True,
    metavar="THREAD",
    help="Export only this thread (repeatable). Default: every thread.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace the threads TARGET already holds (otherwise they are refused).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr. Default: when stderr is a terminal.",
)
@_allow_option
@_json_option
@_boundary
def export(
    store: str,
    target: str,
    thread_ids: tuple[str, ...],
    overwrite: bool,
    progress: bool | None,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Copy the threads of STORE into a store of LangGraph's official savers.

    LangGraph's own SqliteSaver or PostgresSaver then reads the same histories:
    every namespace, checkpoint id, parent link, channel version, metadata and
    pending write (task ids, task paths, indexes), with whole values. STORE is
    only read. The export writes through the official saver, which must be
    installed (pip install langgraph-checkpoint-sqlite / -postgres).
    """
    bar, report = _progress_bar("exporting", progress)
    with bar:
        summary = export_store(
            store,
            target,
            threads=thread_ids or None,
            overwrite=overwrite,
            progress=report,
            allowlist=allow,
        )
    if as_json:
        _print_json(summary.as_dict())
        return
    out = _out()
    out.print(f"exported {escape(summary.source)} to {escape(summary.target)} ({summary.kind})")
    if summary.overwritten:
        out.print(f"replaced {len(summary.overwritten)} thread(s) the target held")
    out.print(_export_table(summary))


from tether.cli._ui import ui  # noqa: E402 -- it uses the helpers above

cli.add_command(ui)

"""``tether import`` and ``tether export``: threads in and out of LangGraph's official stores."""

from __future__ import annotations

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
)
from tether.cli._stores import Store, opened, same_store
from tether.errors import ConfigError
from tether.exporter import ExportSummary, export_store
from tether.importer import ImportSummary, OfficialSource, import_store, open_source
from tether.serde._langgraph_aes import langgraph_aes_key
from tether.stores import parse_store_url

__all__ = ["export", "import_"]


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
    progress: bool | None,
    allow: tuple[tuple[str, str], ...],
) -> ImportSummary:
    bar, report = progress_bar("importing", progress)
    with bar:
        return import_store(
            reader, st.saver, threads=thread_ids or None, progress=report, allowlist=allow
        )


@click.command(name="import", epilog=STORE_HELP)
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
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr. Default: when stderr is a terminal.",
)
@allow_option
@json_option
@boundary
def import_(
    source: str,
    target: str,
    thread_ids: tuple[str, ...],
    progress: bool | None,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Copy the threads of a LangGraph store at SOURCE into the tether store TARGET.

    SOURCE is a store of LangGraph's official savers: a langgraph-checkpoint-sqlite
    file (path or sqlite:///path) or a langgraph-checkpoint-postgres database
    (postgresql://..., ?schema=NAME if not public). It is only read. TARGET is
    created if missing. Every namespace, checkpoint id, parent link, channel
    version, metadata and pending write is kept; running it again overwrites the
    same ids and duplicates nothing. Values LangGraph's EncryptedSerializer wrote
    are read with the key in LANGGRAPH_AES_KEY (pip install pycryptodome); a
    TARGET with TETHER_KEYS seals them again under its own key.
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
        print_json({**summary.as_dict(), "target": target})
        return
    console = out()
    console.print(f"imported {escape(summary.source)} into {escape(target)}", soft_wrap=True)
    console.print(_summary_table(summary, target))


# --- export -----------------------------------------------------------------------------


def _export_table(summary: ExportSummary) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("exported", style="bold")
    table.add_column("count", justify="right")
    for key in ("threads", "namespaces", "checkpoints", "writes"):
        table.add_row(key, f"{getattr(summary, key):,}")
    return table


@click.command(cls=StoreCommand, epilog=STORE_HELP)
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
@click.option(
    "--encrypt-langgraph",
    is_flag=True,
    help="Write values encrypted by LangGraph's EncryptedSerializer under LANGGRAPH_AES_KEY.",
)
@allow_option
@json_option
@boundary
def export(
    store: str,
    target: str,
    thread_ids: tuple[str, ...],
    overwrite: bool,
    progress: bool | None,
    encrypt_langgraph: bool,
    allow: tuple[tuple[str, str], ...],
    as_json: bool,
) -> None:
    """Copy the threads of STORE into a store of LangGraph's official savers.

    LangGraph's own SqliteSaver or PostgresSaver then reads the same histories:
    every namespace, checkpoint id, parent link, channel version, metadata and
    pending write (task ids, task paths, indexes), with whole values. STORE is
    only read. The export writes through the official saver, which must be
    installed (pip install langgraph-checkpoint-sqlite / -postgres).
    With --encrypt-langgraph, values are written by LangGraph's own
    EncryptedSerializer under LANGGRAPH_AES_KEY (pip install pycryptodome).
    """
    key = None
    if encrypt_langgraph:
        key = langgraph_aes_key()
        if key is None:
            raise ConfigError("--encrypt-langgraph needs LANGGRAPH_AES_KEY (16, 24 or 32 bytes)")
    bar, report = progress_bar("exporting", progress)
    with bar:
        summary = export_store(
            store,
            target,
            threads=thread_ids or None,
            overwrite=overwrite,
            progress=report,
            allowlist=allow,
            langgraph_aes_key=key,
        )
    if as_json:
        print_json(summary.as_dict())
        return
    console = out()
    console.print(
        f"exported {escape(summary.source)} to {escape(summary.target)} ({summary.kind})",
        soft_wrap=True,
    )
    if summary.overwritten:
        console.print(
            f"replaced {len(summary.overwritten)} thread(s) the target held", soft_wrap=True
        )
    console.print(_export_table(summary))

"""What every ``tether`` command shares: the error boundary, shared options, output.

Library errors become CLI errors only here, at the boundary: every command
body runs inside :func:`boundary`, which turns a :class:`~tether.errors.TetherError`
into a one-line ``Error: ...`` on stderr and exit code 1 (click's own usage
errors keep exit code 2). Options shared by several commands are decorators
(:func:`json_option`, :func:`allow_option`), as sqlite-utils does.

Output goes through :func:`out`: on a terminal, rich as usual; into a pipe or
a file, lines without the padding rich adds to fill a table's width, at a
fixed width (``COLUMNS``, else 120), so what a script reads does not depend
on the terminal it ran from. Commands whose STORE comes first are
:class:`StoreCommand`, which lets ``TETHER_STORE`` stand for it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import click
from rich.console import Console

from tether.cli._stores import Store, ThreadInfo
from tether.errors import CheckpointNotFound, ConfigError, DecodeError, TetherError, describe, shown
from tether.history import jsonable
from tether.serde import parse_allowlist

__all__ = [
    "STORE_HELP",
    "StoreCommand",
    "allow_option",
    "boundary",
    "confirm",
    "err",
    "json_option",
    "ns_label",
    "out",
    "print_json",
    "progress_bar",
    "require_thread",
    "thread_config",
    "when",
]

F = TypeVar("F", bound=Callable[..., Any])

STORE_ENV = "TETHER_STORE"

STORE_HELP = (
    "STORE is a tether store: a SQLite file path (or sqlite:///path) or a "
    "postgresql:// URL, optionally with ?schema=NAME. With TETHER_STORE set, "
    "STORE may be left out."
)

#: Width of output that is not a terminal (a pipe, a file) when COLUMNS is unset.
PIPE_WIDTH = 120


# --- output -------------------------------------------------------------------------------


class _Unpadded(io.TextIOBase):
    """A text stream that drops the spaces at the end of each line it passes on.

    rich pads every table cell to its column's width, the last one too; a
    file or a pipe should not get those spaces.
    """

    def __init__(self, target: Any) -> None:
        self._target = target
        self._pending = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._target.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()


def out() -> Console:
    """The console of standard output (made per call: click's test runner swaps sys.stdout)."""
    stream = sys.stdout
    if stream.isatty():
        return Console(highlight=False, soft_wrap=False)
    width = int(os.environ.get("COLUMNS") or 0) or PIPE_WIDTH
    return Console(
        file=cast(IO[str], _Unpadded(stream)),
        highlight=False,
        soft_wrap=False,
        width=width,
        color_system=None,
    )


def err() -> Console:
    return Console(stderr=True, highlight=False)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout; stored values as :func:`tether.history.jsonable`."""
    click.echo(json.dumps(value, indent=2, default=jsonable, ensure_ascii=False))


def when(ts: str | None) -> str:
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


def ns_label(ns: str) -> str:
    """A namespace by its node names (``review:<task id>|ask:<id>`` -> ``review|ask``)."""
    return "|".join(part.partition(":")[0] for part in ns.split("|")) if ns else ""


def progress_bar(
    verb: str, show: bool | None, unit: str = "checkpoints"
) -> tuple[Any, Callable[[int, int], None] | None]:
    """A rich progress bar on stderr, and the callback that moves it.

    ``show=None``: only when stderr is a terminal, so a pipe or a log file gets
    nothing extra. Returns a null context and no callback when hidden.
    """
    console = err()
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
        TextColumn(unit),
        TimeRemainingColumn(),
        console=console,
    )
    task = bar.add_task(verb, total=None)

    def report(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, report


# --- the boundary ---------------------------------------------------------------------------


def boundary(fn: F) -> F:
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
            raise click.ClickException(f"{describe(exc)}{allow_hint(exc)}") from exc
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


def allow_hint(exc: DecodeError) -> str:
    """``; if the type is yours, allow it with --allow module:Name`` for a refused type."""
    if not exc.type_name:
        return ""
    module, _, name = exc.type_name.rpartition(".")
    return f"; if the type is yours, allow it with --allow {module}:{name}"


# --- options and arguments --------------------------------------------------------------------


def json_option(fn: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (shapes: docs/cli.md) instead of text."
    )(fn)


def _parse_allow(
    ctx: click.Context, param: click.Parameter, values: Sequence[str] | None
) -> tuple[tuple[str, str], ...]:
    out: set[tuple[str, str]] = set()
    for value in values or ():
        try:
            out |= parse_allowlist(value, source="--allow")
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return tuple(sorted(out))


def allow_option(fn: F) -> F:
    return click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="MODULE:NAME",
        callback=_parse_allow,
        envvar="TETHER_ALLOWLIST",
        show_envvar=True,
        help="Also decode values of this type (repeatable, or comma-separated; MODULE:* "
        "allows every class defined in MODULE). LangGraph's and langchain-core's own types "
        "are always allowed.",
    )(fn)


def _looks_like_store(token: str) -> bool:
    return "://" in token or Path(token).expanduser().exists()


class StoreCommand(click.Command):
    """A command whose first argument is STORE, which ``TETHER_STORE`` may stand for.

    With ``TETHER_STORE`` set, the first argument is taken as STORE only when
    it looks like one (a URL, or a file that exists); otherwise the command
    reads the store from the environment and the arguments given are the
    ones after STORE: ``tether history chat-1`` reads thread ``chat-1`` of
    ``$TETHER_STORE``.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        store = os.environ.get(STORE_ENV)
        if store:
            first = self._first_positional(ctx, args)
            if first is None or not _looks_like_store(args[first]):
                args = [store, *args]
        return super().parse_args(ctx, args)

    def _first_positional(self, ctx: click.Context, args: list[str]) -> int | None:
        """The index of the first argument that is not an option or an option's value."""
        takes_value = set()
        for param in self.get_params(ctx):
            if isinstance(param, click.Option) and not param.is_flag and not param.count:
                takes_value.update(param.opts)
                takes_value.update(param.secondary_opts)
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                return i + 1 if i + 1 < len(args) else None
            if arg.startswith("-") and arg != "-":
                if arg in takes_value:
                    i += 1  # its value
                i += 1
                continue
            return i
        return None


# --- threads and configs -------------------------------------------------------------------------


def thread_config(thread_id: str, ns: str | None = None, cid: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    if cid is not None:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def require_thread(store: Store, thread_id: str) -> ThreadInfo:
    info = store.thread(thread_id)
    if info is None:
        raise CheckpointNotFound(
            f"thread {shown(thread_id)} not found in {store.url}; `tether threads {store.url}` "
            "lists the threads"
        )
    return info


def confirm(message: str, yes: bool) -> None:
    if not yes:
        click.confirm(message, abort=True, err=True)

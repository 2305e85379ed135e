"""The ``tether`` command group: the commands, one module per concept.

``_threads`` (threads, stats), ``_history`` (history), ``_show`` (show,
diff), ``_manage`` (prune, delete, copy), ``_rekey`` (rekey), ``_sweep`` (sweep), ``_transfer``
(import, export),
``_verify`` (verify). What every command shares -- the error boundary, the
shared options, output without padding in a pipe, ``TETHER_STORE`` -- is in
``_common``; what the commands do lives in the library (``_stores``,
``_views``, ``_checks``, :mod:`tether.history`, the savers, the importer
and exporter).
"""

from __future__ import annotations

import os
import sys

import click

from tether import __version__
from tether.cli._common import STORE_HELP
from tether.cli._history import history
from tether.cli._manage import copy, delete, prune
from tether.cli._rekey import rekey
from tether.cli._show import diff, show
from tether.cli._sweep import sweep
from tether.cli._threads import stats, threads
from tether.cli._transfer import export, import_
from tether.cli._ui import ui
from tether.cli._verify import verify

__all__ = ["cli"]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=STORE_HELP,
)
@click.version_option(__version__, prog_name="tether")
def cli() -> None:
    """Inspect and manage tether checkpoint stores, and import LangGraph's.

    \b
    tether threads chat.db                 threads with their status
    tether history chat.db THREAD          checkpoints of a thread, newest first (--tree)
    tether show chat.db THREAD [#N|ID]     values and pending writes of one checkpoint
    tether diff chat.db THREAD A [B]       what changed between two checkpoints
    tether verify chat.db                  read everything; exit code 1 on damage
    tether sweep chat.db --ttl 7d          delete threads idle for a week (cron; --dry-run)
    tether import langgraph.db chat.db     copy every thread of an official store
    tether export chat.db --to-langgraph langgraph.db   and back to the official format

    \b
    TETHER_STORE=chat.db tether history THREAD   (the store from the environment)
    """
    if os.getcwd() not in sys.path and "" not in sys.path:
        # As `python -m` does: the user's modules (myapp/models.py), named by
        # --allow or TETHER_ALLOWLIST, are found from the directory the command
        # runs in.
        sys.path.insert(0, os.getcwd())


for _command in (
    threads,
    history,
    show,
    diff,
    stats,
    verify,
    prune,
    delete,
    copy,
    rekey,
    sweep,
    import_,
    export,
):
    cli.add_command(_command)
cli.add_command(ui)

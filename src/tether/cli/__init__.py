"""The ``tether`` command line (needs the ``cli`` extra: click and rich).

``tether threads|history|show|stats STORE ...`` inspect a store,
``tether prune|delete|copy|rekey STORE ...`` manage its threads, and
``tether import SOURCE TARGET`` brings threads over from LangGraph's official
SQLite and Postgres stores. ``tether --help`` and ``tether COMMAND --help``
describe each; docs/cli.md has examples.
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Entry point of the ``tether`` script."""
    try:
        from tether.cli._app import cli
    except ImportError as exc:  # click or rich missing
        import sys

        sys.stderr.write(
            f"Error: the tether command needs the cli extra: pip install 'tether[cli]' ({exc})\n"
        )
        raise SystemExit(1) from exc
    cli(prog_name="tether")

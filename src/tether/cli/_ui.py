"""``tether ui STORE``: the command that serves the web viewer (:mod:`tether.ui`).

The store is opened as every command opens it (``_stores.opened``):
read-only unless ``--allow-edit``, a SQLite file or a Postgres URL alike.
"""

from __future__ import annotations

import webbrowser

import click

from tether.cli._common import STORE_HELP, StoreCommand, allow_option, boundary, err
from tether.cli._stores import opened
from tether.errors import ConfigError

__all__ = ["ui"]


@click.command(cls=StoreCommand, epilog=STORE_HELP)
@click.argument("store")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on. Anything but a loopback address lets other machines "
    "read the store (and edit it with --allow-edit): there is no login.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8700,
    show_default=True,
    help="The port to listen on (0: any free port).",
)
@click.option(
    "--allow-edit",
    is_flag=True,
    help="Allow forking a checkpoint with edited values, copying and deleting threads "
    "(each asks for confirmation). Without it the store is opened read-only.",
)
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
@allow_option
@boundary
def ui(
    store: str,
    host: str,
    port: int,
    allow_edit: bool,
    no_open: bool,
    allow: tuple[tuple[str, str], ...],
) -> None:
    """Serve a web viewer of STORE on this machine and open it in a browser.

    Threads with their status, each thread's checkpoints as a fork tree, the
    state at a checkpoint (messages as a conversation), its pending writes and
    metadata, and the changes between any two checkpoints. Ctrl+C stops it.
    """
    try:
        from tether.ui import Viewer, create_app, is_loopback, serve
    except ImportError as exc:
        raise ConfigError(str(exc)) from exc
    hosts: list[str] = ["127.0.0.1", "localhost", "[::1]", "::1"]
    if not is_loopback(host):
        err().print(
            f"warning: --host {host} serves the viewer beyond this machine; it has no login, "
            "so whoever reaches it reads every thread"
            + (" and can fork, copy and delete them" if allow_edit else ""),
            markup=False,
        )
        hosts = ["*"]  # the names this address is reached by are not known here
    elif host not in hosts:
        hosts.append(host)
    with opened(store, allowlist=allow, read_only=not allow_edit) as st:
        app = create_app(Viewer(st, allow_edit=allow_edit), allowed_hosts=hosts)

        def ready(url: str) -> None:
            mode = "editing allowed" if allow_edit else "read-only"
            click.echo(f"tether ui: {store} ({mode}) at {url} (Ctrl+C stops)")
            if not no_open:
                webbrowser.open(url)

        try:
            serve(app, host, port, on_ready=ready)
        except KeyboardInterrupt:  # Ctrl+C: uvicorn shut down and passes the signal on
            click.echo("tether ui: stopped", err=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another "
                "--port (0: any free port)"
            ) from exc

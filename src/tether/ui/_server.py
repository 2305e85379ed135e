"""Serving the viewer with uvicorn: in the foreground for ``tether ui``, in a thread for tests.

Both run the same :class:`uvicorn.Server` on the app of :func:`create_app`;
:class:`Served` starts it on a socket bound beforehand (port 0: any free
port) and stops it on exit, so a test drives exactly what the command serves.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette

__all__ = ["Served", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` binds only this machine (127.0.0.0/8, ::1, ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _config(app: Starlette, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",  # no websockets: nothing to upgrade to
        server_header=False,
    )


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return f"http://{shown}:{port}/"


def serve(
    app: Starlette,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``app`` until interrupted (Ctrl+C); ``on_ready(url)`` once it listens.

    Raises:
        OSError: the address cannot be bound (the port is taken).
    """
    sock = _bind(host, port)
    server = uvicorn.Server(_config(app, host, sock.getsockname()[1]))
    if on_ready is not None:
        url = url_of(host, sock.getsockname()[1])

        def wait() -> None:
            while not server.started and not server.should_exit:
                time.sleep(0.05)
            if server.started:
                on_ready(url)

        threading.Thread(target=wait, daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


class Served:
    """``with Served(app) as url:`` serves ``app`` in a thread on a free loopback port."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = _bind(host, port)
        self.url = url_of(host, self._sock.getsockname()[1])
        self._server = uvicorn.Server(_config(app, host, self._sock.getsockname()[1]))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"the viewer did not start at {self.url}")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

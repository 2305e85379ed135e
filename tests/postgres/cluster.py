"""A throw-away PostgreSQL cluster for fault tests: its own data directory, port and sockets.

Tests that restart the server must never touch the shared test server, so
:func:`throwaway_cluster` runs ``initdb`` in a temporary directory and starts
a postmaster of its own on a free port (TCP on 127.0.0.1 and a socket
directory inside the temporary directory), and always stops it and deletes
the directory afterwards. PostgreSQL refuses to run as root, so when the
tests run as root the server commands run as the ``postgres`` OS user
(``runuser``) in a directory it owns.

The server binaries are looked up in ``TETHER_PG_BINDIR``, ``pg_config
--bindir``, ``/usr/lib/postgresql/*/bin`` (newest first) and ``PATH``; the
tests that need them are skipped only when none has ``initdb``, ``pg_ctl``
and ``postgres``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

__all__ = ["Cluster", "find_bindir", "throwaway_cluster"]

_TOOLS = ("initdb", "pg_ctl", "postgres")


def _has_tools(bindir: Path) -> bool:
    return all((bindir / tool).is_file() for tool in _TOOLS)


def find_bindir() -> Path | None:
    """The directory of the PostgreSQL server binaries, or ``None``."""
    candidates: list[Path] = []
    if os.environ.get("TETHER_PG_BINDIR"):
        candidates.append(Path(os.environ["TETHER_PG_BINDIR"]))
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(versions)
    initdb = shutil.which("initdb")
    if initdb is not None:
        candidates.append(Path(initdb).resolve().parent)
    return next((c for c in candidates if _has_tools(c)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One throw-away cluster: ``dsn``, and ``stop``/``start``/``restart`` of its server."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sockets"
        self.log = root / "server.log"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bindir / tool), *args]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if check and out.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise AssertionError(
                f"{tool} {' '.join(args)} failed ({out.returncode}): {out.stderr}\n{log}"
            )
        return out

    def init(self) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        self.sockets.mkdir()
        if self._as_postgres:
            shutil.chown(self.sockets, "postgres", "postgres")

    def start(self) -> None:
        # fsync off: the tests stop the postmaster, never the machine; what a
        # commit wrote is in the kernel's page cache and survives the restart.
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=60"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (sessions ended cleanly) or ``immediate`` (a crash)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "immediate") -> None:
        self.stop(mode)
        self.start()

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[Cluster]:
    """A started cluster in a temporary directory; stopped and deleted afterwards, always."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("the PostgreSQL server binaries (initdb, pg_ctl, postgres) are not installed")
    root = Path(tempfile.mkdtemp(prefix="tether-cluster-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    cluster = Cluster(bindir, root)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            if cluster.running():
                cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)

"""SQLite connections: settings, sharing between threads, driver-error translation.

Connection settings (each pragma with its reason; DBOS's ``_sys_db_sqlite.py``
is the model):

* ``journal_mode=WAL`` (persistent, set once by setup): readers never block
  the writer nor the writer the readers, so listing a history while a graph
  runs does not stall either. It needs a local file system (shared memory for
  the WAL index), which is why SQLite is for one machine (S5.4).
* ``synchronous=NORMAL`` (default) or ``FULL``. In WAL mode both keep the
  database consistent after any crash. NORMAL fsyncs only at WAL
  checkpoints: every committed transaction survives a *process* crash
  (SIGKILL, OOM) because the WAL is already in the OS page cache, but after a
  *power loss or OS crash* the last transactions committed before it may roll
  back. FULL fsyncs the WAL at every commit: a ``put`` that returned survives
  power loss too, at the cost of one fsync per write.
* ``busy_timeout`` (default 30 s): another *process* holding the write lock
  makes SQLite sleep and retry instead of failing at once with "database is
  locked" (the reference set none). Threads of one process never get there:
  they queue on a process-local write lock first (below).
* ``foreign_keys=OFF`` (SQLite's default, stated): the schema has none; the
  thread operations keep tables consistent in one transaction instead.
* ``temp_store=MEMORY``: the ``IN (subquery)`` sets of the thread operations
  are materialized in memory, not in temp files.

Transactions: connections are in autocommit mode (``isolation_level=None``)
and tether issues ``BEGIN IMMEDIATE`` / ``COMMIT`` / ``ROLLBACK`` itself.
IMMEDIATE takes the write lock when the transaction starts, so a transaction
never has to upgrade a read lock (the upgrade fails with SQLITE_BUSY without
consulting the busy handler, the classic source of "database is locked").
Reads of more than one statement (``get_tuple``, one page of ``list``) run in
a deferred ``BEGIN`` so they see one snapshot.

Sharing: a file database gets a small pool of connections (one per thread in
use at a time; idle ones are reused, so worker threads that come and go do
not leak connections) and reads run in parallel. ``:memory:`` and a
connection the caller passes in are one shared connection guarded by a lock
(``check_same_thread=False``): a private in-memory database exists only on
its own connection, and a caller's connection is not ours to multiply.

Writers of one process take a process-wide lock per database file before
``BEGIN IMMEDIATE``, so they queue in FIFO order in Python rather than all
sleeping in SQLite's busy handler (which backs off to 100 ms sleeps and is
not fair).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TypeAlias

from tether.errors import ConfigError, StorageError, StorageTimeout, StorageUnavailable

__all__ = ["MEMORY", "ConnectionManager", "Synchronous", "translate_errors"]

Synchronous: TypeAlias = Literal["NORMAL", "FULL"]
MEMORY = ":memory:"

_BUSY_NAMES = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})
_CORRUPT_NAMES = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})

# One write lock per database file per process, shared by every saver on it.
_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock_for(key: str) -> threading.Lock:
    with _WRITE_LOCKS_GUARD:
        lock = _WRITE_LOCKS.get(key)
        if lock is None:
            lock = _WRITE_LOCKS[key] = threading.Lock()
        return lock


def _error_name(exc: sqlite3.Error) -> str:
    """The primary result code name (``SQLITE_BUSY`` for ``SQLITE_BUSY_SNAPSHOT``)."""
    name = getattr(exc, "sqlite_errorname", None)
    if not isinstance(name, str):
        return ""
    parts = name.split("_")
    return "_".join(parts[:2])


@contextlib.contextmanager
def translate_errors(where: str) -> Iterator[None]:
    """Turn sqlite3 exceptions into tether's, naming ``where`` (the database path).

    The only place the backend catches driver errors; the original is kept
    as ``__cause__``.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise _translate(exc, where) from exc


def _translate(exc: sqlite3.Error, where: str) -> StorageError:
    name = _error_name(exc)
    text = str(exc)
    low = text.lower()
    if name in _BUSY_NAMES or "database is locked" in low or "database table is locked" in low:
        return StorageTimeout(
            f"SQLite database {where} stayed locked by another process past busy_timeout "
            f"({text}); retry, or raise busy_timeout"
        )
    if name in _CORRUPT_NAMES or "not a database" in low or "malformed" in low:
        return StorageError(
            f"{where} is not a usable SQLite database ({text}); tether did not write to it. "
            "Restore it from a backup or point tether at another file"
        )
    if name == "SQLITE_CANTOPEN" or "unable to open" in low:
        return StorageUnavailable(
            f"cannot open SQLite database {where} ({text}); check that the directory "
            "exists and is writable"
        )
    if name in ("SQLITE_FULL", "SQLITE_IOERR") or "disk is full" in low or "disk i/o" in low:
        return StorageUnavailable(f"I/O error on SQLite database {where}: {text}")
    if name == "SQLITE_READONLY" or "readonly" in low:
        return StorageError(f"SQLite database {where} is read-only ({text})")
    if isinstance(exc, sqlite3.ProgrammingError) and "closed" in low:
        return StorageError(f"the saver on {where} is closed; open a new one")
    return StorageError(f"SQLite error on {where}: {text}")


class ConnectionManager:
    """Hands out connections to one database; see the module docstring.

    Args:
        target: a path, ``":memory:"``, or an open ``sqlite3.Connection``.
        synchronous: ``"NORMAL"`` or ``"FULL"`` (see the module docstring).
        busy_timeout: seconds to wait for another process's write lock.
        max_idle: idle pooled connections kept open (file databases).
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | sqlite3.Connection,
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout: float = 30.0,
        max_idle: int = 8,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float):
            raise ConfigError(f"busy_timeout must be a number of seconds, got {busy_timeout!r}")
        if busy_timeout < 0:
            raise ConfigError(f"busy_timeout must be >= 0 seconds, got {busy_timeout!r}")
        self.synchronous = synchronous
        self.busy_timeout_ms = int(busy_timeout * 1000)
        self._max_idle = max_idle
        self._idle: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self.owns_connection = True
        if isinstance(target, sqlite3.Connection):
            self.path: str = _connection_path(target)
            self.where = self.path or "<connection>"
            self._shared = target
            self.owns_connection = False
            self._configure(target)
            self.is_file = False
            lock_key = f"conn:{id(target)}"
        else:
            raw = os.fspath(target)
            if not isinstance(raw, str):
                raise ConfigError(f"database path must be a str or Path, got {target!r}")
            if raw == MEMORY or raw == "":
                self.path = MEMORY
                self.where = MEMORY
                self._shared = self._open(MEMORY)
                self.is_file = False
                lock_key = f"mem:{id(self)}"
            else:
                self.path = str(Path(raw).expanduser().absolute())
                self.where = self.path
                self.is_file = True
                lock_key = f"file:{os.path.realpath(self.path)}"
        self.write_lock = _write_lock_for(lock_key) if self.is_file else self._shared_lock

    # --- opening -----------------------------------------------------------------

    def _open(self, path: str) -> sqlite3.Connection:
        with translate_errors(self.where if hasattr(self, "where") else path):
            # isolation_level=None: autocommit; tether writes BEGIN IMMEDIATE
            # itself. check_same_thread=False: a pooled connection is used by
            # one thread at a time, but not always the thread that opened it.
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0)
            try:
                self._configure(conn)
            except BaseException:
                conn.close()
                raise
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        with translate_errors(getattr(self, "where", "<connection>")):
            # Per connection (not persistent): see the module docstring for each.
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA temp_store = MEMORY")

    # --- using --------------------------------------------------------------------

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for one operation; returned to the pool afterwards."""
        if self._closed:
            raise StorageError(f"the saver on {self.where} is closed; open a new one")
        if self._shared is not None:
            with self._shared_lock:
                if self._closed:
                    raise StorageError(f"the saver on {self.where} is closed; open a new one")
                yield self._shared
            return
        conn = self._acquire()
        ok = False
        try:
            yield conn
            ok = not conn.in_transaction
        finally:
            self._release(conn, ok)

    def _acquire(self) -> sqlite3.Connection:
        with self._pool_lock:
            if self._idle:
                return self._idle.pop()
        conn = self._open(self.path)
        with self._pool_lock:
            if self._closed:
                conn.close()
                raise StorageError(f"the saver on {self.where} is closed; open a new one")
            self._all.append(conn)
        return conn

    def _release(self, conn: sqlite3.Connection, reusable: bool) -> None:
        with self._pool_lock:
            if reusable and not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
            if conn in self._all:
                self._all.remove(conn)
        conn.close()

    def close(self) -> None:
        """Close every connection this manager opened (a caller's connection stays open)."""
        with self._pool_lock:
            self._closed = True
            conns, self._all, self._idle = self._all, [], []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        if self._shared is not None:
            with self._shared_lock:
                if self.owns_connection:
                    with contextlib.suppress(sqlite3.Error):
                        self._shared.close()

    @property
    def closed(self) -> bool:
        return self._closed


def _connection_path(conn: sqlite3.Connection) -> str:
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
    except sqlite3.Error:
        return ""
    for _, name, file in rows:
        if name == "main":
            return str(file or MEMORY)
    return ""

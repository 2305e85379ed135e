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

Closing: a connection is never closed while an operation uses it (closing a
connection another thread is executing on crashes the process). The pool
knows which connections are checked out; :meth:`ConnectionManager.close`
closes the idle ones, waits for the others, interrupts statements still
running after :data:`CLOSE_GRACE` seconds, and leaves any connection still in
use to be closed by its operation when that ends.

Read-only (``read_only=True``): files are opened with ``mode=ro``, so SQLite
itself refuses every write, the journal mode and the schema version included.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

from tether.errors import (
    ConfigError,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
    TetherError,
)

__all__ = [
    "CLOSE_GRACE",
    "MEMORY",
    "BadJSON",
    "ConnectionManager",
    "Synchronous",
    "translate_errors",
]

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


class BadJSON(StorageError):
    """SQLite's JSON functions met a stored text that is not JSON (a damaged row).

    The saver catches it and names the row (:func:`tether.backends.sqlite._rows.find_bad_json`);
    it reaches a caller only when no row can be named.
    """


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

    With :meth:`ConnectionManager.fetch`'s inline copy of it (the read fast
    path, which calls :func:`_translate` itself), the only place the backend
    catches driver errors; the original is kept as ``__cause__``.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise _translate(exc, where) from exc


def _translate(exc: sqlite3.Error, where: str) -> TetherError:
    """By SQLite's result code (``sqlite_errorname``, Python 3.11+), not by message text.

    Two conditions have no code of their own and are told by their text:
    SQLite's JSON functions report a non-JSON column as a plain SQLITE_ERROR
    ("malformed JSON"), and the sqlite3 module reports a closed connection as a
    ProgrammingError with no result code.
    """
    name = _error_name(exc)
    text = str(exc)
    if name in _BUSY_NAMES:
        return StorageTimeout(
            f"SQLite database {where} stayed locked by another process past busy_timeout "
            f"({text}); retry, or raise busy_timeout"
        )
    if name == "SQLITE_INTERRUPT":
        return StorageError(
            f"an operation on {where} was interrupted: the saver was closed while it ran "
            f"({text}); open a new saver"
        )
    if name == "SQLITE_ERROR" and "malformed JSON" in text:
        # A JSON column of one row, not the database: the saver finds the row.
        return BadJSON(f"a stored JSON column in {where} is not JSON ({text})")
    if name in _CORRUPT_NAMES:
        return StorageError(
            f"{where} is not a usable SQLite database ({text}); tether did not write to it. "
            "Restore it from a backup or point tether at another file"
        )
    if name == "SQLITE_CANTOPEN":
        return StorageUnavailable(
            f"cannot open SQLite database {where} ({text}); check that the directory "
            "exists and is writable"
        )
    if name in ("SQLITE_FULL", "SQLITE_IOERR"):
        return StorageUnavailable(f"I/O error on SQLite database {where}: {text}")
    if name == "SQLITE_READONLY":
        return StorageError(f"SQLite database {where} is read-only ({text})")
    if isinstance(exc, sqlite3.ProgrammingError) and "closed" in text:
        return StorageError(f"the saver on {where} is closed; open a new one")
    return StorageError(f"SQLite error on {where}: {text}")


#: Seconds :meth:`ConnectionManager.close` waits for operations in flight to
#: end by themselves, and again after interrupting them (see ``close``).
CLOSE_GRACE = 5.0


class ConnectionManager:
    """Hands out connections to one database; see the module docstring.

    Args:
        target: a path, ``":memory:"``, or an open ``sqlite3.Connection``.
        synchronous: ``"NORMAL"`` or ``"FULL"`` (see the module docstring).
        busy_timeout: seconds to wait for another process's write lock.
        max_idle: idle pooled connections kept open (file databases).
        read_only: open a file with ``mode=ro`` (SQLite refuses every write).
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | sqlite3.Connection,
        *,
        synchronous: Synchronous = "NORMAL",
        busy_timeout: float = 30.0,
        max_idle: int = 8,
        read_only: bool = False,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float):
            raise ConfigError(f"busy_timeout must be a number of seconds, got {busy_timeout!r}")
        if busy_timeout < 0:
            raise ConfigError(f"busy_timeout must be >= 0 seconds, got {busy_timeout!r}")
        if not isinstance(read_only, bool):
            raise ConfigError(f"read_only must be True or False, got {read_only!r}")
        self.synchronous = synchronous
        self.busy_timeout_ms = int(busy_timeout * 1000)
        self.read_only = read_only
        self._max_idle = max_idle
        # The pool: idle connections, and those checked out by an operation
        # (never closed by anyone but the thread that returns them, see close).
        self._idle: list[sqlite3.Connection] = []
        self._busy: set[sqlite3.Connection] = set()
        self._opening = 0
        self._pool_lock = threading.Lock()
        self._pool_changed = threading.Condition(self._pool_lock)
        self._closed = False
        self._shared: sqlite3.Connection | None = None
        self._shared_lock = threading.RLock()
        self._shared_closed = False
        self._shared_depth = 0  # nested connection() blocks of the thread holding it
        self.owns_connection = True
        if isinstance(target, sqlite3.Connection):
            self.path: str = _connection_path(target)
            self.where = self.path or "<connection>"
            self._shared = target
            self.owns_connection = False
            if not read_only:  # a read-only saver leaves the caller's connection as it is
                self._configure(target)
            self.is_file = False
            lock_key = f"conn:{id(target)}"
        else:
            raw = os.fspath(target)
            if not isinstance(raw, str):
                raise ConfigError(f"database path must be a str or Path, got {target!r}")
            if raw == MEMORY or raw == "":
                if read_only:
                    raise ConfigError(
                        "read_only=True needs a database file; a private ':memory:' "
                        "database is empty"
                    )
                self.path = MEMORY
                self.where = MEMORY
                self._shared = self._open(MEMORY)
                self.is_file = False
                lock_key = f"mem:{id(self)}"
            else:
                self.path = str(Path(raw).expanduser().absolute())
                self.where = self.path
                self.is_file = True
                if read_only and not Path(self.path).is_file():
                    raise ConfigError(
                        f"no SQLite database at {self.path}: no such file (read_only=True "
                        "opens an existing store and never creates one)"
                    )
                lock_key = f"file:{os.path.realpath(self.path)}"
        self.write_lock = _write_lock_for(lock_key) if self.is_file else self._shared_lock

    # --- opening -----------------------------------------------------------------

    def _open(self, path: str) -> sqlite3.Connection:
        with translate_errors(self.where if hasattr(self, "where") else path):
            # isolation_level=None: autocommit; tether writes BEGIN IMMEDIATE
            # itself. check_same_thread=False: a pooled connection is used by
            # one thread at a time, but not always the thread that opened it.
            if self.read_only:
                # mode=ro: SQLite itself refuses every write, the journal mode
                # and the schema version included.
                uri = Path(path).as_uri() + "?mode=ro"
                conn = sqlite3.connect(
                    uri, uri=True, isolation_level=None, check_same_thread=False, timeout=0
                )
            else:
                conn = sqlite3.connect(
                    path, isolation_level=None, check_same_thread=False, timeout=0
                )
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

    def closed_error(self) -> StorageError:
        """The error of every operation that starts after :meth:`close`."""
        return StorageError(f"the saver on {self.where} is closed; open a new one")

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for one operation; returned to the pool afterwards."""
        if self._closed:
            raise self.closed_error()
        if self._shared is not None:
            with self._shared_lock:
                if self._closed:
                    raise self.closed_error()
                self._shared_depth += 1
                try:
                    yield self._shared
                finally:
                    self._shared_depth -= 1
                    if self._is_closed() and not self._shared_depth:
                        # close() gave up waiting for this operation: the
                        # connection is closed now that nobody uses it.
                        self._close_shared()
            return
        conn = self._acquire()
        ok = False
        try:
            yield conn
            ok = not conn.in_transaction
        finally:
            self._release(conn, ok)

    def fetch(
        self,
        sql: str,
        args: Sequence[Any],
        on_bad_json: Callable[[sqlite3.Connection, BadJSON], None],
    ) -> list[Any]:
        """The rows of one statement (its own snapshot) on a connection of the pool.

        What ``with connection(): with translate_errors(): execute().fetchall()``
        does, without the two generator context managers: a read of a tiny
        state is a few statements' worth of Python, and they were a sixth of
        it (#19). ``on_bad_json(conn, error)`` is called, on the connection
        the statement ran on, when a stored JSON column broke it (it names the
        row by raising); the error is raised if it returns.
        """
        if self._shared is not None or self._closed:
            with self.connection() as conn:
                try:
                    with translate_errors(self.where):
                        return conn.execute(sql, args).fetchall()
                except BadJSON as exc:
                    on_bad_json(conn, exc)
                    raise
        conn = self._acquire()
        ok = False
        try:
            try:
                rows = conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                err = _translate(exc, self.where)
                if isinstance(err, BadJSON):
                    on_bad_json(conn, err)
                raise err from exc
            ok = not conn.in_transaction
            return rows
        finally:
            self._release(conn, ok)

    def _acquire(self) -> sqlite3.Connection:
        with self._pool_lock:
            if self._closed:
                raise self.closed_error()
            if self._idle:
                conn = self._idle.pop()
                self._busy.add(conn)
                return conn
            self._opening += 1
        try:
            conn = self._open(self.path)
        except BaseException:
            with self._pool_lock:
                self._opening -= 1
                self._notify_close()
            raise
        with self._pool_lock:
            self._opening -= 1
            self._notify_close()
            if not self._is_closed():  # close() may have run while this one opened
                self._busy.add(conn)
                return conn
        conn.close()  # nobody else has seen it
        raise self.closed_error()

    def _release(self, conn: sqlite3.Connection, reusable: bool) -> None:
        with self._pool_lock:
            self._busy.discard(conn)
            keep = reusable and not self._closed and len(self._idle) < self._max_idle
            if keep:
                self._idle.append(conn)
            self._notify_close()
        if not keep:
            # Out of _busy and _idle: no other thread can reach it any more.
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def close(self) -> None:
        """Close every connection this manager opened (a caller's connection stays open).

        Operations that start afterwards raise :class:`~tether.errors.StorageError`.
        A connection is never closed while an operation uses it (closing a
        connection another thread is executing on crashes the process):
        ``close`` waits up to :data:`CLOSE_GRACE` seconds for operations in
        flight to end, then interrupts the statements still running
        (``sqlite3_interrupt``, made for this: it frees nothing, the statement
        fails and its operation raises ``StorageError``) and waits as long
        again. A connection still in use after that is left open and closed
        by its operation when it ends.
        """
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        if self._shared is not None:
            self._close_shared_when_free()
            return
        with self._pool_lock:
            if self._pool_changed.wait_for(self._pool_idle, CLOSE_GRACE):
                return
            for conn in self._busy:
                # Under the pool lock: the conn cannot be released and closed meanwhile.
                conn.interrupt()
            self._pool_changed.wait_for(self._pool_idle, CLOSE_GRACE)

    def _notify_close(self) -> None:
        """Wake a close() waiting for the pool (call holding the pool lock).

        Only close() waits, and only after setting ``_closed`` under this lock:
        before that nobody is waiting, and notifying costs every operation.
        """
        if self._closed:
            self._pool_changed.notify_all()

    def _pool_idle(self) -> bool:
        return not self._busy and not self._opening

    def _close_shared_when_free(self) -> None:
        assert self._shared is not None
        if not self._shared_lock.acquire(timeout=CLOSE_GRACE):
            # Safe on a connection in use by another thread; frees nothing.
            self._shared.interrupt()
            if not self._shared_lock.acquire(timeout=CLOSE_GRACE):
                return  # the operation closes it when it ends (connection())
        try:
            if not self._shared_depth:  # not called from inside an operation
                self._close_shared()
        finally:
            self._shared_lock.release()

    def _close_shared(self) -> None:
        """Close the shared connection if it is ours (call holding ``_shared_lock``)."""
        if self._shared is not None and self.owns_connection and not self._shared_closed:
            self._shared_closed = True
            with contextlib.suppress(sqlite3.Error):
                self._shared.close()

    def _is_closed(self) -> bool:
        # A call, not the attribute: another thread's close() changes it meanwhile.
        return self._closed

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

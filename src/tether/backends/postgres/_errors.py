"""psycopg errors -> tether errors, in one place (chained with ``raise ... from``)."""

from __future__ import annotations

import os

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolClosed, PoolTimeout

from tether.errors import (
    ConfigError,
    ConflictError,
    StorageError,
    StorageTimeout,
    StorageUnavailable,
    TetherError,
)

__all__ = ["connect_failed", "is_retryable", "translate"]


# What the server says (no SQLSTATE reaches the client at connect time) when a
# connection is refused for its settings rather than for a passing condition.
_REFUSED_CONNECTION = (
    "does not exist",
    "password authentication failed",
    "no pg_hba.conf entry",
    "role is not permitted to log in",
)


def connect_failed(location: str, shown: str, exc: Exception) -> StorageUnavailable:
    """One line saying which server could not be reached, for a one-shot connection.

    A CLI command, an import or an export opens a connection of its own and has
    no pool to recover (issue #20.1c): the advice is the URL and the server, not
    a retry. ``location`` is the libpq URL or DSN (read for host, port and
    database); ``shown`` names the store in the message (its password hidden).
    """
    try:
        params = conninfo_to_dict(location)
    except psycopg.Error:  # the name was parsed once; show what can be shown
        params = {}
    env = os.environ
    host = params.get("host") or env.get("PGHOST") or "localhost"
    port = params.get("port") or env.get("PGPORT") or "5432"
    user = params.get("user") or env.get("PGUSER") or ""
    dbname = params.get("dbname") or env.get("PGDATABASE") or user or "(default)"
    reason = " ".join(str(exc).split())  # libpq's multi-line text on one line
    return StorageUnavailable(
        f"cannot connect to Postgres at host {host} port {port}, database {dbname} "
        f"({shown}): {reason}; check the URL and that the server is running"
    )


def is_retryable(exc: BaseException) -> bool:
    """Whether the connection was lost, so an idempotent operation may run once more.

    A timeout is not retried: the caller set the limit on purpose.
    """
    if isinstance(
        exc,
        PoolTimeout
        | PoolClosed
        | pg_errors.QueryCanceled
        | pg_errors.LockNotAvailable
        | pg_errors.ProgramLimitExceeded,
    ):
        return False
    return isinstance(exc, psycopg.OperationalError)


def translate(exc: psycopg.Error, what: str) -> TetherError:
    """The tether error for a driver error raised while doing ``what``."""
    if len(what) > 300:  # it may quote a (huge) thread id
        what = what[:300] + "..."
    detail = f"{type(exc).__name__}: {str(exc).strip()}"
    if isinstance(exc, PoolClosed):
        # The saver's own pool, closed by close() under an operation under way.
        return StorageError(f"{what}: the saver is closed ({detail}); open a new one")
    if isinstance(exc, PoolTimeout):
        return StorageTimeout(
            f"{what}: no Postgres connection free in time ({detail}); raise pool_size "
            "or the pool timeout, or run fewer concurrent operations"
        )
    if isinstance(exc, pg_errors.QueryCanceled):
        return StorageTimeout(
            f"{what}: Postgres cancelled the statement ({detail}); it ran past "
            "statement_timeout (raise the option) or was cancelled by an administrator"
        )
    if isinstance(exc, pg_errors.LockNotAvailable):
        return StorageTimeout(f"{what}: a lock was not granted in time ({detail})")
    if isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        return ConflictError(f"{what}: a concurrent transaction conflicted ({detail}); retry")
    if isinstance(exc, pg_errors.ProgramLimitExceeded):
        # An OperationalError subclass, but nothing failed: a value is larger
        # than Postgres can take, so the same call would fail again.
        return ConfigError(
            f"{what}: a value is too large for Postgres ({detail}); an index entry holds "
            "at most about 2,700 bytes: tether bounds the names and run_id it indexes, so "
            "look for an index of your own on a value this long (drop it, or index a hash)"
        )
    if isinstance(exc, pg_errors.UndefinedTable):
        return StorageError(
            f"{what}: the tether tables do not exist ({detail}); call saver.setup() once "
            "to create them"
        )
    if isinstance(exc, psycopg.OperationalError) and any(
        sign in detail for sign in _REFUSED_CONNECTION
    ):
        # Refused at connect time for a reason that a retry does not change.
        return StorageUnavailable(
            f"{what}: Postgres refused the connection ({detail}); check the database "
            "name, user and password in the DSN (and pg_hba.conf)"
        )
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StorageUnavailable(
            f"{what}: the Postgres connection failed ({detail}); retry, the pool "
            "replaces broken connections"
        )
    return StorageError(f"{what}: Postgres error ({detail})")

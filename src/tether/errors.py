"""The one exception tree of tether.

Every error tether raises on purpose derives from :class:`TetherError`. The
groups follow what the caller does next:

* fix the input: :class:`ConfigError` (also a :class:`ValueError`);
* retry: :class:`TransientError` and everything under it --
  :class:`ConflictError`, :class:`ThreadBusyError` (and its
  :class:`LeaseLostError`), :class:`StorageUnavailable`, :class:`StorageTimeout`.
  ``except TransientError`` is the one clause a retry loop needs;
* upgrade: :class:`SchemaVersionError`, :class:`MigrationError`;
* look at the data: :class:`DecodeError`, :class:`EncodeError`,
  :class:`StorageError` (damaged or unusable data: retrying gives the same
  answer).

Driver errors (sqlite3, psycopg) are translated in one place per backend and
chained with ``raise ... from``, so the original is always in ``__cause__``.
A layer that knows more about where an error happened adds it with
:meth:`TetherError.add_context` (a note, :pep:`678`), never by raising a new
exception of the same type: the type and its attributes stay as raised.

Interrupts are control flow, not errors, and live in :mod:`tether.graph`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CheckpointNotFound",
    "ConfigError",
    "ConflictError",
    "DecodeError",
    "EncodeError",
    "LeaseLostError",
    "MigrationError",
    "SchemaVersionError",
    "StorageError",
    "StorageTimeout",
    "StorageUnavailable",
    "TetherError",
    "ThreadBusyError",
    "TransientError",
    "describe",
]


class TetherError(Exception):
    """Root of every exception tether raises on purpose."""

    def add_context(self, text: str) -> TetherError:
        """Say where the error happened (``importing thread 't1'``); returns self.

        A note (:pep:`678`): tracebacks show it under the message, and
        :func:`describe` joins it to the message in one line.
        """
        self.add_note(text)
        return self


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)`` for a message; a longer string as its first ``limit`` characters
    and its size (``'abc...'... (2,800 bytes)``), so that a kilobytes-long id does not
    fill the message it is quoted in."""
    if isinstance(value, str) and len(value) > limit:
        size = len(value.encode("utf-8", "surrogatepass"))
        return f"{value[:limit]!r}... ({size:,} bytes)"
    return repr(value)


def describe(exc: BaseException) -> str:
    """The message of ``exc`` with its context notes, on one line (for the CLI)."""
    notes = [" ".join(str(n).split()) for n in getattr(exc, "__notes__", ())]
    return "; ".join([str(exc), *notes]) if notes else str(exc)


# --- fix the input ----------------------------------------------------------


class ConfigError(TetherError, ValueError):
    """A config, argument or option is wrong; the message says which and how to fix it."""


class CheckpointNotFound(ConfigError, LookupError):
    """An operation that needs an existing checkpoint was given an address that has none."""


# --- retry ------------------------------------------------------------------


class TransientError(TetherError):
    """A condition that passes: retrying the operation (or the run) may succeed."""


class ConflictError(TransientError):
    """A concurrent writer got there first; retrying the operation is safe."""


class ThreadBusyError(ConflictError):
    """Another process holds the lease of this thread (one writer per thread)."""

    def __init__(self, message: str, *, thread_id: str | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id


class LeaseLostError(ThreadBusyError):
    """The lease this process held on a thread ended before its block did.

    Its lock's connection was lost (a server restart, a failover,
    ``pg_terminate_backend``, ``idle_in_transaction_session_timeout``, a network
    cut), so another run may have taken the thread over. A write refused with
    this error stored nothing. Stop the run, take the lease again and resume
    from the thread's latest checkpoint.

    Attributes:
        thread_id: the thread.
        epoch: the lease's epoch (its fencing token) when this process took it.
        current_epoch: the thread's epoch when the loss was found (``None`` if
            unknown); above ``epoch`` when another holder has taken the lease since.
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str | None = None,
        epoch: int | None = None,
        current_epoch: int | None = None,
    ) -> None:
        super().__init__(message, thread_id=thread_id)
        self.epoch = epoch
        self.current_epoch = current_epoch


class StorageUnavailable(TransientError):
    """The storage could not be reached or dropped the connection; retry later."""


class StorageTimeout(StorageUnavailable):
    """The storage did not answer in time (lock wait, statement timeout)."""


# --- upgrade ----------------------------------------------------------------


class SchemaVersionError(TetherError):
    """The store was written by a different (usually newer) tether schema."""

    def __init__(self, message: str, *, found: int, supported: int) -> None:
        super().__init__(message)
        self.found = found
        self.supported = supported


class MigrationError(TetherError):
    """A schema migration failed; the store was left at its previous version."""


# --- the data ---------------------------------------------------------------


class StorageError(TetherError):
    """The store holds something tether cannot use, or refuses it (a damaged row, a
    closed saver, a corrupt file): the same call gives the same answer."""


class DecodeError(TetherError):
    """Stored bytes could not be turned back into a value.

    The message names where: the thread, checkpoint and channel when a backend
    knows them, and the path inside the value (``at $.messages[3].content``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str = "$",
        type_name: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        self.reason = message
        self.path = path
        self.type_name = type_name
        self.context: dict[str, Any] = dict(context or {})
        super().__init__(self._render())

    def _render(self) -> str:
        where = f" at `{self.path}`" if self.path and self.path != "$" else ""
        ctx = ", ".join(f"{k}={shown(v, 100)}" for k, v in self.context.items() if v is not None)
        return f"{self.reason}{where}" + (f" ({ctx})" if ctx else "")

    def with_context(self, **context: Any) -> DecodeError:
        """Add where the bytes came from (thread, checkpoint, channel); returns self."""
        for key, value in context.items():
            self.context.setdefault(key, value)
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class EncodeError(TetherError, TypeError):
    """A value cannot be serialized; the message names its type and path."""

    def __init__(self, message: str, *, path: str = "$") -> None:
        self.reason = message
        self.path = path
        where = f" at `{path}`" if path and path != "$" else ""
        super().__init__(f"{message}{where}")

"""The SQLite drop-ins: ``langgraph.checkpoint.sqlite``'s two savers backed by tether's.

``SqliteSaver(conn)`` and ``SqliteSaver.from_conn_string(path)`` as in the
official package; ``AsyncSqliteSaver.from_conn_string(path)`` is an async
context manager and its ``setup()`` is awaited. Both are the same saver
underneath (the stdlib driver, async calls in worker threads), so either one
serves sync and async graphs. Unlike the official savers, tether creates its
schema when the saver opens (``setup()`` is there, idempotent) and keeps
channel values apart from checkpoints, written once per version.

tether's tables have names of their own (``tether_checkpoints``, ...), so the
file of an official saver can be opened as it is. If its official tables hold
checkpoints and tether's hold none, opening raises a ``ConfigError`` with the
``tether import PATH PATH`` that brings the threads over, unless
``import_official=True`` (import them now) or ``False`` (keep both histories
apart in the file).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Collection, Iterator
from typing import Any

from tether.backends.sqlite import SqliteSaver as _TetherSqliteSaver
from tether.errors import ConfigError
from tether.langgraph._adapter import TetherLangGraphSaver
from tether.langgraph._serde import langgraph_serializer
from tether.serde.base import SerializerProtocol

__all__ = ["AsyncSqliteSaver", "SqliteSaver"]

_Target = str | os.PathLike[str] | sqlite3.Connection


class SqliteSaver(TetherLangGraphSaver):
    """LangGraph checkpointer in one SQLite file, for sync and async graphs.

    Args:
        conn: an open ``sqlite3.Connection`` (as the official saver takes;
            left open by :meth:`close`), a file path, or ``":memory:"``. A
            connection is used from worker threads, so open it with
            ``check_same_thread=False``.
        serde: the serializer; defaults to tether's strict serializer with
            LangGraph's value types allowed (plus ``allowlist``).
        allowlist: extra ``(module, name)`` types the graphs store.
        import_official: a file holding LangGraph's own SqliteSaver tables
            with checkpoints, and no tether checkpoints: ``None`` (default)
            raises :class:`~tether.errors.ConfigError` with the command that
            imports them (``tether import PATH PATH``); ``True`` imports them
            now; ``False`` leaves them alone, beside tether's tables.
        **options: :class:`tether.backends.sqlite.SqliteSaver` options
            (``synchronous``, ``busy_timeout``, ``compress_threshold``,
            ``read_only``, ``encryption``: values, writes and metadata sealed
            with AES-256-GCM, see ``docs/encryption.md``).

    Example:
        >>> with SqliteSaver.from_conn_string("chat.db") as saver:  # doctest: +SKIP
        ...     graph = builder.compile(checkpointer=saver)
    """

    saver: _TetherSqliteSaver

    def __init__(
        self,
        conn: _Target,
        *,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        import_official: bool | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(conn, str | os.PathLike | sqlite3.Connection):
            raise ConfigError(
                f"{type(self).__name__} needs a sqlite3.Connection or a file path, got "
                f"{type(conn).__module__}.{type(conn).__name__}; for an aiosqlite connection "
                f"pass its database path instead ({type(self).__name__}.from_conn_string(path))"
            )
        serde = serde if serde is not None else langgraph_serializer(allowlist)
        super().__init__(
            _TetherSqliteSaver(conn, serde=serde, import_official=import_official, **options)
        )

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        import_official: bool | None = None,
        **options: Any,
    ) -> Iterator[SqliteSaver]:
        """A saver on the file ``conn_string`` (or ``":memory:"``), closed when the block ends.

        Args:
            conn_string: the database file (a path or ``sqlite:///path``, the
                form ``tether`` commands print), created with its schema if
                missing.
            serde: as for the constructor.
            allowlist: as for the constructor.
            import_official: as for the constructor.
            **options: as for the constructor.
        """
        saver = cls(
            conn_string,
            serde=serde,
            allowlist=allowlist,
            import_official=import_official,
            **options,
        )
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create or migrate the schema; idempotent (opening the saver already did)."""
        self.saver.setup()

    def close(self) -> None:
        """Close the connections the saver opened (not a connection it was given)."""
        self.saver.close()


class AsyncSqliteSaver(SqliteSaver):
    """:class:`SqliteSaver` opened the async way: ``async with``, ``await setup()``.

    Example:
        >>> async with AsyncSqliteSaver.from_conn_string("chat.db") as saver:  # doctest: +SKIP
        ...     graph = builder.compile(checkpointer=saver)
    """

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        import_official: bool | None = None,
        **options: Any,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on the file ``conn_string``, closed when the block ends.

        Args: as for :meth:`SqliteSaver.from_conn_string`.
        """
        # Opening creates or checks the schema (and may import the official
        # tables): file I/O, kept off the event loop.
        saver = await asyncio.to_thread(
            lambda: cls(
                conn_string,
                serde=serde,
                allowlist=allowlist,
                import_official=import_official,
                **options,
            )
        )
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Create or migrate the schema; idempotent (opening the saver already did)."""
        await self.saver.asetup()

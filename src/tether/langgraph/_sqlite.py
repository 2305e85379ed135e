"""The SQLite drop-ins: ``langgraph.checkpoint.sqlite``'s two savers backed by tether's.

``SqliteSaver(conn)`` and ``SqliteSaver.from_conn_string(path)`` as in the
official package; ``AsyncSqliteSaver.from_conn_string(path)`` is an async
context manager and its ``setup()`` is awaited. Both are the same saver
underneath (the stdlib driver, async calls in worker threads), so either one
serves sync and async graphs. Unlike the official savers, tether creates its
schema when the saver opens (``setup()`` is there, idempotent) and keeps
channel values apart from checkpoints, written once per version.

The file holds tether's tables, not the official saver's: give it a file of
its own and bring old threads over with ``tether import``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Collection, Iterator
from typing import Any, Self

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
        **options: :class:`tether.backends.sqlite.SqliteSaver` options
            (``synchronous``, ``busy_timeout``, ``compress_threshold``).

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
        **options: Any,
    ) -> None:
        if not isinstance(conn, str | os.PathLike | sqlite3.Connection):
            raise ConfigError(
                f"{type(self).__name__} needs a sqlite3.Connection or a file path, got "
                f"{type(conn).__module__}.{type(conn).__name__}; for an aiosqlite connection "
                f"pass its database path instead ({type(self).__name__}.from_conn_string(path))"
            )
        serde = serde if serde is not None else langgraph_serializer(allowlist)
        super().__init__(_TetherSqliteSaver(conn, serde=serde, **options))

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        **options: Any,
    ) -> Iterator[SqliteSaver]:
        """A saver on the file ``conn_string`` (or ``":memory:"``), closed when the block ends.

        Args:
            conn_string: the database file, created with its schema if missing.
            serde: as for the constructor.
            allowlist: as for the constructor.
            **options: as for the constructor.
        """
        saver = cls(conn_string, serde=serde, allowlist=allowlist, **options)
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create or migrate the schema; idempotent (opening the saver already did)."""
        self.saver.setup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close the connections the saver opened (not a connection it was given)."""
        self.saver.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        await self.saver.aclose()


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
        **options: Any,
    ) -> AsyncIterator[AsyncSqliteSaver]:
        """A saver on the file ``conn_string``, closed when the block ends.

        Args: as for :meth:`SqliteSaver.from_conn_string`.
        """
        # Opening creates or checks the schema: file I/O, kept off the event loop.
        saver = await asyncio.to_thread(
            lambda: cls(conn_string, serde=serde, allowlist=allowlist, **options)
        )
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Create or migrate the schema; idempotent (opening the saver already did)."""
        await self.saver.asetup()

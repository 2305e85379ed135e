"""The Postgres drop-ins: ``langgraph.checkpoint.postgres``'s two savers backed by tether's.

``PostgresSaver`` and ``AsyncPostgresSaver`` take what the official classes
take (a psycopg connection or pool, ``from_conn_string(url)`` as a context
manager, ``setup()``), plus tether's options as keywords. Both are the same
saver underneath; they differ in how they are opened and closed:

* ``from_conn_string`` (either class) gives a saver that owns its pools and
  serves sync *and* async graphs: a sync pool, and an async pool per event
  loop, each opened on first use. Either class closes them all on exit (an
  async pool on its own loop).
* Built from a sync ``Connection``/``ConnectionPool``, async calls run the
  sync methods in a worker thread. Built from an ``AsyncConnection``/
  ``AsyncConnectionPool``, sync calls raise :class:`~tether.errors.ConfigError`
  rather than block on the event loop (the deadlock of the official async
  saver's sync bridge); use ``from_conn_string`` to serve both.

The tables are tether's own (``tether_checkpoints``, ``tether_blobs``,
``tether_writes``, ``tether_migrations``; blobs apart, written once per
version), so they may share a schema with the official saver's tables
without either program seeing the other's rows. Switching a program over:
``setup()`` on a schema holding the official store's checkpoints and no
tether data raises :class:`~tether.errors.ConfigError` with the ``tether
import`` command that brings the threads over, unless ``import_official=True``
(import them in ``setup()``) or ``import_official=False`` (keep both).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Iterator
from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tether.backends.postgres import PostgresSaver as _TetherPostgresSaver
from tether.backends.postgres._async import AsyncLease
from tether.backends.postgres._sync import Lease
from tether.langgraph._adapter import TetherLangGraphSaver
from tether.langgraph._serde import langgraph_serializer
from tether.serde.base import SerializerProtocol

__all__ = ["AsyncPostgresSaver", "PostgresSaver"]

_Conn = Connection[Any] | ConnectionPool[Any] | AsyncConnection[Any] | AsyncConnectionPool[Any]


def _serde(
    serde: SerializerProtocol | None, allowlist: Collection[tuple[str, ...]]
) -> SerializerProtocol:
    return serde if serde is not None else langgraph_serializer(allowlist)


class PostgresSaver(TetherLangGraphSaver):
    """LangGraph checkpointer in Postgres, for sync and async graphs.

    Args:
        conn: a psycopg ``Connection`` or ``ConnectionPool`` (as the official
            saver takes; an ``AsyncConnection``/``AsyncConnectionPool`` is
            accepted too, see the module doc). The saver never closes it. A
            connection should be in autocommit mode; its row factory does not
            matter.
        pipe: accepted for the official signature: when given, every
            operation runs in pipeline mode (tether opens its own pipeline
            block per operation on ``conn``).
        serde: the serializer; defaults to tether's strict serializer with
            LangGraph's value types allowed (plus ``allowlist``).
        allowlist: extra ``(module, name)`` types the graphs store.
        import_official: what ``setup()`` does with LangGraph's official
            store in the same schema when tether's tables are empty: ``None``
            raises a :class:`~tether.errors.ConfigError` with the ``tether
            import`` command, ``True`` imports its threads, ``False`` leaves
            it alone.
        **options: :class:`tether.backends.postgres.PostgresSaver` options
            (``schema``, ``inline_primitives``, ``page_size``,
            ``compress_threshold``, ``prepare_threshold``, ``group_commit``, ``encryption``:
            values, writes and metadata sealed with AES-256-GCM, see
            ``docs/encryption.md``).

    Example:
        >>> with PostgresSaver.from_conn_string(url) as saver:  # doctest: +SKIP
        ...     saver.setup()
        ...     graph = builder.compile(checkpointer=saver)
    """

    saver: _TetherPostgresSaver

    def __init__(
        self,
        conn: _Conn,
        pipe: object | None = None,
        serde: SerializerProtocol | None = None,
        *,
        allowlist: Collection[tuple[str, ...]] = (),
        import_official: bool | None = None,
        **options: Any,
    ) -> None:
        options.setdefault("pipeline", pipe is not None)
        saver = _TetherPostgresSaver(
            conn, serde=_serde(serde, allowlist), import_official=import_official, **options
        )
        super().__init__(saver)

    @classmethod
    def _open(
        cls,
        conn_string: str,
        pipeline: bool,
        serde: SerializerProtocol | None,
        allowlist: Collection[tuple[str, ...]],
        import_official: bool | None,
        options: dict[str, Any],
    ) -> Any:
        saver = _TetherPostgresSaver.from_conn_string(
            conn_string,
            pipeline=pipeline,
            serde=_serde(serde, allowlist),
            import_official=import_official,
            **options,
        )
        # The wrapper of a saver that owns its pools: skip __init__, which builds one.
        self = cls.__new__(cls)
        TetherLangGraphSaver.__init__(self, saver)
        return self

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        import_official: bool | None = None,
        **options: Any,
    ) -> Iterator[PostgresSaver]:
        """A saver owning its connection pools, closed when the block ends.

        Args:
            conn_string: a libpq URL or DSN; a URL may end in ``?schema=NAME``
                (the store names the ``tether`` CLI prints).
            pipeline: run each operation in pipeline mode.
            serde: as for the constructor.
            allowlist: as for the constructor.
            import_official: as for the constructor.
            **options: :meth:`tether.backends.postgres.PostgresSaver.from_conn_string`
                options (``pool_size``, ``statement_timeout``, ``schema``, ...).
        """
        saver: PostgresSaver = cls._open(
            conn_string, pipeline, serde, allowlist, import_official, options
        )
        try:
            yield saver
        finally:
            saver.close()

    def setup(self) -> None:
        """Create or migrate tether's tables; safe to call from many processes at once.

        Raises:
            ConfigError: the schema holds LangGraph's official store with
                checkpoints and tether's tables none, and ``import_official``
                was not given (the message has the ``tether import`` command).
        """
        self.saver.setup()

    def lease(
        self, thread_id: str, *, wait: bool = False, timeout: float | None = None
    ) -> contextlib.AbstractContextManager[Lease]:
        """One writer per thread across processes and machines (see tether's ``lease``).

        Wrap each run of a graph on ``thread_id`` in it; a second run elsewhere
        gets :class:`~tether.errors.ThreadBusyError` (or waits, with ``wait``).
        If the lease is lost while the run goes on (the server dropped its lock
        and another run took the thread), the graph's next checkpoint write
        raises :class:`~tether.errors.LeaseLostError` and stores nothing; the
        block gives ``lease.is_held()`` and ``lease.check()`` for long runs.
        """
        return self.saver.lease(thread_id, wait=wait, timeout=timeout)

    def alease(
        self, thread_id: str, *, wait: bool = False, timeout: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[AsyncLease]:
        """Async :meth:`lease` (``async with saver.alease(thread_id): ...``)."""
        return self.saver.alease(thread_id, wait=wait, timeout=timeout)

    def close(self) -> None:
        """Close the saver (every later call raises StorageError) and the pools it owns.

        Resources it was given stay open. The sync pool closes at once; an
        async pool (one per event loop that ran async graphs on this saver) is
        closed on its loop: scheduled there when the loop is running (this
        one included: at the caller's next ``await``); ``await aclose()``
        waits for the running loop's.
        """
        self.saver.close()

    async def aclose(self) -> None:
        """Close the saver and every pool it owns, awaiting the running loop's."""
        await self.saver.aclose()


class AsyncPostgresSaver(PostgresSaver):
    """:class:`PostgresSaver` opened the async way: ``async with``, ``await setup()``.

    It serves sync graphs as well when opened with :meth:`from_conn_string`.

    Example:
        >>> async with AsyncPostgresSaver.from_conn_string(url) as saver:  # doctest: +SKIP
        ...     await saver.setup()
        ...     graph = builder.compile(checkpointer=saver)
    """

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        allowlist: Collection[tuple[str, ...]] = (),
        import_official: bool | None = None,
        **options: Any,
    ) -> AsyncIterator[AsyncPostgresSaver]:
        """A saver owning its connection pools, all closed when the block ends.

        Args: as for :meth:`PostgresSaver.from_conn_string`.
        """
        saver: AsyncPostgresSaver = cls._open(
            conn_string, pipeline, serde, allowlist, import_official, options
        )
        try:
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Create or migrate tether's tables; safe to call from many processes at once."""
        await self.saver.asetup()

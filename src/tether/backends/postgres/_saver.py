"""``PostgresSaver``: one class for sync and async callers over psycopg 3.

How sync and async callers are served depends on what the saver was built from:

============================  ==========================  ===========================
built from                    sync methods                async methods
============================  ==========================  ===========================
``from_conn_string(url)``     own ``ConnectionPool``      own ``AsyncConnectionPool``
``Connection``/``ConnectionPool``  that resource          the sync core in a worker
                                                          thread (never on the loop)
``AsyncConnection``/``AsyncConnectionPool``  ConfigError  that resource
============================  ==========================  ===========================

A URL-built saver creates each pool on first use (an async pool must be
opened inside a running event loop), so a purely async program never opens
the sync pool and vice versa. An async pool belongs to the event loop that
opened it, so each event loop gets one of its own (:mod:`._loops`): two
loops at once in two threads, or ``asyncio.run`` after ``asyncio.run``, each
use their own pool; those of loops that have ended are dropped. After
:meth:`PostgresSaver.close` (or ``aclose``) every method raises
:class:`~tether.errors.StorageError` instead of opening a pool again.

There is deliberately no sync-over-async bridge (a sync call waiting on the
event loop deadlocks when made from the loop thread): a saver built from an
async-only resource refuses sync calls with a
:class:`~tether.errors.ConfigError` that says what to do instead.

Pool sizing: each pool holds up to ``pool_size`` connections (default 10;
the sync pool and each event loop's async pool).
One operation uses one connection for one statement or transaction (``list``
one per page), so ``pool_size`` bounds the concurrent operations of this
process, not the number of threads served; size it to your worker
concurrency and keep ``processes x pool_size`` below the server's
``max_connections`` (or put PgBouncer in front, with
``prepare_threshold=None`` in transaction mode). A lease opens its own
connection on a URL-built saver; on a user pool it holds one pool connection
for as long as it is held.

Why one long module: it is one public class whose job is the table above,
lifecycle (pools per event loop, close) and leases; every operation itself is
a one-line call into the cores (``_async.py`` and its generated ``_sync.py``).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import shlex
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection, Connection
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tether.backends._bridge import ThreadedAsyncMixin
from tether.backends._delta import DEFAULT_MIN_BYTES, AppendTracker
from tether.backends._inline import inline_rule
from tether.backends._payload import DEFAULT_MAX_VALUE_SIZE
from tether.backends._sqlbase import BlobCodec
from tether.backends._threads import check_threads_args
from tether.backends.postgres._async import AsyncLease, _AsyncPostgresCore
from tether.backends.postgres._errors import translate
from tether.backends.postgres._leases import LeaseRegistry
from tether.backends.postgres._lifecycle import LifecycleMixin
from tether.backends.postgres._loops import LoopPools
from tether.backends.postgres._sql import Statements
from tether.backends.postgres._sync import Lease, _PostgresCore
from tether.backends.postgres._urls import (
    read_conn_string,
    source_params,
    store_url,
    with_schema,
)
from tether.base import BaseCheckpointSaver, PruneStrategy
from tether.checkpoint import (
    ChannelHistory,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    Config,
    StoredWrite,
)
from tether.contract import check_list_args
from tether.encryption import Encryption, encryption_from
from tether.errors import ConfigError, StorageError, TetherError
from tether.lifecycle import Retention
from tether.serde.base import SerializerProtocol, UntypedSerializerProtocol
from tether.threads import ThreadOrder, ThreadPage

__all__ = ["PostgresSaver"]

_Source = Connection[Any] | ConnectionPool[Any] | AsyncConnection[Any] | AsyncConnectionPool[Any]


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def _probe_kwargs(res: _Resources) -> dict[str, Any]:
    timeout = res.pool_args.get("timeout", 30.0)
    # libpq's connect_timeout is whole seconds, at least 2.
    return {"connect_timeout": max(2, min(10, int(timeout))), **res.connect_kwargs}


def _probe(res: _Resources) -> None:
    """One direct connection before a pool is made for ``res.url``.

    Without it a wrong database name, user or host surfaced only after
    ``pool_timeout`` seconds, as "no connection free in time" (the pool logs
    its failed attempts and keeps trying). With it the first call fails at
    once with the server's reason, as LangGraph's ``from_conn_string`` does;
    no pool is kept, so a later call tries again.
    """
    assert res.url is not None
    try:
        psycopg.connect(res.url, **_probe_kwargs(res)).close()
    except psycopg.OperationalError as exc:
        raise translate(exc, "connecting to Postgres") from exc


async def _aprobe(res: _Resources) -> None:
    """:func:`_probe` for the async pool."""
    assert res.url is not None
    try:
        conn = await AsyncConnection.connect(res.url, **_probe_kwargs(res))
    except psycopg.OperationalError as exc:
        raise translate(exc, "connecting to Postgres") from exc
    await conn.close()


def _statement_timeout_ms(seconds: float | None) -> int | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise ConfigError(
            f"statement_timeout must be a positive number of seconds, got {seconds!r}"
        )
    return max(1, round(seconds * 1000))


class _Resources:
    """Cores, pools and their locks; shared by ``with_allowlist`` clones of one saver."""

    def __init__(self) -> None:
        self.sync: _PostgresCore | None = None
        self.aio: _AsyncPostgresCore | None = None  # a caller's async connection or pool
        self.sync_lock = threading.Lock()
        self.owned_sync: ConnectionPool[Any] | None = None
        self.loops = LoopPools()  # a URL-built saver's async pools, one per event loop
        self.closed: StorageError | None = None
        self.url: str | None = None
        self.source: _Source | None = None
        self.pool_args: dict[str, Any] = {}
        self.connect_kwargs: dict[str, Any] = {}
        self.timeout_ms: int | None = None


class _ThreadedLease(AsyncLease):
    """The async face of a sync core's :class:`Lease` (a saver built from a sync resource)."""

    def __init__(self, lease: Lease) -> None:
        # No AsyncLease.__init__: there is no async core here, and every method
        # that would use one is overridden.
        self.thread_id = lease.thread_id
        self.epoch = lease.epoch
        self._lease = lease

    def __repr__(self) -> str:
        return repr(self._lease)

    async def is_held(self) -> bool:
        return await asyncio.to_thread(self._lease.is_held)

    async def check(self) -> None:
        await asyncio.to_thread(self._lease.check)


class PostgresSaver(LifecycleMixin, ThreadedAsyncMixin, BaseCheckpointSaver):
    """Checkpoints in Postgres, for sync and async callers (see the module doc).

    Args:
        conn: a psycopg ``Connection``, ``AsyncConnection``, ``ConnectionPool`` or
            ``AsyncConnectionPool``. The saver never closes what it is given. A
            connection should be in autocommit mode (otherwise every operation
            runs in an explicit transaction) and not be used by others meanwhile.
        serde: serializer for channel values and writes (default: the strict
            MessagePack one).
        schema: the Postgres schema holding tether's tables (created by
            :meth:`setup`); lets several stores share one database.
        pipeline: run each operation in psycopg pipeline mode.
        prepare_threshold: set on every connection used; ``None`` disables
            server-side prepared statements (PgBouncer in transaction mode).
            By default the connection's own setting is kept.
        inline_primitives: keep small str/int/float/bool/None channel values in
            the checkpoint row instead of blobs. ``None`` (default): when the
            serializer is tether's MessagePack one; inline values never pass
            through the serializer, so one of your own (that encrypts, say)
            sees every value unless this is ``True``. With ``encryption``
            each is sealed where it is kept, in the head.
        page_size: checkpoints per query when listing (memory stays bounded by it).
        compress_threshold: values serialized to at least this many bytes are
            stored zstd-compressed (level 3); ``None`` stores all plain.
        delta_threshold: lists serialized to at least this many bytes are
            stored as an immutable snapshot plus the tail appended since (a
            growing message history costs a few messages per step, not the
            whole history); ``None`` stores every value whole.
        import_official: what :meth:`setup` does when the schema holds
            LangGraph's official ``PostgresSaver`` store with checkpoints and
            tether's tables hold none (switching a program over): ``None``
            raises :class:`~tether.errors.ConfigError` naming the official
            tables and the ``tether import`` command that brings the threads
            over; ``True`` imports them (:func:`tether.importer.import_store`,
            once: only while tether's tables are empty); ``False`` leaves them
            alone, the two stores side by side. tether's tables
            (``tether_checkpoints``, ``tether_blobs``, ``tether_writes``,
            ``tether_migrations``) never share names with the official ones.
        max_value_size: the largest serialized value stored or read back, in
            bytes (1 GiB by default): a larger one is an
            :class:`~tether.errors.EncodeError` on write, and a stored one that
            declares more (a tampered compressed value) a
            :class:`~tether.errors.StorageError` on read.
        encryption: seal every value, pending write and metadata with
            AES-256-GCM (:class:`~tether.encryption.Encryption`, or
            ``{key_id: key}``); ``None`` (default): the keys of
            ``TETHER_KEYS`` if set; ``False``: off. See ``docs/encryption.md``.
        group_commit: when every connection the saver may use is busy,
            concurrent puts and put_writes wait in a queue and the next one to
            get a connection runs them all as one transaction (one commit, one
            round trip); each caller returns once its write committed, so
            durability is unchanged, and an idle saver runs each write alone.
            ``False``: one transaction per write, always.
        retention: the :class:`~tether.lifecycle.Retention` that :meth:`sweep`
            applies (``None``: keep everything). A sweep never deletes a
            leased thread, nor waits for a put in progress (it skips that
            thread until the next sweep).
        sweep_interval: run :meth:`sweep` every this many seconds in a
            background thread until :meth:`close` (``None``, the default: off);
            one process per schema sweeps at a time (:meth:`sweep_lock`).

    One writer per thread (S5.4): :meth:`lease` / :meth:`alease` hold a
    Postgres advisory lock on a thread for the length of a run (a transaction
    lock on a connection of the lease's own; a session lock when the saver was
    given a single connection), so two processes (on any machines sharing the
    database) never advance one thread at once. The second gets
    :class:`~tether.errors.ThreadBusyError` at once, or waits for the first
    (``wait=True``, with an optional ``timeout``). The lock is released when
    the block ends, and by the server when the holder's connection or process
    dies. The server may also drop it under a live holder (a restart,
    ``pg_terminate_backend``, ``idle_in_transaction_session_timeout``): each
    lease raises the thread's epoch in ``tether_leases``, and the saver's
    writes to a leased thread store only while that epoch is still theirs, so
    a holder whose lease was taken over gets
    :class:`~tether.errors.LeaseLostError` and writes nothing. The lease is
    advisory: only runs that take it are kept apart, so take it around every
    run of a thread::

        with saver.lease(thread_id) as lease:
            graph.invoke(inputs, {"configurable": {"thread_id": thread_id}})

    Schema (S5.3) and migrations: :meth:`setup` creates or migrates the tables
    under a per-schema advisory lock, so any number of processes may call it
    at once; index builds run ``CONCURRENTLY``, outside any transaction; a
    schema newer than this tether raises
    :class:`~tether.errors.SchemaVersionError` and nothing is written. Behind
    PgBouncer in transaction mode, run :meth:`setup` over a direct connection
    (as with any migration tool: its lock is session-level); every other
    method, leases included, works through it with ``prepare_threshold=None``.

    Faults: a connection lost mid-operation (server restart, failover,
    ``pg_terminate_backend``) aborts that operation's transaction, so no partial
    checkpoint is ever visible; every operation is idempotent and one on a pool
    is run once more on a fresh connection, then raises
    :class:`~tether.errors.StorageUnavailable`. ``statement_timeout`` and pool
    waits raise :class:`~tether.errors.StorageTimeout` (never retried).

    Example:
        >>> with PostgresSaver.from_conn_string(url) as saver:  # doctest: +SKIP
        ...     saver.setup()
        ...     saver.put(config, checkpoint, metadata, new_versions)
    """

    def __init__(
        self,
        conn: _Source | None = None,
        *,
        serde: SerializerProtocol | UntypedSerializerProtocol | None = None,
        schema: str = "public",
        pipeline: bool = False,
        prepare_threshold: int | None = _UNSET,
        inline_primitives: bool | None = None,
        page_size: int = 100,
        compress_threshold: int | None = 2048,
        delta_threshold: int | None = DEFAULT_MIN_BYTES,
        import_official: bool | None = None,
        max_value_size: int = DEFAULT_MAX_VALUE_SIZE,
        encryption: Encryption | Mapping[str, bytes | str] | bool | None = None,
        group_commit: bool = True,
        retention: Retention | None = None,
        sweep_interval: float | None = None,
    ) -> None:
        super().__init__(serde=serde, retention=retention)
        crypt = encryption_from(encryption)
        if import_official is not None and not isinstance(import_official, bool):
            raise ConfigError(
                f"import_official must be True, False or None, got {import_official!r}"
            )
        self._import_official = import_official
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ConfigError(f"page_size must be a positive int, got {page_size!r}")
        self._statements = Statements(schema)
        self._alist_page = page_size  # built from a sync resource: one page a thread hop
        self._options: dict[str, Any] = {
            "statements": self._statements,
            "pipeline": bool(pipeline),
            "prepare_threshold": False if prepare_threshold is _UNSET else prepare_threshold,
            "inline": inline_rule(self.serde, inline_primitives) is not None,
            "page_size": page_size,
            "codec": BlobCodec(
                compress_threshold=compress_threshold, max_value_size=max_value_size, crypt=crypt
            ),
            "appends": AppendTracker.create(delta_threshold),
            # One for the saver, its two cores and its with_allowlist clones.
            "leases": LeaseRegistry(),
            "group_commit": bool(group_commit),
        }
        self._res = _Resources()
        if conn is None:
            return  # from_conn_string fills in the URL, then starts the sweeper
        self._res.source = conn
        if isinstance(conn, Connection | ConnectionPool):
            self._res.sync = _PostgresCore(conn, **self._options)
        elif isinstance(conn, AsyncConnection | AsyncConnectionPool):
            self._res.aio = _AsyncPostgresCore(conn, **self._options)
        else:
            raise ConfigError(
                "PostgresSaver needs a psycopg Connection, AsyncConnection, ConnectionPool or "
                f"AsyncConnectionPool (or use PostgresSaver.from_conn_string), got "
                f"{type(conn).__name__}"
            )
        if sweep_interval is not None and self._res.sync is None:
            raise ConfigError(
                "sweep_interval runs sweep() in a background thread, which needs sync "
                "access: build the saver with PostgresSaver.from_conn_string(url), or from a "
                "sync Connection/ConnectionPool, or run `await saver.asweep()` from a task "
                "of your own"
            )
        self._start_sweeper(sweep_interval)

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pool_size: int = 10,
        min_size: int = 1,
        pool_timeout: float = 30.0,
        statement_timeout: float | None = None,
        prepare_threshold: int | None = 0,
        pipeline: bool = False,
        schema: str | None = None,
        serde: SerializerProtocol | UntypedSerializerProtocol | None = None,
        inline_primitives: bool | None = None,
        page_size: int = 100,
        compress_threshold: int | None = 2048,
        delta_threshold: int | None = DEFAULT_MIN_BYTES,
        connect_kwargs: Mapping[str, Any] | None = None,
        import_official: bool | None = None,
        max_value_size: int = DEFAULT_MAX_VALUE_SIZE,
        encryption: Encryption | Mapping[str, bytes | str] | bool | None = None,
        group_commit: bool = True,
        retention: Retention | None = None,
        sweep_interval: float | None = None,
    ) -> PostgresSaver:
        """A saver owning its pools (created on first use); close it or use it as a context manager.

        Args:
            conn_string: a libpq URL or DSN. A URL may name the schema as the
                CLI prints store names, ``postgresql://app@db/app?schema=NAME``.
            schema: the schema of tether's tables (default: the URL's
                ``?schema=``, else ``public``); naming another one than the
                URL does is a :class:`~tether.errors.ConfigError`.
            pool_size: maximum connections of each pool (sync, async).
            min_size: connections each pool keeps open.
            pool_timeout: seconds to wait for a free connection before
                :class:`~tether.errors.StorageTimeout`.
            statement_timeout: seconds a statement may run before the server
                cancels it (:class:`~tether.errors.StorageTimeout`); ``None`` =
                the server's setting. Applied with ``SET`` when a connection
                opens (in PgBouncer transaction mode, set it on the role instead).
            prepare_threshold: psycopg's: executions of a statement on a
                connection before it is prepared there. ``0`` (the default)
                prepares from the first: a pool's connections each met
                every statement five times unprepared (parsed and planned
                each time) first, a cost the first invokes of a process paid.
                ``None`` prepares nothing (PgBouncer transaction mode).
            connect_kwargs: extra keyword arguments for ``psycopg.connect``.
            Others: as for the constructor.
        """
        if not isinstance(conn_string, str) or not conn_string:
            raise ConfigError("from_conn_string needs a Postgres URL or DSN string")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ConfigError(f"pool_size must be a positive int, got {pool_size!r}")
        location, schema = read_conn_string(conn_string, schema)
        saver = cls(
            serde=serde,
            schema=schema,
            import_official=import_official,
            pipeline=pipeline,
            prepare_threshold=_UNSET,
            inline_primitives=inline_primitives,
            page_size=page_size,
            compress_threshold=compress_threshold,
            delta_threshold=delta_threshold,
            max_value_size=max_value_size,
            encryption=encryption,
            group_commit=group_commit,
            retention=retention,
        )
        res = saver._res
        res.url = location
        res.timeout_ms = _statement_timeout_ms(statement_timeout)
        res.connect_kwargs = {
            **dict(connect_kwargs or {}),
            "autocommit": True,
            "prepare_threshold": prepare_threshold,
        }
        if res.timeout_ms is not None:
            res.connect_kwargs["options"] = (
                res.connect_kwargs.get("options", "") + f" -c statement_timeout={res.timeout_ms}"
            ).strip()
        res.pool_args = {
            "min_size": min(min_size, pool_size),
            "max_size": pool_size,
            "timeout": pool_timeout,
        }
        saver._start_sweeper(sweep_interval)
        return saver

    # --- the two cores --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._res.closed is not None:
            raise StorageError(str(self._res.closed))

    def _sync_core(self) -> _PostgresCore:
        res = self._res
        self._check_open()
        if res.sync is not None:
            return res.sync
        if res.url is None:
            raise ConfigError(
                "this PostgresSaver was built from an async psycopg resource; call the async "
                "methods (aget_tuple, alist, aput, ...) or build the saver with "
                "PostgresSaver.from_conn_string(url), which serves sync and async callers"
            )
        with res.sync_lock:
            self._check_open()
            if res.sync is None:
                _probe(res)
                pool: ConnectionPool[Any] = ConnectionPool(
                    res.url,
                    kwargs=res.connect_kwargs,
                    open=True,
                    name="tether-sync",
                    **res.pool_args,
                )
                res.owned_sync = pool
                res.sync = _PostgresCore(
                    pool, conninfo=res.url, connect_kwargs=res.connect_kwargs, **self._options
                )
        return res.sync

    async def _aio_core(self) -> _AsyncPostgresCore | None:
        """The async core for the running event loop (``None``: serve async calls in threads)."""
        res = self._res
        self._check_open()
        if res.url is None:
            return res.aio
        url = res.url

        async def open_pool(
            configure: Callable[[AsyncConnection[Any]], Awaitable[None]],
        ) -> AsyncConnectionPool[Any]:
            await _aprobe(res)
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                url,
                kwargs=res.connect_kwargs,
                open=False,
                name="tether-async",
                configure=configure,
                **res.pool_args,
            )
            await pool.open()
            return pool

        def make_core(pool: AsyncConnectionPool[Any]) -> _AsyncPostgresCore:
            return _AsyncPostgresCore(
                pool, conninfo=url, connect_kwargs=res.connect_kwargs, **self._options
            )

        return await res.loops.core(open_pool, make_core, self._check_open)

    # --- lifecycle ------------------------------------------------------------------

    def _mark_closed(self) -> list[Any]:
        """Refuse every later call (clones too); the cores to refuse it in as well."""
        res = self._res
        if res.closed is None:
            res.closed = StorageError(
                f"the PostgresSaver on {self._store_name(password=False)} is closed; open a new one"
            )
        cores: list[Any] = [res.sync, res.aio, *res.loops.cores()]
        for core in cores:
            if core is not None:
                core.mark_closed(res.closed)
        return cores

    def close(self) -> None:
        """Close the saver: every later call raises :class:`~tether.errors.StorageError`.

        The pools it owns are closed: the sync one at once, each event loop's
        async one on its loop (scheduled there when that loop is running, this
        thread's included; awaited by :meth:`aclose`). Resources it was given
        stay open.
        """
        self._stop_sweeper()
        self._mark_closed()
        res = self._res
        with res.sync_lock:
            pool, res.owned_sync = res.owned_sync, None
        if pool is not None:
            pool.close()
        res.loops.close()

    async def aclose(self) -> None:
        """Close the saver as :meth:`close` does, awaiting the running loop's pool."""
        if self.sweeper is not None:
            await asyncio.to_thread(self._stop_sweeper)
        self._mark_closed()
        res = self._res
        await res.loops.aclose()
        with res.sync_lock:
            pool, res.owned_sync = res.owned_sync, None
        if pool is not None:
            await asyncio.to_thread(pool.close)

    def setup(self) -> None:
        """Create or migrate the schema; safe to call from many processes at once.

        Only ``tether_*`` objects are created or changed. When the schema also
        holds LangGraph's official store, ``import_official`` (see the
        constructor) decides what happens.

        Raises:
            ConfigError: the schema holds LangGraph's official store with
                checkpoints, tether's tables hold none, and ``import_official``
                is ``None`` (nothing was created).
            SchemaVersionError: the schema is newer than this tether (nothing changed).
            MigrationError: a migration failed (the store stays at its previous
                version), or an older tether shared this schema's tables with
                LangGraph's saver (the message says how to repair it).
        """
        self._sync_core().setup(
            refuse=self._refuse_official if self._import_official is None else None,
            import_official=self._import_official_threads if self._import_official else None,
            serde=self.serde,
        )

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        core = await self._aio_core()
        if core is None:
            await asyncio.to_thread(self.setup)
            return

        async def import_official() -> None:
            await asyncio.to_thread(self._import_official_threads)

        await core.asetup(
            refuse=self._refuse_official if self._import_official is None else None,
            import_official=import_official if self._import_official else None,
            serde=self.serde,
        )

    def _store_name(self, *, password: bool) -> str:
        """This saver's store as the CLI names it (``postgresql://...?schema=``)."""
        schema = self._statements.schema
        if self._res.url is not None:
            return with_schema(self._res.url, schema, password=password)
        return store_url(source_params(self._res.source), schema, password=password)

    def _refuse_official(self, tables: Sequence[str]) -> TetherError:
        name = shlex.quote(self._store_name(password=False))
        return ConfigError(
            f"schema {self._statements.schema!r} holds LangGraph's PostgresSaver store "
            f"({', '.join(tables)}) with checkpoints and tether's tables hold none: tether "
            "would start every thread afresh. Bring the threads over once with "
            f"`tether import {name} {name}` (safe to run again), or pass "
            "import_official=True to import them in setup(), or import_official=False to keep "
            "both stores side by side; nothing was created"
        )

    def _import_official_threads(self) -> None:
        """Import the official store of this schema into tether's tables (``import_official``).

        :func:`tether.importer.import_store` writes through a clone of this
        saver on a connection of its own, inside one transaction: the import
        is all or nothing, so a failed one leaves tether's tables empty and
        the next ``setup()`` tries again (the rule is "import while tether's
        tables are empty").
        """
        from tether.importer import import_store

        if self._res.url is not None:
            conninfo = self._res.url
        else:
            conninfo = make_conninfo(**source_params(self._res.source))
        try:
            conn = psycopg.connect(conninfo)
        except psycopg.OperationalError as exc:
            raise translate(exc, "import_official: connecting to Postgres") from exc
        with conn:
            clone = copy.copy(self)
            clone._res = _Resources()
            appends = self._options["appends"]
            options = {
                **self._options,
                # Its own tracker: snapshots of a rolled-back import must not be extended.
                "appends": AppendTracker.create(appends.min_bytes if appends else None),
            }
            clone._res.sync = _PostgresCore(conn, **options)
            try:
                # The core runs each operation in a savepoint of this transaction.
                with conn.transaction():
                    import_store(self._store_name(password=True), clone)
            except TetherError as exc:
                name = shlex.quote(self._store_name(password=False))
                exc.add_note(
                    "import_official: nothing was imported (one transaction); fix the cause "
                    f"and call setup() again, or run `tether import {name} {name}`"
                )
                raise
            except psycopg.Error as exc:
                raise translate(exc, "import_official: committing the import") from exc

    def lease(
        self, thread_id: str, *, wait: bool = False, timeout: float | None = None
    ) -> AbstractContextManager[Lease]:
        """Hold the one-writer-per-thread lease of ``thread_id`` for a run (S5.4).

        A Postgres advisory lock (held by a transaction on a connection of its
        own, or by the session on a caller's single connection), so it holds
        across processes and machines and is released when the block ends or
        the holder dies, plus a fencing token: taking the lease raises the
        thread's epoch, and while the block runs every ``put``/``put_writes``
        (and ``aput``/``aput_writes``) of the thread by this saver writes only
        if the epoch is still this lease's. So if the server drops the lock
        while the block runs (a restart, ``pg_terminate_backend``,
        ``idle_in_transaction_session_timeout``, a network cut) and another run
        takes the lease, this one's writes raise
        :class:`~tether.errors.LeaseLostError` and store nothing: two runs never
        both advance the thread. Only runs that take the lease are kept apart:
        take it around every run.

        The block gets a :class:`Lease`: ``lease.epoch``, ``lease.is_held()``
        (one query) and ``lease.check()`` (raises ``LeaseLostError``; a
        heartbeat for long holders).

        Args:
            thread_id: the thread to lease.
            wait: wait for the current holder instead of failing at once.
            timeout: with ``wait``, give up after this many seconds.

        Raises:
            ThreadBusyError: another holder has the lease (and ``wait`` is off
                or the timeout passed), or this saver holds it already.
            LeaseLostError: at the end of the block, when the lease was lost
                before the block ended (not raised over an exception already
                leaving the block).
        """
        return self._sync_core().lease(thread_id, wait=wait, timeout=timeout)

    def alease(
        self, thread_id: str, *, wait: bool = False, timeout: float | None = None
    ) -> AbstractAsyncContextManager[AsyncLease]:
        """Async :meth:`lease` (``async with saver.alease(thread_id) as lease: ...``).

        The :class:`AsyncLease` has the same members, ``is_held()`` and
        ``check()`` as coroutines.
        """
        return self._alease(thread_id, wait=wait, timeout=timeout)

    @asynccontextmanager
    async def _alease(
        self,
        thread_id: str,
        *,
        wait: bool,
        timeout: float | None,  # noqa: ASYNC109 -- a lock wait, not an I/O timeout
    ) -> AsyncIterator[AsyncLease]:
        core = await self._aio_core()
        if core is not None:
            async with core.alease(thread_id, wait=wait, timeout=timeout) as lease:
                yield lease
            return
        cm = self._sync_core().lease(thread_id, wait=wait, timeout=timeout)
        held = await asyncio.to_thread(cm.__enter__)
        try:
            yield _ThreadedLease(held)
        except BaseException as exc:
            await asyncio.to_thread(cm.__exit__, type(exc), exc, exc.__traceback__)
            raise
        await asyncio.to_thread(cm.__exit__, None, None, None)

    # --- sync API ---------------------------------------------------------------------

    def get_tuple(self, config: Config) -> CheckpointTuple | None:
        tup = self._sync_core().get_tuple(self.serde, config)
        if self._refresher is not None and tup is not None:
            self._after_read(tup.config["configurable"]["thread_id"])
        return tup

    def list(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self._sync_core().list(self.serde, config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        return self._sync_core().put(self.serde, config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync_core().put_writes(self.serde, config, writes, task_id, task_path)

    def get_writes(self, config: Config) -> builtins.list[StoredWrite]:
        return self._sync_core().get_writes(self.serde, config)

    def delta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        """One statement, a recursive walk of the parent links (:mod:`._history`)."""
        return self._sync_core().delta_history(self.serde, config, channels)

    def delete_thread(self, thread_id: str) -> None:
        self._sync_core().delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._sync_core().delete_for_runs(run_ids, self.serde)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._sync_core().copy_thread(source_thread_id, target_thread_id, self.serde)

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        self._sync_core().prune(thread_ids, strategy=strategy, keep=keep)

    def rekey(
        self,
        to: str | None = None,
        *,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Seal every stored value, write and metadata under key ``to`` (#17).

        ``to``: a key id of the ring (default: the active one); give every
        writer that key as its active one first, so that nothing new is
        sealed under the old key meanwhile.

        One pass over the tables in batches of ``batch`` rows; each row is
        written back only if it is still as read, so concurrent puts win and
        readers see either version (both keys are in the ring). Killed at any
        point, it is finished by running it again. ``progress(n)`` after each
        batch. Returns the rows sealed again; :meth:`rekey_pending` says how
        many are left. Rows are rewritten outside any lease's fence: a rekey
        changes no value, only the key that seals it.

        Raises:
            ConfigError: the saver has no keyring, or ``batch`` is not positive.
            DecodeError: a row does not open (its key is not in the ring).
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError(f"batch must be a positive int, got {batch!r}")
        return self._sync_core().rekey(self.serde, to, batch, progress)

    def rekey_pending(self, to: str | None = None) -> int:
        """How many rows :meth:`rekey` would seal again (not under key ``to``)."""
        return self._sync_core().rekey_pending(to)

    async def arekey(
        self,
        to: str | None = None,
        *,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Async :meth:`rekey`."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigError(f"batch must be a positive int, got {batch!r}")
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self.rekey, to, batch=batch, progress=progress)
        return await core.arekey(self.serde, to, batch, progress)

    async def arekey_pending(self, to: str | None = None) -> int:
        """Async :meth:`rekey_pending`."""
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self.rekey_pending, to)
        return await core.arekey_pending(to)

    def _check_index_filter(self, metadata: Mapping[str, Any]) -> None:
        crypt = self._options["codec"].crypt
        if crypt is not None and metadata:
            crypt.check_filter(metadata)  # a sealed key is not in the index

    def threads(
        self,
        *,
        status: str | Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: Any = None,
        updated_after: Any = None,
        order: ThreadOrder = "updated",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ThreadPage:
        query = check_threads_args(
            status, metadata, updated_before, updated_after, order, limit, cursor
        )
        self._check_index_filter(query.metadata)
        return self._sync_core().threads(query)

    # --- async API --------------------------------------------------------------------
    # The loop's async core when there is one; else (a saver built from a sync
    # psycopg resource) ThreadedAsyncMixin runs the sync methods in worker threads.

    async def aget_tuple(self, config: Config) -> CheckpointTuple | None:
        core = await self._aio_core()
        if core is None:
            return await super().aget_tuple(config)
        tup = await core.aget_tuple(self.serde, config)
        if self._refresher is not None and tup is not None:
            await self._aafter_read(tup.config["configurable"]["thread_id"])
        return tup

    async def aget_writes(self, config: Config) -> builtins.list[StoredWrite]:
        core = await self._aio_core()
        if core is None:
            return await super().aget_writes(config)
        return await core.aget_writes(self.serde, config)

    async def adelta_history(
        self, config: Config, channels: Sequence[str]
    ) -> Mapping[str, ChannelHistory] | None:
        core = await self._aio_core()
        if core is None:
            return await super().adelta_history(config, channels)
        return await core.adelta_history(self.serde, config, channels)

    def alist(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None = None,
        before: Config | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        res = self._res
        self._check_open()
        if res.aio is not None:
            # Validates now, so bad input fails at the call.
            return res.aio.alist(self.serde, config, filter=filter, before=before, limit=limit)
        # The async pool, or the worker thread, starts at the first item; bad
        # input still fails at the call.
        check_list_args(config, filter, before, limit)
        if res.url is None:
            return super().alist(config, filter=filter, before=before, limit=limit)
        return self._alist_lazy(config, filter=filter, before=before, limit=limit)

    async def _alist_lazy(
        self,
        config: Config | None,
        *,
        filter: Mapping[str, Any] | None,
        before: Config | None,
        limit: int | None,
    ) -> AsyncIterator[CheckpointTuple]:
        core = await self._aio_core()
        assert core is not None
        async for item in core.alist(self.serde, config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: Config,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        core = await self._aio_core()
        if core is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        return await core.aput(self.serde, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: Config,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        core = await self._aio_core()
        if core is None:
            return await super().aput_writes(config, writes, task_id, task_path)
        return await core.aput_writes(self.serde, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        core = await self._aio_core()
        if core is None:
            return await super().adelete_thread(thread_id)
        return await core.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        core = await self._aio_core()
        if core is None:
            return await super().adelete_for_runs(run_ids)
        return await core.adelete_for_runs(run_ids, self.serde)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        core = await self._aio_core()
        if core is None:
            return await super().acopy_thread(source_thread_id, target_thread_id)
        return await core.acopy_thread(source_thread_id, target_thread_id, self.serde)

    async def aprune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: PruneStrategy = "keep_latest",
        keep: int = 1,
    ) -> None:
        core = await self._aio_core()
        if core is None:
            return await super().aprune(thread_ids, strategy=strategy, keep=keep)
        return await core.aprune(thread_ids, strategy=strategy, keep=keep)

    async def athreads(
        self,
        *,
        status: str | Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: Any = None,
        updated_after: Any = None,
        order: ThreadOrder = "updated",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ThreadPage:
        query = check_threads_args(
            status, metadata, updated_before, updated_after, order, limit, cursor
        )
        self._check_index_filter(query.metadata)
        core = await self._aio_core()
        if core is None:
            return await asyncio.to_thread(self._sync_core().threads, query)
        return await core.athreads(query)

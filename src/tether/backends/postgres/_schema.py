"""Schema migrations of the Postgres backend (SPEC S5.3).

Object names. tether's tables and indexes are named ``tether_*`` in any
schema -- ``tether_checkpoints``, ``tether_blobs``, ``tether_writes``,
``tether_migrations`` -- so a schema may also hold LangGraph's official
``PostgresSaver`` tables (``checkpoints``, ``checkpoint_blobs``,
``checkpoint_writes``, ``checkpoint_migrations``) and neither program sees,
alters or indexes the other's. Until schema version 10 tether used the
official names; version 10 renames an existing store in place.

Versions. The position of a migration in :data:`MIGRATIONS` (1-based) is its
version; ``tether_migrations`` records every version applied. Migrations only
ever get appended, and they are only run to *upgrade* a store that already
has a ``tether_migrations`` table. A schema without one gets the
:data:`BASELINE` instead: the current shape, created at once in one
transaction (tables, indexes, every version recorded), which touches nothing
but ``tether_*`` objects. That is why a fresh ``setup()`` never runs the old
steps that named the official tables (version 2 created
``checkpoints_thread_id_idx``, version 9 dropped it: on a schema holding the
official store, that was LangGraph's own index). A schema whose
``tether_migrations`` predates version 10 next to LangGraph's
``checkpoint_migrations`` is a store both programs wrote into the same tables;
``setup()`` refuses it (:func:`shared_store_message`) and changes nothing.

Steps. A migration is either transactional (its statements and its version
row commit together) or ``concurrent`` (``CREATE INDEX CONCURRENTLY``, which
Postgres refuses inside a transaction block: run in autocommit, then
recorded; an index left INVALID by an interrupted build is dropped and
rebuilt on the next ``setup()``).

Tables (``encoding`` on blobs and writes is
:mod:`tether.backends._sqlbase`'s: 0 = the serializer's bytes, 2 = those
bytes zstd-compressed, 1 = zlib-compressed (read only); other codes are
reserved):

* ``tether_checkpoints(thread_id, checkpoint_ns, checkpoint_id,
  parent_checkpoint_id, checkpoint JSONB, metadata JSONB, absent TEXT[])`` --
  ``checkpoint`` is the checkpoint without channel values except the small
  primitive ones, kept inline; ``absent`` names the channels it lists that had
  no stored value when it was put (NULL: none; ``{NULL}``: unknown, a row
  older than version 12), so that a read refuses a channel whose blob row is
  missing instead of leaving it out;
* ``tether_write_counts(thread_id, checkpoint_ns, checkpoint_id, n)`` -- how
  many pending-write rows a checkpoint has (no row: none), kept by every
  ``put_writes``, so that a read refuses a checkpoint whose write rows were
  lost or added (version 14);
* ``tether_blobs(thread_id, checkpoint_ns, channel, version, encoding, type,
  blob, base)`` -- one row per written channel version, and the snapshots of
  append-encoded lists (:mod:`tether.backends._delta`): a row whose ``base``
  is set holds the tail appended since that snapshot. A foreign key from
  ``base`` to the snapshot's row makes the database refuse a tail whose
  snapshot another process deleted (the writer then stores the whole value)
  and a sweep that would delete a snapshot a tail still needs;
* ``tether_writes(thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
  task_path, channel, type, encoding, blob)``;
* ``tether_leases(thread_id, epoch, backend_pid, taken_at)`` -- one row per
  thread ever leased (S5.4): ``epoch`` is the fencing token, raised by one
  each time a run takes the lease; ``backend_pid`` is the server process
  holding that run's advisory lock. A put under a lease writes only while the
  thread's epoch is still the one its lease got (see ``_sql.Statements``).
  Rows are never deleted, not even with their thread: an epoch that started
  again at 1 could match a stale holder's.

Every text column is ``COLLATE "C"`` (since version 11): ids, namespaces,
task ids and task paths order by code point, as on SQLite and in memory,
whatever the database's default collation, and the indexes serve that order.

Indexes: the three primary keys (every per-thread query and the thread
operations are prefix scans of them), ``tether_checkpoints_thread_ns_idx``
``(thread_id, checkpoint_id, checkpoint_ns) WHERE checkpoint_ns <> ''`` for
listing a thread across namespaces newest first (merged with the root
namespace's rows from the primary key), ``tether_checkpoints_id_idx``
``(checkpoint_id, thread_id, checkpoint_ns)`` for listing every thread, a
partial expression index on ``metadata ->> 'run_id'`` for
``delete_for_runs``, a GIN index (``jsonb_path_ops``) on ``metadata`` for a
filtered listing of every thread (the filter adds ``metadata @> filter``, a
necessary condition of its exact equality), and a partial index on
``tether_blobs(thread_id, checkpoint_ns, channel, base)`` for the foreign
key's checks when snapshots are deleted. ``tests/postgres/test_queries.py``
checks every statement's plan on a populated store.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether._status import CONTROL_WRITES
from tether.backends._threads import BUCKET_BITS
from tether.checkpoint import ERROR, INTERRUPT

__all__ = [
    "BASELINE",
    "BLOBS",
    "CHECKPOINTS",
    "LEASES",
    "MIGRATIONS",
    "OFFICIAL_TABLES",
    "REBUILD",
    "RENAMED",
    "SCHEMA_VERSION",
    "THREADS_TABLE",
    "WRITES",
    "WRITE_COUNTS_TABLE",
    "Migration",
    "shared_store_message",
]

#: tether's tables, in any schema (LangGraph's official saver uses the names
#: without the prefix).
CHECKPOINTS = "tether_checkpoints"
BLOBS = "tether_blobs"
WRITES = "tether_writes"
MIGRATIONS_TABLE = "tether_migrations"
LEASES = "tether_leases"
WRITE_COUNTS_TABLE = "tether_write_counts"
THREADS_TABLE = "tether_threads"

#: LangGraph's official PostgresSaver tables (langgraph-checkpoint-postgres).
OFFICIAL_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``{schema}`` in the statements is the quoted schema name."""

    name: str
    statements: tuple[str, ...]
    concurrent: bool = False
    index: str | None = None  # for a concurrent index build: its name (to repair)


# The text columns of each table: all of them compare in code-point order
# (COLLATE "C"), the key columns because order matters, the rest for one rule.
_CHECKPOINT_TEXT = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id")
_BLOB_TEXT = ("thread_id", "checkpoint_ns", "channel", "version", "type", "base")
_WRITE_TEXT = (
    *("thread_id", "checkpoint_ns", "checkpoint_id"),
    *("task_id", "task_path", "channel", "type"),
)


WRITE_COUNTS = """CREATE TABLE {schema}.tether_write_counts (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    n INTEGER NOT NULL,
    CONSTRAINT tether_write_counts_pkey PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)"""


THREADS = """CREATE TABLE {schema}.tether_threads (
    thread_id TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    checkpoints BIGINT NOT NULL,
    namespaces INTEGER NOT NULL,
    bytes BIGINT NOT NULL,
    latest_id TEXT COLLATE "C",
    latest_step JSONB,
    latest_ts TEXT COLLATE "C",
    metadata JSONB NOT NULL DEFAULT '{{}}',
    runnable BOOLEAN NOT NULL DEFAULT false,
    status TEXT COLLATE "C",
    bucket BIGINT NOT NULL,
    CONSTRAINT tether_threads_pkey PRIMARY KEY (thread_id)
) WITH (fillfactor = 70)"""
# The indexes hold bucket, not updated_at (see tether.backends._threads.BUCKET_BITS):
# a put in the bucket of the thread's previous one, with the status unchanged,
# changes no indexed column and is a HOT update, for which the fillfactor
# leaves room on the row's page.
THREADS_INDEXES = (
    "CREATE INDEX tether_threads_updated_idx ON {schema}.tether_threads (bucket)",
    "CREATE INDEX tether_threads_status_idx ON {schema}.tether_threads (status, bucket)",
)


#: A thread's own retention policy (#15): the column and the index of the threads
#: that have one, as the migration and the baseline add them.
RETENTION = (
    "ALTER TABLE {schema}.tether_threads ADD COLUMN retention JSONB",
    "CREATE INDEX tether_threads_retention_idx ON {schema}.tether_threads (thread_id) "
    "WHERE retention IS NOT NULL",
)


def state_query(writes: str, runnable: str) -> str:
    """A thread's status (SQL, one value) from ``writes``, a query of a checkpoint's
    ``(task_id, channel)`` write rows, and ``runnable`` (SQL):
    :func:`tether._status.state_of` in SQL."""
    control = ", ".join(f"'{c}'" for c in sorted(CONTROL_WRITES))
    return f"""(SELECT CASE WHEN bool_or(w.channel = '{ERROR}') THEN 'error'
            WHEN bool_or(w.channel = '{INTERRUPT}' AND NOT w.wrote) THEN 'interrupted'
            WHEN {runnable} THEN 'pending' ELSE 'idle' END
        FROM (SELECT x.channel,
                     bool_or(x.channel NOT IN ({control})) OVER (PARTITION BY x.task_id) AS wrote
              FROM ({writes}) x) w)"""  # noqa: S608 -- fixed fragments of this package


def _in_function(writes: str) -> str:
    """:func:`state_query` over ``writes`` (which names ``{schema}``), with the
    braces escaped so that the function text below can be ``.format``-ted."""
    text = state_query(writes, "p_runnable")
    return text.replace("{", "{{").replace("}", "}}").replace("{{schema}}", "{schema}")


_STORED_WRITES = (
    "SELECT task_id, channel FROM {schema}.tether_writes WHERE thread_id = p_thread "
    "AND checkpoint_ns = '' AND checkpoint_id = p_checkpoint"
)

# Version 15's status function (replaced by THREAD_STATUS in version 16, which
# drops it): the status of a root checkpoint from its stored write rows.
THREAD_STATE = f"""CREATE OR REPLACE FUNCTION {{schema}}.tether_thread_state(
    p_thread TEXT, p_checkpoint TEXT, p_runnable BOOLEAN) RETURNS TEXT
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN {_in_function(_STORED_WRITES)};
END
$fn$"""

# The status of a root checkpoint as a put or put_writes sets it (version 16):
# its write rows as they are when the function runs, plus the calling
# put_writes' own (``p_task``, ``p_channels``; NULL for a put). VOLATILE on
# purpose: Postgres gives each query of a volatile function a fresh snapshot,
# and the statements call it where the thread's index row is already locked
# (the SET of the put's and of put_writes' ON CONFLICT DO UPDATE, which
# Postgres evaluates on the newest row version, after waiting for a
# concurrent writer). So it sees every write committed by the put or put_writes that
# held the row before, without a lock statement and a transaction of its own
# (#15: those doubled a put's cost). STABLE, it would use the calling
# statement's snapshot and miss them (LangGraph's async durability races a
# checkpoint's put against its writes).
THREAD_STATUS = f"""CREATE OR REPLACE FUNCTION {{schema}}.tether_thread_status(
    p_thread TEXT, p_checkpoint TEXT, p_runnable BOOLEAN, p_task TEXT, p_channels TEXT[])
RETURNS TEXT LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    IF p_channels IS NULL AND NOT EXISTS (
        SELECT 1 FROM {{schema}}.tether_writes WHERE thread_id = p_thread
        AND checkpoint_ns = '' AND checkpoint_id = p_checkpoint) THEN
        RETURN CASE WHEN p_runnable THEN 'pending' ELSE 'idle' END;
    END IF;
    RETURN {_in_function(_STORED_WRITES + " UNION ALL SELECT p_task, c FROM unnest(p_channels) c")};
END
$fn$"""  # noqa: S608 -- fixed fragments of this module

#: The status a migration gives every thread with a root checkpoint until the
#: saver has read its latest checkpoint (``threads()`` shows it as ``None``).
REBUILD = "rebuild"

# Epoch microseconds of a checkpoint's ts (NULL when it is not a timestamp).
_MICROS = (
    "(CASE WHEN {ts} ~ '^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' "
    "THEN (extract(epoch FROM ({ts})::timestamptz) * 1000000)::bigint END)"
)

#: One row per thread of the checkpoints already stored.
FILL_THREADS = f"""INSERT INTO {{schema}}.tether_threads
    (thread_id, created_at, updated_at, checkpoints, namespaces, bytes, latest_id,
     latest_step, latest_ts, metadata, runnable, status, bucket)
SELECT a.thread_id, coalesce(a.first, a.now), coalesce(a.last, a.now), a.n, a.nss,
       a.size
       + coalesce((SELECT sum(octet_length(b.blob)) FROM {{schema}}.tether_blobs b
                   WHERE b.thread_id = a.thread_id), 0)
       + coalesce((SELECT sum(octet_length(w.blob)) FROM {{schema}}.tether_writes w
                   WHERE w.thread_id = a.thread_id), 0),
       a.latest, r.metadata -> 'step', r.checkpoint ->> 'ts',
       coalesce(r.metadata, '{{{{}}}}'::jsonb)
           - 'source' - 'step' - 'parents' - '__tether_sealed__',
       false,
       CASE WHEN a.latest IS NOT NULL THEN '{REBUILD}' END,
       coalesce(a.last, a.now) >> {BUCKET_BITS}
FROM (
    SELECT thread_id, count(*) AS n, count(DISTINCT checkpoint_ns) AS nss,
           sum(octet_length(checkpoint::text) + octet_length(metadata::text)) AS size,
           min({_MICROS.format(ts="checkpoint ->> 'ts'")}) AS first,
           max({_MICROS.format(ts="checkpoint ->> 'ts'")}) AS last,
           max(checkpoint_id) FILTER (WHERE checkpoint_ns = '') AS latest,
           (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now
    FROM {{schema}}.tether_checkpoints GROUP BY thread_id
) a
LEFT JOIN {{schema}}.tether_checkpoints r
  ON r.thread_id = a.thread_id AND r.checkpoint_ns = '' AND r.checkpoint_id = a.latest"""  # noqa: S608


def _collate_c(columns: tuple[str, ...]) -> str:
    return ", ".join(f'ALTER COLUMN {c} TYPE TEXT COLLATE "C"' for c in columns)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "tables",
        (
            """CREATE TABLE IF NOT EXISTS {schema}.checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{{}}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)""",
            """CREATE TABLE IF NOT EXISTS {schema}.checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    encoding SMALLINT NOT NULL DEFAULT 0,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
)""",
            """CREATE TABLE IF NOT EXISTS {schema}.checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    type TEXT NOT NULL,
    encoding SMALLINT NOT NULL DEFAULT 0,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)""",
            # Large payloads arrive compressed (zstd, encoding 2): do not let
            # TOAST try to compress them again.
            "ALTER TABLE {schema}.checkpoint_blobs ALTER COLUMN blob SET STORAGE EXTERNAL",
            "ALTER TABLE {schema}.checkpoint_writes ALTER COLUMN blob SET STORAGE EXTERNAL",
        ),
    ),
    Migration(
        "checkpoints_thread_id_idx",
        (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_id_idx "
            "ON {schema}.checkpoints (thread_id, checkpoint_id, checkpoint_ns)",
        ),
        concurrent=True,
        index="checkpoints_thread_id_idx",
    ),
    Migration(
        "checkpoints_id_idx",
        (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_id_idx "
            "ON {schema}.checkpoints (checkpoint_id, thread_id, checkpoint_ns)",
        ),
        concurrent=True,
        index="checkpoints_id_idx",
    ),
    Migration(
        "checkpoints_run_id_idx",
        (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_run_id_idx "
            "ON {schema}.checkpoints ((metadata ->> 'run_id')) WHERE metadata ? 'run_id'",
        ),
        concurrent=True,
        index="checkpoints_run_id_idx",
    ),
    Migration(
        "checkpoints_metadata_idx",
        (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_metadata_idx "
            "ON {schema}.checkpoints USING gin (metadata jsonb_path_ops)",
        ),
        concurrent=True,
        index="checkpoints_metadata_idx",
    ),
    Migration(
        "append_deltas",
        (
            "ALTER TABLE {schema}.checkpoint_blobs ADD COLUMN IF NOT EXISTS base TEXT",
            # NOT VALID: every existing row has base NULL, so there is nothing to
            # check, and skipping the validation scan keeps a big table unlocked.
            "ALTER TABLE {schema}.checkpoint_blobs ADD CONSTRAINT checkpoint_blobs_base_fkey "
            "FOREIGN KEY (thread_id, checkpoint_ns, channel, base) "
            "REFERENCES {schema}.checkpoint_blobs (thread_id, checkpoint_ns, channel, version) "
            "NOT VALID",
        ),
    ),
    Migration(
        "checkpoint_blobs_base_idx",
        (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoint_blobs_base_idx "
            "ON {schema}.checkpoint_blobs (thread_id, checkpoint_ns, channel, base) "
            "WHERE base IS NOT NULL",
        ),
        concurrent=True,
        index="checkpoint_blobs_base_idx",
    ),
    # Listing a thread across namespaces reads its root rows from the primary
    # key and only the subgraph rows from an index of their own: a thread
    # without subgraphs no longer pays a second full-width index entry per put
    # (W2: 1.1 MB of 12.6 MB per 10,000 checkpoints).
    Migration(
        "checkpoints_thread_ns_idx",
        (
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS checkpoints_thread_ns_idx "
            "ON {schema}.checkpoints (thread_id, checkpoint_id, checkpoint_ns) "
            "WHERE checkpoint_ns <> ''",
        ),
        concurrent=True,
        index="checkpoints_thread_ns_idx",
    ),
    Migration(
        "drop checkpoints_thread_id_idx",
        ("DROP INDEX CONCURRENTLY IF EXISTS {schema}.checkpoints_thread_id_idx",),
        concurrent=True,
    ),
    # Names of tether's own, so that LangGraph's official tables can sit in the
    # same schema (issue #13.2). Every step above names the old tables: they run
    # only to upgrade a store older than this one (a new schema gets BASELINE).
    Migration(
        "tether_ names",
        (
            "ALTER TABLE {schema}.checkpoints RENAME TO tether_checkpoints",
            "ALTER TABLE {schema}.checkpoint_blobs RENAME TO tether_blobs",
            "ALTER TABLE {schema}.checkpoint_writes RENAME TO tether_writes",
            "ALTER INDEX {schema}.checkpoints_pkey RENAME TO tether_checkpoints_pkey",
            "ALTER INDEX {schema}.checkpoint_blobs_pkey RENAME TO tether_blobs_pkey",
            "ALTER INDEX {schema}.checkpoint_writes_pkey RENAME TO tether_writes_pkey",
            "ALTER INDEX {schema}.checkpoints_thread_ns_idx "
            "RENAME TO tether_checkpoints_thread_ns_idx",
            "ALTER INDEX {schema}.checkpoints_id_idx RENAME TO tether_checkpoints_id_idx",
            "ALTER INDEX {schema}.checkpoints_run_id_idx RENAME TO tether_checkpoints_run_id_idx",
            "ALTER INDEX {schema}.checkpoints_metadata_idx "
            "RENAME TO tether_checkpoints_metadata_idx",
            "ALTER INDEX {schema}.checkpoint_blobs_base_idx RENAME TO tether_blobs_base_idx",
            "ALTER TABLE {schema}.tether_blobs "
            "RENAME CONSTRAINT checkpoint_blobs_base_fkey TO tether_blobs_base_fkey",
        ),
    ),
    # Code-point order whatever the database's collation (issue #18.6): pending
    # writes are read in (task_path, task_id, idx) order and listings in
    # (checkpoint_id, thread_id, checkpoint_ns) order, as on SQLite and in
    # memory, and the indexes serve those orders. On a database whose default
    # collation is not C (ICU or glibc en_US), they came back in that locale's
    # order. A binary-compatible change: the tables are not rewritten, but the
    # indexes on these columns are rebuilt, under an ACCESS EXCLUSIVE lock.
    Migration(
        "collate C",
        (
            "ALTER TABLE {schema}.tether_checkpoints " + _collate_c(_CHECKPOINT_TEXT),
            "ALTER TABLE {schema}.tether_blobs " + _collate_c(_BLOB_TEXT),
            "ALTER TABLE {schema}.tether_writes " + _collate_c(_WRITE_TEXT),
        ),
    ),
    # The channels a checkpoint lists that had no stored value when it was put
    # (issue #18.4): NULL when there were none, so a read can tell a channel
    # no put wrote from one whose blob row is gone. Rows written before this
    # version read '{NULL}' (the added column's value for existing rows, kept
    # without rewriting the table): nothing is known of them, so their reads
    # stay lenient. New rows get NULL unless put says otherwise.
    Migration(
        "absent channels",
        (
            "ALTER TABLE {schema}.tether_checkpoints "
            "ADD COLUMN absent TEXT[] COLLATE \"C\" DEFAULT '{{NULL}}'",
            "ALTER TABLE {schema}.tether_checkpoints ALTER COLUMN absent DROP DEFAULT",
        ),
    ),
    # The fencing token of thread leases (issue #18.7, S5.4): a lease whose
    # advisory lock the server dropped (restart, terminated backend, timeout)
    # must not let its holder keep writing once another run has taken over.
    Migration(
        "tether_leases",
        (
            """CREATE TABLE IF NOT EXISTS {schema}.tether_leases (
    thread_id TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL,
    backend_pid INTEGER NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT tether_leases_pkey PRIMARY KEY (thread_id)
)""",
        ),
    ),
    # How many pending-write rows each checkpoint has (issue #18): a write row
    # that was deleted is refused on read instead of a resume replaying the
    # others only. A table of its own, not a column of the checkpoint row: a
    # put_writes may run before its checkpoint's put has committed (LangGraph's
    # "async" durability), and the upsert of this row is where two such
    # statements meet. Counted from the rows already stored.
    Migration(
        "write counts",
        (
            WRITE_COUNTS,
            "INSERT INTO {schema}.tether_write_counts "
            "SELECT thread_id, checkpoint_ns, checkpoint_id, count(*) "
            "FROM {schema}.tether_writes GROUP BY thread_id, checkpoint_ns, checkpoint_id",
        ),
    ),
    # The thread index (issue #15): one row per thread, kept by every put and
    # put_writes in the same statement. Filled from the checkpoints (times from
    # their ts); each thread's status is marked REBUILD and computed by
    # setup() right after, from its decoded latest checkpoint, which SQL cannot
    # read. The indexes are built in the transaction: the table is new.
    Migration("thread index", (THREADS, *THREADS_INDEXES, THREAD_STATE, FILL_THREADS)),
    # The index's status computed where its row is locked (see THREAD_STATUS):
    # a put and a put_writes are one statement again, not a lock and a
    # statement in a transaction.
    Migration(
        "thread status under the row lock",
        (
            THREAD_STATUS,
            "DROP FUNCTION IF EXISTS {schema}.tether_thread_state(TEXT, TEXT, BOOLEAN)",
        ),
    ),
    # A thread's own retention policy (issue #15), read by sweep(): JSON of
    # tether.lifecycle.Retention, NULL when the saver's applies. The partial
    # index lists the threads that have one; puts never change the column, so
    # their index updates stay HOT.
    Migration("thread retention", RETENTION),
)

#: The first version whose tables have tether's own names.
RENAMED = 10

#: The schema version this tether writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)

#: The current shape of a new store, created in one transaction (see the module
#: doc); every version up to SCHEMA_VERSION is recorded with it. Keep it equal to
#: what the steps build: tests/postgres/test_schema.py compares the catalog of a
#: store set up from the baseline with one upgraded step by step.
BASELINE: tuple[str, ...] = (
    """CREATE TABLE {schema}.tether_checkpoints (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    parent_checkpoint_id TEXT COLLATE "C",
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{{}}',
    absent TEXT[] COLLATE "C",
    CONSTRAINT tether_checkpoints_pkey PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)""",
    """CREATE TABLE {schema}.tether_blobs (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    channel TEXT COLLATE "C" NOT NULL,
    version TEXT COLLATE "C" NOT NULL,
    encoding SMALLINT NOT NULL DEFAULT 0,
    type TEXT COLLATE "C" NOT NULL,
    blob BYTEA,
    base TEXT COLLATE "C",
    CONSTRAINT tether_blobs_pkey PRIMARY KEY (thread_id, checkpoint_ns, channel, version),
    CONSTRAINT tether_blobs_base_fkey FOREIGN KEY (thread_id, checkpoint_ns, channel, base)
        REFERENCES {schema}.tether_blobs (thread_id, checkpoint_ns, channel, version)
)""",
    """CREATE TABLE {schema}.tether_writes (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    task_id TEXT COLLATE "C" NOT NULL,
    idx INTEGER NOT NULL,
    task_path TEXT COLLATE "C" NOT NULL DEFAULT '',
    channel TEXT COLLATE "C" NOT NULL,
    type TEXT COLLATE "C" NOT NULL,
    encoding SMALLINT NOT NULL DEFAULT 0,
    blob BYTEA,
    CONSTRAINT tether_writes_pkey
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)""",
    # Large payloads arrive compressed (zstd, encoding 2): do not let TOAST try
    # to compress them again.
    "ALTER TABLE {schema}.tether_blobs ALTER COLUMN blob SET STORAGE EXTERNAL",
    "ALTER TABLE {schema}.tether_writes ALTER COLUMN blob SET STORAGE EXTERNAL",
    # Plain (not CONCURRENTLY): the tables are new and empty, and inside the
    # baseline's transaction a half-built store is never visible.
    "CREATE INDEX tether_checkpoints_thread_ns_idx "
    "ON {schema}.tether_checkpoints (thread_id, checkpoint_id, checkpoint_ns) "
    "WHERE checkpoint_ns <> ''",
    "CREATE INDEX tether_checkpoints_id_idx "
    "ON {schema}.tether_checkpoints (checkpoint_id, thread_id, checkpoint_ns)",
    "CREATE INDEX tether_checkpoints_run_id_idx "
    "ON {schema}.tether_checkpoints ((metadata ->> 'run_id')) WHERE metadata ? 'run_id'",
    "CREATE INDEX tether_checkpoints_metadata_idx "
    "ON {schema}.tether_checkpoints USING gin (metadata jsonb_path_ops)",
    "CREATE INDEX tether_blobs_base_idx "
    "ON {schema}.tether_blobs (thread_id, checkpoint_ns, channel, base) WHERE base IS NOT NULL",
    """CREATE TABLE {schema}.tether_leases (
    thread_id TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL,
    backend_pid INTEGER NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT tether_leases_pkey PRIMARY KEY (thread_id)
)""",
    WRITE_COUNTS,
    THREADS,
    *THREADS_INDEXES,
    THREAD_STATUS,
    *RETENTION,
)

CREATE_SCHEMA = "CREATE SCHEMA IF NOT EXISTS {schema}"
CREATE_MIGRATIONS = """CREATE TABLE IF NOT EXISTS {schema}.tether_migrations (
    v INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)"""
MIGRATIONS_EXIST = "SELECT to_regclass(%s) IS NOT NULL"
CURRENT_VERSION = "SELECT coalesce(max(v), 0) FROM {schema}.tether_migrations"
RECORD = "INSERT INTO {schema}.tether_migrations (v, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
INVALID_INDEX = """SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND NOT i.indisvalid"""
DROP_INDEX = "DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index}"
TRY_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
#: Which of LangGraph's official tables a schema holds: (name) rows.
OFFICIAL_FOUND = """SELECT c.relname FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)
ORDER BY array_position(%s, c.relname::text)"""
#: Whether a table has a column: (schema, table, column).
HAS_COLUMN = """SELECT EXISTS (SELECT 1 FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s AND NOT a.attisdropped)"""
#: Whether a table holds a row (formatted: the qualified table name).
HAS_ROWS = "SELECT EXISTS (SELECT 1 FROM {table})"
UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


def repair_statements(schema: str, *, tether_created: bool) -> list[str]:
    """The SQL that separates a schema both programs took over before version 10.

    ``tether_created``: tether created the tables, LangGraph's saver then
    added its indexes and wrote rows into them. Dropping LangGraph's marker
    and indexes leaves a tether store (tether reads LangGraph's rows there as
    well); the next ``setup()`` renames it to ``tether_*`` and LangGraph's
    saver, set up again, creates empty tables of its own. Otherwise LangGraph
    created them and tether's additions (a column, a foreign key, four
    indexes, a changed storage setting, one official index dropped, its
    migrations table) are undone: the tables hold LangGraph's data only,
    since tether's statements could not run on them.
    """
    q = f'"{schema}"'
    if tether_created:
        return [
            f"DROP TABLE {q}.checkpoint_migrations",
            f"DROP INDEX IF EXISTS {q}.checkpoints_thread_id_idx, "
            f"{q}.checkpoint_blobs_thread_id_idx, {q}.checkpoint_writes_thread_id_idx",
        ]
    return [
        f"DROP TABLE {q}.tether_migrations",
        f"DROP INDEX IF EXISTS {q}.checkpoints_id_idx, {q}.checkpoints_run_id_idx, "
        f"{q}.checkpoints_metadata_idx, {q}.checkpoints_thread_ns_idx",
        # The foreign key and tether_blobs_base_idx go with the column.
        f"ALTER TABLE {q}.checkpoint_blobs DROP COLUMN IF EXISTS base",
        f"ALTER TABLE {q}.checkpoint_blobs ALTER COLUMN blob SET STORAGE EXTENDED",
        f"ALTER TABLE {q}.checkpoint_writes ALTER COLUMN blob SET STORAGE EXTENDED",
        f"CREATE INDEX IF NOT EXISTS checkpoints_thread_id_idx ON {q}.checkpoints (thread_id)",
    ]


def shared_store_message(schema: str, version: int, *, tether_created: bool) -> str:
    """Why a schema holding old tether tables and LangGraph's official store is refused.

    Before version 10 both programs used the names ``checkpoints``,
    ``checkpoint_blobs`` and ``checkpoint_writes``, and the second one to run
    ``setup()`` in a schema took over the first one's tables (issue #13.2).
    ``tether_created`` tells which one created them: tether's ``encoding``
    column is on ``checkpoint_blobs`` (see :func:`repair_statements`).
    """
    sql = "; ".join(repair_statements(schema, tether_created=tether_created))
    head = (
        f"schema {schema!r} holds tether's tables at schema version {version} and LangGraph's "
        f"PostgresSaver store (checkpoint_migrations) in the same tables: before tether schema "
        f"version {RENAMED} both programs used the names checkpoints, checkpoint_blobs and "
        "checkpoint_writes, and the second one to run setup() here took over the first one's "
        "tables; nothing was changed. "
    )
    if tether_created:
        return head + (
            "tether created these tables and LangGraph's saver then wrote into them: tether "
            "reads both programs' rows, LangGraph's saver misreads tether's (append tails, "
            "compressed values). To keep every thread in a tether store, take a backup, run "
            f"{sql}; and call setup() again: the tables become tether_checkpoints, tether_blobs "
            "and tether_writes, and LangGraph's saver, set up again, starts empty tables of its "
            "own"
        )
    return head + (
        "LangGraph's saver created these tables, so they hold its data only (tether's "
        "statements could not run on them). To undo what tether's setup() added, take a backup, "
        f"run {sql}; and call setup() again: tether then creates its own tables beside "
        "LangGraph's (pass import_official=True, or run tether import, to bring the threads over)"
    )

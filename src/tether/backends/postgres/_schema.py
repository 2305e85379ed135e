"""Schema migrations of the Postgres backend (SPEC S5.3).

The position of a migration in :data:`MIGRATIONS` (1-based) is its version;
``tether_migrations`` records every version applied. Migrations only ever
get appended. A migration is either transactional (its statements and its
version row commit together) or ``concurrent`` (``CREATE INDEX
CONCURRENTLY``, which Postgres refuses inside a transaction block: run in
autocommit, then recorded; an index left INVALID by an interrupted build is
dropped and rebuilt on the next ``setup()``).

Tables (``encoding`` on blobs and writes is
:mod:`tether.backends._sqlbase`'s: 0 = the serializer's bytes, 2 = those
bytes zstd-compressed, 1 = zlib-compressed (read only); other codes are
reserved):

* ``checkpoints(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
  checkpoint JSONB, metadata JSONB)`` -- ``checkpoint`` is the checkpoint
  without channel values except the small primitive ones, kept inline;
* ``checkpoint_blobs(thread_id, checkpoint_ns, channel, version, encoding,
  type, blob, base)`` -- one row per written channel version, and the
  snapshots of append-encoded lists (:mod:`tether.backends._delta`): a row
  whose ``base`` is set holds the tail appended since that snapshot. A
  foreign key from ``base`` to the snapshot's row makes the database refuse a
  tail whose snapshot another process deleted (the writer then stores the
  whole value) and a sweep that would delete a snapshot a tail still needs;
* ``checkpoint_writes(thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
  task_path, channel, type, encoding, blob)``.

Indexes: the three primary keys (every per-thread query and the thread
operations are prefix scans of them), ``checkpoints(thread_id, checkpoint_id,
checkpoint_ns) WHERE checkpoint_ns <> ''`` for listing a thread across
namespaces newest first (merged with the root namespace's rows from the
primary key; until version 8 this index covered every row),
``checkpoints(checkpoint_id, thread_id, checkpoint_ns)`` for listing every
thread, a partial expression index on ``metadata ->> 'run_id'`` for
``delete_for_runs``, and a GIN index (``jsonb_path_ops``) on ``metadata`` for
a filtered listing of every thread (the filter adds ``metadata @> filter``, a
necessary condition of its exact equality), and a partial index on
``checkpoint_blobs(thread_id, checkpoint_ns, channel, base)`` for the foreign
key's checks when snapshots are deleted. Blobs and writes need no other index
beyond their keys. ``tests/postgres/test_queries.py`` checks every statement's
plan on a populated store.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration"]


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: ``{schema}`` in the statements is the quoted schema name."""

    name: str
    statements: tuple[str, ...]
    concurrent: bool = False
    index: str | None = None  # for a concurrent index build: its name (to repair)


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
)

#: The schema version this tether writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)

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
UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"

"""The SQLite schema and its migrations.

The schema version lives in the database header (``PRAGMA user_version``),
which SQLite updates inside the migrating transaction: a migration either
applies completely, version included, or not at all.

:data:`MIGRATIONS` is the ordered history; entry ``i`` takes a database from
version ``i`` to ``i + 1``. Entries are never edited once released, only
appended. Opening a database:

* version 0 and no tables: a new file; every migration runs.
* version 0 with tables: not a tether store (for example LangGraph's own
  SqliteSaver file, which has a ``checkpoints`` table of another shape):
  :class:`~tether.errors.StorageError`, nothing written.
* older than :data:`SCHEMA_VERSION`: the missing migrations run in one
  ``BEGIN IMMEDIATE`` transaction (so two processes opening one old file
  cannot both migrate it).
* newer: :class:`~tether.errors.SchemaVersionError` naming both versions,
  before anything is written (not even the journal mode).

Tables (``TEXT`` keys compare as binary strings, which is the order of the
time-ordered checkpoint ids):

``checkpoints``
    one row per checkpoint: the head (the checkpoint without channel values,
    through the saver's serializer, so unknown keys round-trip), its
    ``channel_versions`` again as a JSON object of strings (so SQL can join
    checkpoints to blobs for garbage collection), ``run_id`` (from metadata,
    for ``delete_for_runs``) and the metadata as JSON text (filtered in SQL
    with ``json_each``).
``checkpoint_blobs``
    one row per (thread, ns, channel, version): written only for the
    channels in ``new_versions``, so a channel that did not change is stored
    once however many checkpoints refer to it. ``base`` names the snapshot
    row an append tail extends (see :mod:`tether.backends._delta`); it sits
    before ``value`` so that reading it never walks a large value's overflow
    pages.
``checkpoint_writes``
    pending writes, keyed by (thread, ns, checkpoint, task, idx).
"""

from __future__ import annotations

import sqlite3

from tether.backends.sqlite._conn import translate_errors
from tether.errors import MigrationError, SchemaVersionError, StorageError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "TABLES", "ensure_schema", "schema_version"]

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: the three tables.
    (
        """CREATE TABLE checkpoints (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            checkpoint_id TEXT NOT NULL,
            parent_checkpoint_id TEXT,
            run_id TEXT,
            type TEXT NOT NULL,
            checkpoint BLOB NOT NULL,
            channel_versions TEXT NOT NULL DEFAULT '{}',
            metadata TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        )""",
        """CREATE TABLE checkpoint_blobs (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            type TEXT NOT NULL,
            value BLOB,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )""",
        """CREATE TABLE checkpoint_writes (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            task_path TEXT NOT NULL DEFAULT '',
            idx INTEGER NOT NULL,
            channel TEXT NOT NULL,
            type TEXT NOT NULL,
            value BLOB,
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )""",
    ),
    # 1 -> 2: the encoding marker (0 = plain, room for compression and delta
    # encoding) and the indexes the listing and run queries use.
    (
        "ALTER TABLE checkpoint_blobs ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE checkpoint_writes ADD COLUMN encoding INTEGER NOT NULL DEFAULT 0",
        # list(thread) over every namespace, newest first, keyset-paged.
        "CREATE INDEX checkpoints_thread_order"
        " ON checkpoints (thread_id, checkpoint_id, checkpoint_ns)",
        # list(None): every thread, newest first.
        "CREATE INDEX checkpoints_order ON checkpoints (checkpoint_id, thread_id, checkpoint_ns)",
        # delete_for_runs; most checkpoints outside LangGraph runs have no run_id.
        "CREATE INDEX checkpoints_run ON checkpoints (run_id) WHERE run_id IS NOT NULL",
    ),
    # 2 -> 3: append deltas. The blob table is rebuilt (not ALTERed) so that the
    # small columns, `base` among them, come before the value.
    (
        """CREATE TABLE checkpoint_blobs_v3 (
            thread_id TEXT NOT NULL,
            checkpoint_ns TEXT NOT NULL DEFAULT '',
            channel TEXT NOT NULL,
            version TEXT NOT NULL,
            type TEXT NOT NULL,
            encoding INTEGER NOT NULL DEFAULT 0,
            base TEXT,
            value BLOB,
            PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
        )""",
        "INSERT INTO checkpoint_blobs_v3 (thread_id, checkpoint_ns, channel, version, type,"
        " encoding, base, value) SELECT thread_id, checkpoint_ns, channel, version, type,"
        " encoding, NULL, value FROM checkpoint_blobs",
        "DROP TABLE checkpoint_blobs",
        "ALTER TABLE checkpoint_blobs_v3 RENAME TO checkpoint_blobs",
    ),
)

#: The version this tether writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    """The version recorded in the database header (0 for a new file)."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def _check_version(found: int, where: str, target: int) -> None:
    if found > target:
        raise SchemaVersionError(
            f"SQLite database {where} has tether schema version {found}, but this tether "
            f"supports up to version {target}; upgrade tether to open it (nothing was written)",
            found=found,
            supported=target,
        )


def ensure_schema(
    conn: sqlite3.Connection, where: str, *, wal: bool, target: int = SCHEMA_VERSION
) -> int:
    """Bring the database to ``target`` (see the module docstring); returns the version found.

    Raises:
        SchemaVersionError: the database is newer than ``target``.
        StorageError: the file is not a SQLite database or not a tether store.
        MigrationError: a migration failed; the database is unchanged.
    """
    with translate_errors(where):
        found = schema_version(conn)  # a read: fails on a non-database file, writes nothing
        _check_version(found, where, target)
        if found == target:
            return found
        if found == 0:
            _refuse_foreign(conn, where)
        if wal:
            # Persistent in the file; must run outside a transaction.
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if not mode or str(mode[0]).lower() != "wal":
                raise StorageError(
                    f"SQLite database {where} cannot use WAL mode (got {mode!r}); "
                    "tether needs a local file system"
                )
        conn.execute("BEGIN IMMEDIATE")
    try:
        with translate_errors(where):
            # Another process may have migrated while we waited for the lock.
            current = schema_version(conn)
            _check_version(current, where, target)
            for step in range(current, target):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(target)}")
            conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, SchemaVersionError | StorageError):
            raise
        if isinstance(exc, Exception):
            raise MigrationError(
                f"migrating SQLite database {where} from schema version {found} to {target} "
                f"failed: {exc}; the database was left at version {found}"
            ) from exc
        raise
    return found


def _refuse_foreign(conn: sqlite3.Connection, where: str) -> None:
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    if names:
        shown = ", ".join(sorted(names)[:5])
        raise StorageError(
            f"{where} is a SQLite database but not a tether store (it has tables {shown} "
            "and no tether schema version); tether did not write to it. Use a new file "
            "for tether (a LangGraph SqliteSaver file cannot be opened in place)"
        )

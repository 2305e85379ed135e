"""The SQLite schema, its migrations, and what a file holds before tether opens it.

Why one long module: the migrations are one ordered list that only grows, each
step beside the comment that says why, and the shape checks and the current
``CREATE`` are held equal to that list; split, they would drift apart.

The schema version lives in the database header (``PRAGMA user_version``),
which SQLite updates inside the migrating transaction: a migration either
applies completely, version included, or not at all.

:data:`MIGRATIONS` is the ordered history; entry ``i`` takes a database from
version ``i`` to ``i + 1``. Entries are never edited once released, only
appended. Opening a database:

* version 0 and no tables, or only LangGraph's own SqliteSaver tables
  (``checkpoints`` and ``writes`` of langgraph-checkpoint-sqlite's shape):
  :data:`CREATE` makes the current tables in one step (the migrations from 0
  would create a table named ``checkpoints``, as version 1 did); tether's
  tables sit beside the official ones, whose names differ since version 4.
* version 0 with other tables: not a tether store;
  :class:`~tether.errors.StorageError`, nothing written.
* older than :data:`SCHEMA_VERSION`: the missing migrations run in one
  ``BEGIN IMMEDIATE`` transaction (so two processes opening one old file
  cannot both migrate it).
* newer: :class:`~tether.errors.SchemaVersionError` naming both versions,
  before anything is written (not even the journal mode).

The recorded version is never trusted alone: before anything is migrated (and
at every open) tether's tables must have the shape of that version -- the
tables and columns the migrations up to it create (:func:`expected_shape`
builds them in a private in-memory database, so the shapes cannot drift from
the migrations). A file whose header was restored, edited or downgraded
(a version 3 store reading 2, whose 2 -> 3 step would rebuild the blob table
without the append-delta bases) raises :class:`~tether.errors.SchemaVersionError`
naming what was found and what was expected, and nothing is written.

Tables (``TEXT`` keys compare as binary strings, which is the order of the
time-ordered checkpoint ids). Their names are tether's own since version 4, so
that a file can hold a tether store and LangGraph's official one side by side:

``tether_checkpoints``
    one row per checkpoint: the head (the checkpoint without channel values,
    through the saver's serializer, so unknown keys round-trip; since version
    7 the small values kept inline are in it), in ``channel_versions`` the
    versions of the channels not kept inline again, as a JSON object of
    strings (so SQL can join checkpoints to blobs for reads and garbage
    collection; rows written before version 9 name every channel),
    ``run_id`` (from metadata,
    for ``delete_for_runs``), the metadata as JSON text (filtered in SQL
    with ``json_each``), ``checksum`` (xxh3 of the row's content, see
    :func:`tether.backends._sqlbase.row_checksum`; NULL in rows written
    before version 4) and ``unstored`` (the channels of ``channel_versions``
    that had no stored value when the checkpoint was put, as a JSON array;
    NULL when there were none), ``nwrites`` (how many pending writes the
    checkpoint has, kept by every write; NULL in rows written before version 5).
``tether_blobs``
    one row per (thread, ns, channel, version): written only for the
    channels in ``new_versions``, so a channel that did not change is stored
    once however many checkpoints refer to it. ``base`` names the snapshot
    row an append tail extends (see :mod:`tether.backends._delta`); it sits
    before ``value`` so that reading it never walks a large value's overflow
    pages. ``checksum``: see :func:`tether.backends._sqlbase.value_checksum`.
``tether_writes``
    pending writes, keyed by (thread, ns, checkpoint, task, idx); ``checksum``:
    see :func:`tether.backends._sqlbase.write_checksum`.
``tether_threads``
    the thread index (#15, version 7): one row per thread, written in the
    transaction of every put and put_writes (see
    :mod:`tether.backends._threads`); ``created_at``/``updated_at`` in epoch
    microseconds, ``latest_step`` as JSON text, ``metadata`` the latest root
    checkpoint's user keys, ``runnable`` whether nodes would run after it,
    ``bucket`` ``updated_at >> BUCKET_BITS`` (what the indexes order by, see
    :data:`tether.backends._threads.BUCKET_BITS`), ``retention`` the thread's
    own retention policy (version 10, JSON; NULL: the saver's).
``tether_meta``
    keys and values of the store itself (an unfinished import of the
    official tables, see :class:`~tether.backends.sqlite.SqliteSaver`).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass

from tether.backends._threads import BUCKET_BITS
from tether.backends.sqlite._conn import translate_errors
from tether.backends.sqlite._functions import migration_functions
from tether.errors import (
    ConfigError,
    MigrationError,
    SchemaVersionError,
    StorageError,
    TetherError,
)

__all__ = [
    "BLOBS",
    "CHECKPOINTS",
    "CREATE",
    "FILL_THREADS",
    "META",
    "MIGRATIONS",
    "OFFICIAL_TABLES",
    "REBUILD",
    "SCHEMA_VERSION",
    "TABLES",
    "THREADS",
    "WRITES",
    "FileState",
    "check_readable",
    "ensure_schema",
    "expected_shape",
    "file_state",
    "migration_functions",
    "schema_version",
]

#: tether's tables (version 4 on).
CHECKPOINTS = "tether_checkpoints"
THREADS = "tether_threads"
BLOBS = "tether_blobs"
WRITES = "tether_writes"
META = "tether_meta"
TABLES = (CHECKPOINTS, BLOBS, WRITES)

#: LangGraph's langgraph-checkpoint-sqlite tables.
OFFICIAL_TABLES = ("checkpoints", "writes")

#: The status a migration gives every thread with a root checkpoint, until the
#: saver has read its latest checkpoint (``threads()`` shows it as ``None``).
REBUILD = "rebuild"

# Epoch microseconds of an ISO 8601 text (NULL if it is none).
_MICROS = "CAST((julianday({}) - 2440587.5) * 86400000000.0 AS INTEGER)"

#: One row per thread of the checkpoints already stored (migration 6 -> 7).
FILL_THREADS = f"""
INSERT INTO tether_threads (thread_id, created_at, updated_at, checkpoints, namespaces, bytes,
                            latest_id, latest_step, latest_ts, metadata, runnable, status,
                            bucket)
WITH c AS MATERIALIZED (
    SELECT thread_id, checkpoint_ns, checkpoint_id, metadata,
           length(checkpoint) + length(metadata) AS size,
           CASE WHEN type = 'head+json' AND json_valid(CAST(checkpoint AS TEXT))
                THEN json_extract(CAST(checkpoint AS TEXT), '$.ts') END AS ts
    FROM tether_checkpoints
), a AS (
    SELECT thread_id, count(*) AS n, count(DISTINCT checkpoint_ns) AS nss, sum(size) AS size,
           min({_MICROS.format("ts")}) AS first, max({_MICROS.format("ts")}) AS last,
           max(CASE WHEN checkpoint_ns = '' THEN checkpoint_id END) AS latest
    FROM c GROUP BY thread_id
)
SELECT a.thread_id,
       coalesce(a.first, {_MICROS.format("'now'")}), coalesce(a.last, {_MICROS.format("'now'")}),
       a.n, a.nss,
       a.size
       + coalesce((SELECT sum(length(b.value)) FROM tether_blobs b
                   WHERE b.thread_id = a.thread_id), 0)
       + coalesce((SELECT sum(length(w.value)) FROM tether_writes w
                   WHERE w.thread_id = a.thread_id), 0),
       a.latest,
       CASE WHEN json_valid(r.metadata) THEN json_quote(json_extract(r.metadata, '$.step')) END,
       r.ts,
       CASE WHEN json_valid(r.metadata)
            THEN json_remove(r.metadata, '$.source', '$.step', '$.parents',
                             '$.__tether_sealed__')
            ELSE '{{}}' END,
       0,
       CASE WHEN a.latest IS NOT NULL THEN '{REBUILD}' END,
       coalesce(a.last, {_MICROS.format("'now'")}) >> {BUCKET_BITS}
FROM a LEFT JOIN c AS r
  ON r.thread_id = a.thread_id AND r.checkpoint_ns = '' AND r.checkpoint_id = a.latest
"""  # noqa: S608 -- only fixed fragments of this module are formatted in

#: The thread index (#15): its table and indexes, as the migration to 8 and a
#: new store create them.
_THREADS = (
    """CREATE TABLE tether_threads (
        thread_id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        checkpoints INTEGER NOT NULL,
        namespaces INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        latest_id TEXT,
        latest_step TEXT,
        latest_ts TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        runnable INTEGER NOT NULL DEFAULT 0,
        status TEXT,
        bucket INTEGER NOT NULL
    )""",
    "CREATE INDEX tether_threads_updated ON tether_threads (bucket)",
    "CREATE INDEX tether_threads_status ON tether_threads (status, bucket)",
)

#: Subgraph checkpoints in a thread's listing order (#19, version 12); the root
#: namespace's are listed in primary-key order (`_sql.read_statement`, every_ns).
#: The full index it replaces cost a b-tree insert per put and ~6% of the file.
_NESTED = (
    "DROP INDEX tether_checkpoints_thread_order",
    "CREATE INDEX tether_checkpoints_nested"
    " ON tether_checkpoints (thread_id, checkpoint_id, checkpoint_ns) WHERE checkpoint_ns <> ''",
)

#: A thread's own retention policy (#15, version 10): JSON of
#: :meth:`tether.lifecycle.Retention.to_json`, NULL when the saver's applies;
#: the partial index lists the threads that have one (the sweep reads them all).
_RETENTION = (
    "ALTER TABLE tether_threads ADD COLUMN retention TEXT",
    "CREATE INDEX tether_threads_retention ON tether_threads (thread_id) "
    "WHERE retention IS NOT NULL",
)

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
    # 3 -> 4: tether's own table and index names, so that LangGraph's official
    # SqliteSaver tables (`checkpoints`, `writes`) can share the file; the
    # row checksum; the channels a put found no stored value for; tether_meta.
    (
        "ALTER TABLE checkpoints RENAME TO tether_checkpoints",
        "ALTER TABLE checkpoint_blobs RENAME TO tether_blobs",
        "ALTER TABLE checkpoint_writes RENAME TO tether_writes",
        # An index keeps its name when its table is renamed.
        "DROP INDEX checkpoints_thread_order",
        "DROP INDEX checkpoints_order",
        "DROP INDEX checkpoints_run",
        "CREATE INDEX tether_checkpoints_thread_order"
        " ON tether_checkpoints (thread_id, checkpoint_id, checkpoint_ns)",
        "CREATE INDEX tether_checkpoints_order"
        " ON tether_checkpoints (checkpoint_id, thread_id, checkpoint_ns)",
        "CREATE INDEX tether_checkpoints_run"
        " ON tether_checkpoints (run_id) WHERE run_id IS NOT NULL",
        # Appended columns: ALTER TABLE ADD COLUMN rewrites no row.
        "ALTER TABLE tether_checkpoints ADD COLUMN checksum INTEGER",
        "ALTER TABLE tether_checkpoints ADD COLUMN unstored TEXT",
        """CREATE TABLE tether_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
    ),
    # 4 -> 5: checksums of blob and write rows, and the number of pending
    # writes a checkpoint has, so that a write row that changed, moved or
    # vanished is refused instead of replayed differently (#18). NULL in rows
    # written before: not verified.
    (
        "ALTER TABLE tether_checkpoints ADD COLUMN nwrites INTEGER",
        "ALTER TABLE tether_blobs ADD COLUMN checksum INTEGER",
        "ALTER TABLE tether_writes ADD COLUMN checksum INTEGER",
    ),
    # 5 -> 6: checkpoint heads are written as JSON text (type 'head+json', see
    # backends/_records.py), as Postgres keeps them; rows written before keep
    # the serializer's type and are read through it. No table changes: the
    # version tells an older tether that it cannot read the new rows.
    ("SELECT 1",),
    # 6 -> 7: heads keep small primitive channel values inline in their JSON
    # (`channel_values`, see `_inline.inline_value`), as Postgres's do; a put
    # carries its parent's over. No table changes: the version stops an older
    # tether from writing, which would not carry them and so lose them.
    ("SELECT 1",),
    # 7 -> 8: the thread index (#15), filled from the checkpoints. Times come
    # from the checkpoints' ts (heads stored as JSON since version 6; older
    # heads take the time of the migration); the status of each thread is
    # marked REBUILD and computed by the saver right after, from its decoded
    # latest checkpoint (SqliteSaver._rebuild_index), which SQL cannot read.
    (
        *_THREADS,
        FILL_THREADS,
    ),
    # 8 -> 9: a checkpoint row's `channel_versions` names only the channels
    # whose values are rows (or are missing), not those kept inline in its
    # head (which has every version): a tiny state's row is shorter and its
    # read joins no value rows (#19). No table changes: rows written before
    # name every channel, which reads, garbage collection and the history
    # walk still take; the version stops an older tether from writing, which
    # would look for inline values through that column and not find them.
    ("SELECT 1",),
    # 9 -> 10: retention policies of threads (#15), see _RETENTION.
    _RETENTION,
    # 10 -> 11: write rows are checksummed over their fields framed as one
    # MessagePack array (`_sqlbase.write_checksum`), which a listing verifies
    # at a third of the cost of the text framing (#19). Rows that match their
    # old checksum get the new one; a row that does not (damaged) keeps it and
    # stays refused. The SQL functions are the migration's own (`_functions.py`).
    (
        "UPDATE tether_writes SET checksum = tether_write_checksum(checkpoint_id, task_id,"
        " task_path, idx, channel, type, encoding, value)"
        " WHERE checksum IS NOT NULL AND checksum = tether_write_checksum_v1(checkpoint_id,"
        " task_id, task_path, idx, channel, type, encoding, value)",
    ),
    # 11 -> 12: a thread's listing over every namespace merges its root rows
    # (primary key) with a partial index of the others (_NESTED, #19).
    _NESTED,
)


#: The version this tether writes and reads.
SCHEMA_VERSION = len(MIGRATIONS)

#: A new store at :data:`SCHEMA_VERSION` in one step. Running the migrations
#: from 0 is not possible beside LangGraph's official tables (version 1 named
#: its table `checkpoints` too). The tables are those the migrations build,
#: column for column and index for index (a test compares the two).
CREATE: tuple[str, ...] = (
    """CREATE TABLE tether_checkpoints (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        parent_checkpoint_id TEXT,
        run_id TEXT,
        type TEXT NOT NULL,
        checkpoint BLOB NOT NULL,
        channel_versions TEXT NOT NULL DEFAULT '{}',
        metadata TEXT NOT NULL DEFAULT '{}',
        checksum INTEGER,
        unstored TEXT,
        nwrites INTEGER,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    )""",
    """CREATE TABLE tether_blobs (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        channel TEXT NOT NULL,
        version TEXT NOT NULL,
        type TEXT NOT NULL,
        encoding INTEGER NOT NULL DEFAULT 0,
        base TEXT,
        value BLOB,
        checksum INTEGER,
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
    )""",
    """CREATE TABLE tether_writes (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        task_path TEXT NOT NULL DEFAULT '',
        idx INTEGER NOT NULL,
        channel TEXT NOT NULL,
        type TEXT NOT NULL,
        value BLOB,
        encoding INTEGER NOT NULL DEFAULT 0,
        checksum INTEGER,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
    )""",
    "CREATE INDEX tether_checkpoints_order"
    " ON tether_checkpoints (checkpoint_id, thread_id, checkpoint_ns)",
    "CREATE INDEX tether_checkpoints_run ON tether_checkpoints (run_id) WHERE run_id IS NOT NULL",
    """CREATE TABLE tether_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    *_THREADS,
    *_RETENTION,
    _NESTED[1],
)


def schema_version(conn: sqlite3.Connection) -> int:
    """The version recorded in the database header (0 for a new file)."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


# --- what a file holds ------------------------------------------------------------------

#: Table name -> its column names in order.
Shape = Mapping[str, tuple[str, ...]]

# Columns of langgraph-checkpoint-sqlite's tables that tether's importer reads.
_OFFICIAL_COLUMNS = {
    "checkpoints": frozenset(
        {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type"}
        | {"checkpoint", "metadata"}
    ),
    "writes": frozenset(
        {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type"}
        | {"value"}
    ),
}


def _tables(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    names = [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {
        name: tuple(
            str(r[0])
            for r in conn.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid", (name,))
        )
        for name in names
    }


def _is_official(tables: Mapping[str, tuple[str, ...]], name: str) -> bool:
    """Whether ``name`` is a LangGraph SqliteSaver table (tether's old `checkpoints` is not)."""
    columns = tables.get(name)
    if columns is None or name not in _OFFICIAL_COLUMNS:
        return False
    return _OFFICIAL_COLUMNS[name] <= set(columns) and "channel_versions" not in columns


@functools.cache
def expected_shape(version: int) -> Shape:
    """tether's tables at ``version``: what the migrations up to it create (built in memory)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migration_functions(conn)
        for step in MIGRATIONS[:version]:
            for statement in step:
                conn.execute(statement)
        return _tables(conn)
    finally:
        conn.close()


@functools.cache
def _own_names() -> frozenset[str]:
    """Every table name some tether version had."""
    return frozenset(n for v in range(SCHEMA_VERSION + 1) for n in expected_shape(v))


def _own_shape(tables: Mapping[str, tuple[str, ...]]) -> Shape:
    """The tables of ``tables`` that are tether's (an official `checkpoints` is not)."""
    return {
        name: columns
        for name, columns in tables.items()
        if name in _own_names() and not _is_official(tables, name)
    }


def _describe(actual: Shape, expected: Shape) -> str:
    parts = []
    for table in sorted(set(actual) | set(expected)):
        found, want = actual.get(table), expected.get(table)
        if found == want:
            continue
        if found is None:
            parts.append(f"table {table} is missing")
        elif want is None:
            parts.append(f"table {table} ({', '.join(found)}) should not be there")
        else:
            parts.append(
                f"table {table} has the columns ({', '.join(found)}) where "
                f"({', '.join(want)}) were expected"
            )
    return "; ".join(parts)


def _check_shape(conn: sqlite3.Connection, where: str, version: int) -> None:
    """Refuse a file whose tables are not those of the version its header records."""
    actual = _own_shape(_tables(conn))
    expected = expected_shape(version)
    if actual == expected:
        return
    same = [v for v in range(SCHEMA_VERSION + 1) if expected_shape(v) == actual]
    hint = ""
    if same:
        hint = (
            f" Its tables are those of version {same[0]}: if the file was restored from a "
            f"backup or its header edited, `PRAGMA user_version = {same[0]}` makes the two "
            "agree."
        )
    raise SchemaVersionError(
        f"SQLite database {where} records tether schema version {version} "
        f"(PRAGMA user_version), but its tables are not that version's: "
        f"{_describe(actual, expected)}.{hint} tether did not change the file",
        found=version,
        supported=SCHEMA_VERSION,
    )


@dataclass(frozen=True, slots=True)
class FileState:
    """What a database holds before tether opens it (read with plain SELECTs only)."""

    version: int
    #: LangGraph's SqliteSaver tables are there (`checkpoints` and `writes`).
    official: bool
    #: ... and hold at least one checkpoint.
    official_rows: bool
    #: tether's checkpoints table exists and holds at least one row.
    tether_rows: bool
    #: An import of the official tables started by the saver did not finish.
    import_started: bool


def file_state(conn: sqlite3.Connection, where: str) -> FileState:
    """Read what ``conn``'s database holds; writes nothing.

    Raises:
        StorageError: the file is not a SQLite database.
    """
    with translate_errors(where):
        version = schema_version(conn)
        tables = _tables(conn)
        official = all(_is_official(tables, t) for t in OFFICIAL_TABLES)
        official_rows = official and _has_rows(conn, "checkpoints")
        own = CHECKPOINTS if CHECKPOINTS in tables else None
        if own is None and "checkpoints" in tables and not _is_official(tables, "checkpoints"):
            own = "checkpoints"  # a store before version 4
        tether_rows = own is not None and _has_rows(conn, own)
        started = False
        if META in tables:
            row = conn.execute(
                "SELECT value FROM tether_meta WHERE key = ?", (IMPORT_KEY,)
            ).fetchone()
            started = row is not None and row[0] == IMPORT_STARTED
    return FileState(version, official, official_rows, tether_rows, started)


def _has_rows(conn: sqlite3.Connection, table: str) -> bool:
    # `table` is one of the fixed names above, never input.
    row = conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()  # noqa: S608
    return bool(row and row[0])


#: tether_meta key of an import of the official tables begun by the saver,
#: and its value until the import finished (then the key is deleted).
IMPORT_KEY = "import_official"
IMPORT_STARTED = "started"


# --- opening --------------------------------------------------------------------------


def _check_version(found: int, where: str, target: int) -> None:
    if found > target:
        raise SchemaVersionError(
            f"SQLite database {where} has tether schema version {found}, but this tether "
            f"supports up to version {target}; upgrade tether to open it (nothing was written)",
            found=found,
            supported=target,
        )


def check_readable(conn: sqlite3.Connection, where: str) -> None:
    """Check a store opened read-only: the current version, with that version's tables.

    Raises:
        ConfigError: the database holds no tether store (an empty file, say).
        SchemaVersionError: another version (a read-only saver never migrates),
            or tables that are not those of the recorded version.
        StorageError: the file is not a SQLite database.
    """
    with translate_errors(where):
        found = schema_version(conn)
        _check_version(found, where, SCHEMA_VERSION)
        if found == 0 and not _own_shape(_tables(conn)):
            raise ConfigError(
                f"no tether store in {where} (the database has no tether tables); a "
                "read-only saver never creates one"
            )
        _check_shape(conn, where, found)
        if found < SCHEMA_VERSION:
            raise SchemaVersionError(
                f"SQLite database {where} has tether schema version {found} and this tether "
                f"reads version {SCHEMA_VERSION}; a read-only saver never migrates. Open it "
                "once without read_only=True (tether.SqliteSaver(path).close() migrates it "
                "in place), then read it",
                found=found,
                supported=SCHEMA_VERSION,
            )


def ensure_schema(
    conn: sqlite3.Connection, where: str, *, wal: bool, target: int = SCHEMA_VERSION
) -> int:
    """Bring the database to ``target`` (see the module docstring); returns the version found.

    Raises:
        SchemaVersionError: the database is newer than ``target``, or its
            tables are not those of the version it records.
        StorageError: the file is not a SQLite database or not a tether store.
        MigrationError: a migration failed; the database is unchanged.
    """
    with translate_errors(where):
        found = schema_version(conn)  # a read: fails on a non-database file, writes nothing
        _check_version(found, where, target)
        _check_shape(conn, where, found)
        if found == target:
            return found
        if found == 0:
            _refuse_foreign(conn, where)
            # Only before the file's first page is written (the journal mode
            # writes it), else never: a sweep's freed pages then go back to
            # the file system (PRAGMA incremental_vacuum) instead of waiting
            # in the file for reuse (#15). A file that already has tables
            # (LangGraph's) keeps its mode; SqliteSaver.vacuum() converts it.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
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
            if current != found:
                _check_shape(conn, where, current)
            if current == 0 and target == SCHEMA_VERSION:
                steps: tuple[tuple[str, ...], ...] = (CREATE,)
            else:
                steps = MIGRATIONS[current:target]
            migration_functions(conn)
            for step in steps:
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(target)}")
            conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, TetherError):  # already says what happened (locked, damaged, ...)
            raise
        if isinstance(exc, Exception):
            raise MigrationError(
                f"migrating SQLite database {where} from schema version {found} to {target} "
                f"failed: {exc}; the database was left at version {found}"
            ) from exc
        raise
    return found


def _refuse_foreign(conn: sqlite3.Connection, where: str) -> None:
    tables = _tables(conn)
    names = [n for n in tables if not _is_official(tables, n)]
    if names:
        shown = ", ".join(sorted(names)[:5])
        raise StorageError(
            f"{where} is a SQLite database but not a tether store (it has tables {shown} "
            "and no tether schema version); tether did not write to it. Use a new file "
            "for tether"
        )

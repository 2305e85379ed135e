"""The SQLite backend's statements, composed from named fragments.

Every value is a bound parameter. The only text composed at run time is a
``WHERE`` clause joined from the fixed fragments of :mod:`._saver` (one per
condition, never a value or a key) and the choice between the two read
shapes below.

Table names are tether's own (since schema version 4): ``tether_checkpoints``,
``tether_blobs``, ``tether_writes``, so that LangGraph's official
``checkpoints`` and ``writes`` can share the file.
"""

# ruff: noqa: S608 -- the only formatted-in text is fixed fragments of this module
# and the WHERE clause the saver joins from its own fixed fragments.

from __future__ import annotations

from tether._status import CONTROL_WRITES
from tether.backends._threads import BUCKET_BITS
from tether.checkpoint import ERROR, INTERRUPT

__all__ = [
    "BAD_JSON_ANYWHERE",
    "BAD_JSON_IN_THREAD",
    "CARRIED_STORED",
    "CHECKPOINT_COLUMNS",
    "COLLECT_BLOBS",
    "COLLECT_WRITES",
    "COPY_BLOBS",
    "COPY_CHECKPOINTS",
    "COPY_WRITES",
    "COUNT_WRITES",
    "DELETE_FOR_RUNS",
    "DELETE_THREAD",
    "GET_BY_ID",
    "GET_LATEST",
    "HAS_BLOB",
    "HEAD_BY_ID",
    "HEAD_LATEST",
    "INDEX_CREATE",
    "INDEX_DROP_EMPTY",
    "INDEX_LATEST",
    "INDEX_PUT",
    "INDEX_PUT_FAST",
    "INDEX_RECOUNT",
    "INDEX_RESTATE",
    "INDEX_SET_LATEST",
    "INDEX_TOUCH",
    "INDEX_TO_REBUILD",
    "INDEX_WRITES",
    "INDEX_WRITES_FAST",
    "INLINE_AT",
    "INSERT_BLOB",
    "INSERT_CHECKPOINT",
    "INSERT_WRITE_IGNORE",
    "INSERT_WRITE_REPLACE",
    "PARENT_PROMISE",
    "PRUNE",
    "THREADS_OF_RUNS",
    "read_statement",
]

#: The columns of a checkpoint row as every read returns them (in this order).
CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
    "channel_versions, metadata, checksum, unstored, nwrites"
)

# The blob keys a set of checkpoint rows `p` refers to: (thread, ns, channel, version).
_KEYS = """
    SELECT {distinct}p.thread_id AS t, p.checkpoint_ns AS n, j.key AS ch, j.value AS v
    FROM p, json_each(p.channel_versions) AS j
"""

# The snapshots the append tails among those blobs extend (snapshots have no base).
_SNAPSHOTS = """
    SELECT {distinct}b.thread_id AS t, b.checkpoint_ns AS n, b.channel AS ch, b.base AS v
    FROM k CROSS JOIN tether_blobs AS b
    ON b.thread_id = k.t AND b.checkpoint_ns = k.n AND b.channel = k.ch AND b.version = k.v
    WHERE b.base IS NOT NULL
"""

# Rows of one read: 0 checkpoint, 1 blob, 2 write (12 columns each, padded with NULL).
_ROWS = f"""
SELECT 0, {CHECKPOINT_COLUMNS}
FROM p
UNION ALL
SELECT 1, b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value, b.encoding,
       b.base, b.checksum, NULL, NULL
FROM k CROSS JOIN tether_blobs AS b
ON b.thread_id = k.t AND b.checkpoint_ns = k.n AND b.channel = k.ch AND b.version = k.v
UNION ALL
SELECT 1, b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value, b.encoding,
       b.base, b.checksum, NULL, NULL
FROM s CROSS JOIN tether_blobs AS b
ON b.thread_id = s.t AND b.checkpoint_ns = s.n AND b.channel = s.ch AND b.version = s.v
UNION ALL
SELECT 2, w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.idx,
       w.channel, w.type, w.encoding, w.value, w.checksum
FROM p CROSS JOIN tether_writes AS w
ON w.thread_id = p.thread_id AND w.checkpoint_ns = p.checkpoint_ns
   AND w.checkpoint_id = p.checkpoint_id
"""


def read_statement(where: str, *, one: bool = False, every_ns: bool = False) -> str:
    """One statement that reads checkpoints with every blob and write they need.

    A single SELECT sees one snapshot, so no explicit read transaction is
    needed, and a page costs one run of the VDBE instead of five statements.
    ``where`` filters the checkpoint rows (``c``); the last parameter is the
    row limit. ``one``: the rows are of one checkpoint, which has no
    duplicate blob keys, so the DISTINCTs (temp b-trees) and the
    materializations are skipped.

    ``every_ns``: ``where`` names one thread and no namespace. The rows of the
    root namespace come in primary-key order and those of the others from the
    partial index ``tether_checkpoints_nested``; SQLite merges the two sorted
    branches (``MERGE (UNION ALL)``, no sort), and the parameters of ``where``
    are bound twice, once per branch.
    """
    distinct = "" if one else "DISTINCT "
    materialized = "NOT MATERIALIZED" if one else "MATERIALIZED"
    if every_ns:
        sep = " AND " if where else "WHERE "
        rows = (
            f"    SELECT {_prefixed('c')}\n"
            f"    FROM tether_checkpoints AS c {where}{sep}c.checkpoint_ns = ''\n"
            f"    UNION ALL\n"
            f"    SELECT {_prefixed('c')}\n"
            f"    FROM tether_checkpoints AS c {where}{sep}c.checkpoint_ns <> ''\n"
            f"    ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ?\n"
        )
    else:
        rows = (
            f"    SELECT {_prefixed('c')}\n"
            f"    FROM tether_checkpoints AS c {where}\n"
            f"    ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT ?\n"
        )
    return (
        f"WITH p AS MATERIALIZED (\n"
        f"{rows}"
        f"),\n"
        f"k AS {materialized} ({_KEYS.format(distinct=distinct)}),\n"
        f"s AS {materialized} ({_SNAPSHOTS.format(distinct=distinct)})"
        f"{_ROWS}"
    )


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in CHECKPOINT_COLUMNS.split(","))


GET_LATEST = read_statement("WHERE c.thread_id = ? AND c.checkpoint_ns = ?", one=True)
GET_BY_ID = read_statement(
    "WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = ?", one=True
)

# A checkpoint row alone, and whether it has write rows: what a read of a small
# state needs when every value is inline (channel_versions names no value row)
# and it has no pending writes (nwrites 0 and no write row). Anything else is
# read again with GET_LATEST / GET_BY_ID, in one snapshot (#19).
_HEAD = (
    f"SELECT {_prefixed('c')}, EXISTS (SELECT 1 FROM tether_writes AS w "
    "WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns "
    "AND w.checkpoint_id = c.checkpoint_id) FROM tether_checkpoints AS c "
)
HEAD_LATEST = (
    _HEAD + "WHERE c.thread_id = ? AND c.checkpoint_ns = ? ORDER BY c.checkpoint_id DESC LIMIT 1"
)
HEAD_BY_ID = _HEAD + "WHERE c.thread_id = ? AND c.checkpoint_ns = ? AND c.checkpoint_id = ?"

# --- put ------------------------------------------------------------------------------------

HAS_BLOB = (
    "SELECT 1 FROM tether_blobs WHERE thread_id = ? AND checkpoint_ns = ? "
    "AND channel = ? AND version = ?"
)

INSERT_BLOB = (
    "INSERT OR REPLACE INTO tether_blobs "
    "(thread_id, checkpoint_ns, channel, version, type, encoding, base, value, checksum) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# nwrites counts the writes already there: a checkpoint put again keeps its
# writes, and writes may come before their checkpoint's put.
INSERT_CHECKPOINT = (
    "INSERT OR REPLACE INTO tether_checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, run_id, type, checkpoint, channel_versions, metadata, checksum, "
    "unstored, nwrites) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
    "(SELECT count(*) FROM tether_writes "
    "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3))"
)


# The parent of a put: the values its head keeps inline, what it promised was
# stored (its versions, and what it lacked), and its checksum.
PARENT_PROMISE = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM tether_checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)

# The checkpoints of a namespace, newest first, whose heads keep channel ?3
# inline: where a put looks for a value kept inline that its parent does not
# have (a scan, made only for a channel no blob row holds; the saver compares
# the head's version, which the row's channel_versions does not name). A head
# that is not JSON (damaged) is passed over here and refused by its reads.
_HEAD_TEXT = "CAST(c.checkpoint AS TEXT)"
INLINE_AT = f"""
SELECT {", ".join("c." + c.strip() for c in CHECKPOINT_COLUMNS.split(","))}
FROM tether_checkpoints AS c, json_each(
    CASE WHEN json_valid({_HEAD_TEXT}) THEN {_HEAD_TEXT} ELSE '{{}}' END, '$.channel_values'
) AS j
WHERE c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.type = 'head+json' AND j.key = ?3
ORDER BY c.checkpoint_id DESC
"""

_WRITE_COLUMNS = (
    "INTO tether_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
    "task_path, idx, channel, type, encoding, value, checksum) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

#: Special writes replace, ordinary ones are insert-or-ignore (S2.4).
INSERT_WRITE_REPLACE = "INSERT OR REPLACE " + _WRITE_COLUMNS
INSERT_WRITE_IGNORE = "INSERT OR IGNORE " + _WRITE_COLUMNS

#: After a batch of writes: the checkpoint's write count (the one writer holds the lock).
COUNT_WRITES = (
    "UPDATE tether_checkpoints SET nwrites = (SELECT count(*) FROM tether_writes "
    "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3) "
    "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3"
)

# --- thread operations ---------------------------------------------------------------------


def unneeded_blobs(kept: str, where: str = "") -> str:
    """The predicate on a ``tether_blobs`` row of thread ?1: no checkpoint of ``kept``
    needs it, directly or as the snapshot an append tail extends (one level:
    snapshots have no base).

    ``kept``: a table or CTE of the kept checkpoints (``checkpoint_ns``,
    ``channel_versions``), ``where`` a clause on it (as ``c``). COLLECT_BLOBS
    (what a prune deletes) and the sweep's dry run (``_sweep.PRUNE_LEFT``, what
    a prune would leave) share it, so the two cannot drift. The subquery is
    materialized once (an ephemeral index), so this is one pass.
    """
    return f"""(checkpoint_ns, channel, version) NOT IN (
    WITH live AS MATERIALIZED (
        SELECT c.checkpoint_ns AS n, j.key AS ch, j.value AS v
        FROM {kept} AS c, json_each(c.channel_versions) AS j {where}
    )
    SELECT n, ch, v FROM live
    UNION ALL
    SELECT b.checkpoint_ns, b.channel, b.base
    FROM live CROSS JOIN tether_blobs AS b
    ON b.thread_id = ?1 AND b.checkpoint_ns = live.n AND b.channel = live.ch
       AND b.version = live.v
    WHERE b.base IS NOT NULL
)"""


def unneeded_writes(kept: str) -> str:
    """The predicate on a ``tether_writes`` row of thread ?1: its checkpoint is not one
    of ``kept`` (a table or CTE with ``checkpoint_ns`` and ``checkpoint_id``, and a
    WHERE clause if need be); shared as :func:`unneeded_blobs` is."""
    return (
        f"(checkpoint_ns, checkpoint_id) NOT IN (SELECT checkpoint_ns, checkpoint_id FROM {kept})"
    )


# Blobs of one thread that no checkpoint of that thread refers to.
COLLECT_BLOBS = f"""
DELETE FROM tether_blobs WHERE thread_id = ?1
AND {unneeded_blobs("tether_checkpoints", "WHERE c.thread_id = ?1")}
"""

# Writes of one thread whose checkpoint is gone.
COLLECT_WRITES = "DELETE FROM tether_writes WHERE thread_id = ?1 AND " + unneeded_writes(
    "tether_checkpoints WHERE thread_id = ?1"
)

DELETE_THREAD = (
    "DELETE FROM tether_threads WHERE thread_id = ?",
    "DELETE FROM tether_writes WHERE thread_id = ?",
    "DELETE FROM tether_blobs WHERE thread_id = ?",
    "DELETE FROM tether_checkpoints WHERE thread_id = ?",
)

THREADS_OF_RUNS = (
    "SELECT DISTINCT thread_id FROM tether_checkpoints "
    "WHERE run_id IN (SELECT value FROM json_each(?))"
)

DELETE_FOR_RUNS = (
    "DELETE FROM tether_writes WHERE (thread_id, checkpoint_ns, checkpoint_id) IN ("
    "SELECT thread_id, checkpoint_ns, checkpoint_id FROM tether_checkpoints "
    "WHERE run_id IN (SELECT value FROM json_each(?)))",
    "DELETE FROM tether_checkpoints WHERE run_id IN (SELECT value FROM json_each(?))",
)

# Checksums do not cover thread_id, so copied rows keep valid ones. A copied
# checkpoint's write count is the source's plus the target's writes of that
# checkpoint that the copy keeps (those of other tasks and indexes), so that a
# write the source lost is still found missing in the copy (run before COPY_WRITES).
COPY_CHECKPOINTS = (
    "INSERT OR REPLACE INTO tether_checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, run_id, type, checkpoint, channel_versions, metadata, checksum, "
    "unstored, nwrites) SELECT ?1, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, "
    "c.run_id, c.type, c.checkpoint, c.channel_versions, c.metadata, c.checksum, c.unstored, "
    "c.nwrites + (SELECT count(*) FROM tether_writes AS t WHERE t.thread_id = ?1 "
    "AND t.checkpoint_ns = c.checkpoint_ns AND t.checkpoint_id = c.checkpoint_id "
    "AND NOT EXISTS (SELECT 1 FROM tether_writes AS s WHERE s.thread_id = ?2 "
    "AND s.checkpoint_ns = t.checkpoint_ns AND s.checkpoint_id = t.checkpoint_id "
    "AND s.task_id = t.task_id AND s.idx = t.idx)) "
    "FROM tether_checkpoints AS c WHERE c.thread_id = ?2"
)

COPY_BLOBS = (
    "INSERT OR REPLACE INTO tether_blobs (thread_id, checkpoint_ns, channel, "
    "version, type, encoding, base, value, checksum) SELECT ?, checkpoint_ns, channel, "
    "version, type, encoding, base, value, checksum FROM tether_blobs WHERE thread_id = ?"
)

COPY_WRITES = (
    "INSERT OR REPLACE INTO tether_writes (thread_id, checkpoint_ns, checkpoint_id, "
    "task_id, task_path, idx, channel, type, encoding, value, checksum) SELECT ?, "
    "checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, encoding, value, "
    "checksum FROM tether_writes WHERE thread_id = ?"
)

PRUNE = (
    "DELETE FROM tether_checkpoints WHERE rowid IN (SELECT rowid FROM (SELECT rowid, "
    "row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) "
    "AS rn FROM tether_checkpoints WHERE thread_id = ?) WHERE rn > ?)"
)

# --- damaged rows ------------------------------------------------------------------------------

#: A checkpoint row whose metadata or channel_versions is not JSON, in one thread or in any.
BAD_JSON_IN_THREAD = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM tether_checkpoints WHERE thread_id = ? "
    "AND NOT (json_valid(metadata) AND json_valid(channel_versions)) LIMIT 1"
)
BAD_JSON_ANYWHERE = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM tether_checkpoints "
    "WHERE NOT (json_valid(metadata) AND json_valid(channel_versions)) LIMIT 1"
)

# --- the thread index (#15) ------------------------------------------------------------------


def _state(tid: str, cid: str, runnable: str) -> str:
    """The thread index's status of root checkpoint ``cid`` (SQL expressions) from its
    write rows' channels and ``runnable``: :func:`tether._status.state_of` in SQL."""
    key = f"thread_id = {tid} AND checkpoint_ns = '' AND checkpoint_id = {cid}"
    control = ", ".join(f"'{c}'" for c in sorted(CONTROL_WRITES))
    return f"""CASE
    WHEN EXISTS (SELECT 1 FROM tether_writes WHERE {key} AND channel = '{ERROR}') THEN 'error'
    WHEN EXISTS (
        SELECT 1 FROM tether_writes AS i WHERE i.{key.replace(" AND ", " AND i.")}
        AND i.channel = '{INTERRUPT}' AND NOT EXISTS (
            SELECT 1 FROM tether_writes AS o WHERE o.{key.replace(" AND ", " AND o.")}
            AND o.task_id = i.task_id AND o.channel NOT IN ({control}))
    ) THEN 'interrupted'
    WHEN {runnable} THEN 'pending' ELSE 'idle' END"""


# Of the versions a put carries over (?1, a JSON object) and does not find inline
# in its parent: the type of each one's stored value in the thread and
# namespace (NULL: none; the empty marker: stored empty).
CARRIED_STORED = """
SELECT j.key, b.type FROM json_each(?1) AS j
LEFT JOIN tether_blobs AS b
  ON b.thread_id = ?2 AND b.checkpoint_ns = ?3 AND b.channel = j.key AND b.version = j.value
"""

# A put's index row, run before its checkpoint row is written (so the EXISTS
# tests see whether the checkpoint and its namespace are new): ?1 thread, ?2 ns,
# ?3 checkpoint id, ?4 now, ?5 bytes, ?6 root namespace, ?7 ts, ?8 the metadata
# stored (JSON), ?9 runnable, ?10 the step as JSON and ?11 the user metadata
# (JSON) when the saver has them at hand, else NULL: then they are taken out of
# ?8 here. Only the newest root checkpoint moves the latest columns and the
# status (writes may be stored before their put); the status reads the
# checkpoint's write rows only when it has some. The namespace probe is skipped
# for a root checkpoint of a thread that has a latest one (its namespace exists).
#
# Two statements: INDEX_PUT_FAST, an UPDATE that sets no indexed column, when
# the thread's row is in the bucket of ?4 and keeps its status (SQLite then
# rewrites no index entry: the put adds one page, the row's, to its commit);
# else (no row changed) INDEX_PUT, the upsert that also moves bucket and status.
_NEWEST = "?6 AND (t.latest_id IS NULL OR ?3 >= t.latest_id)"
_HAS_WRITES = (
    "EXISTS (SELECT 1 FROM tether_writes WHERE thread_id = ?1 AND checkpoint_ns = '' "
    "AND checkpoint_id = ?3)"
)
_PUT_STATUS = (
    f"CASE WHEN {_HAS_WRITES} THEN {_state('?1', '?3', '?9')} "
    "WHEN ?9 THEN 'pending' ELSE 'idle' END"
)
_PUT_STEP = "coalesce(?10, json_quote(json_extract(?8, '$.step')))"
_PUT_META = (
    "coalesce(?11, json_remove(?8, '$.source', '$.step', '$.parents', '$.__tether_sealed__'))"
)
_NEW_CHECKPOINT = (
    "NOT EXISTS (SELECT 1 FROM tether_checkpoints "
    "WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND checkpoint_id = ?3)"
)
_NEW_NAMESPACE = (
    "CASE WHEN ?6 AND t.latest_id IS NOT NULL THEN 0 ELSE NOT EXISTS (SELECT 1 "
    "FROM tether_checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2) END"
)
_PUT_MOVES = f"""updated_at = ?4,
    checkpoints = t.checkpoints + {_NEW_CHECKPOINT},
    namespaces = t.namespaces + {_NEW_NAMESPACE},
    bytes = t.bytes + ?5 + length(?8),
    latest_id = CASE WHEN {_NEWEST} THEN ?3 ELSE t.latest_id END,
    latest_step = CASE WHEN {_NEWEST} THEN {_PUT_STEP} ELSE t.latest_step END,
    latest_ts = CASE WHEN {_NEWEST} THEN ?7 ELSE t.latest_ts END,
    metadata = CASE WHEN {_NEWEST} THEN {_PUT_META} ELSE t.metadata END,
    runnable = CASE WHEN {_NEWEST} THEN ?9 ELSE t.runnable END"""
INDEX_PUT_FAST = f"""
UPDATE tether_threads AS t SET {_PUT_MOVES}
WHERE t.thread_id = ?1 AND t.bucket = ?4 >> {BUCKET_BITS}
  AND t.status IS (CASE WHEN {_NEWEST} THEN {_PUT_STATUS} ELSE t.status END)
"""
INDEX_PUT = f"""
INSERT INTO tether_threads AS t (thread_id, created_at, updated_at, checkpoints, namespaces,
    bytes, latest_id, latest_step, latest_ts, metadata, runnable, status, bucket)
SELECT ?1, ?4, ?4, {_NEW_CHECKPOINT}, 1, ?5 + length(?8), CASE WHEN ?6 THEN ?3 END,
       CASE WHEN ?6 THEN {_PUT_STEP} END, CASE WHEN ?6 THEN ?7 END,
       CASE WHEN ?6 THEN {_PUT_META} ELSE '{{}}' END,
       ?6 AND ?9, CASE WHEN ?6 THEN {_PUT_STATUS} END, ?4 >> {BUCKET_BITS}
WHERE true
ON CONFLICT (thread_id) DO UPDATE SET {_PUT_MOVES},
    status = CASE WHEN {_NEWEST} THEN excluded.status ELSE t.status END,
    bucket = excluded.bucket
"""

# After a batch of writes: ?1 thread, ?2 ns, ?3 checkpoint id, ?4 now, ?5 bytes.
# The status follows the writes of the latest root checkpoint (unless unknown).
# As for a put: the FAST update when bucket and status stay, else the full one.
_WRITES_STATUS = f"""CASE WHEN ?2 = '' AND latest_id = ?3 AND status IS NOT NULL
                  THEN {_state("?1", "?3", "runnable")} ELSE status END"""
INDEX_WRITES_FAST = f"""
UPDATE tether_threads SET updated_at = ?4, bytes = bytes + ?5
WHERE thread_id = ?1 AND bucket = ?4 >> {BUCKET_BITS} AND status IS ({_WRITES_STATUS})
"""
INDEX_WRITES = f"""
UPDATE tether_threads SET updated_at = ?4, bucket = ?4 >> {BUCKET_BITS}, bytes = bytes + ?5,
    status = {_WRITES_STATUS}
WHERE thread_id = ?1
"""

#: A thread's counts and bytes from its rows (after prune, copy, delete_for_runs).
INDEX_RECOUNT = """
UPDATE tether_threads SET
    checkpoints = (SELECT count(*) FROM tether_checkpoints WHERE thread_id = ?1),
    namespaces = (SELECT count(DISTINCT checkpoint_ns) FROM tether_checkpoints
                  WHERE thread_id = ?1),
    bytes = coalesce((SELECT sum(length(checkpoint) + length(metadata))
                      FROM tether_checkpoints WHERE thread_id = ?1), 0)
          + coalesce((SELECT sum(length(value)) FROM tether_blobs WHERE thread_id = ?1), 0)
          + coalesce((SELECT sum(length(value)) FROM tether_writes WHERE thread_id = ?1), 0)
WHERE thread_id = ?1
"""

#: The index row of a thread that has no checkpoint left.
INDEX_DROP_EMPTY = (
    "DELETE FROM tether_threads WHERE thread_id = ?1 "
    "AND NOT EXISTS (SELECT 1 FROM tether_checkpoints WHERE thread_id = ?1)"
)

#: A thread's index row as its recount needs it, with its newest root checkpoint now.
INDEX_LATEST = (
    "SELECT t.latest_id, t.status, (SELECT max(checkpoint_id) FROM tether_checkpoints "
    "WHERE thread_id = ?1 AND checkpoint_ns = '') FROM tether_threads AS t WHERE thread_id = ?1"
)

#: A new index row for a thread a copy writes into (the recount fills it).
INDEX_CREATE = (
    "INSERT OR IGNORE INTO tether_threads (thread_id, created_at, updated_at, checkpoints, "
    f"namespaces, bytes, bucket) VALUES (?1, ?2, ?2, 0, 0, 0, ?2 >> {BUCKET_BITS})"
)

#: A thread's index row touched now (?2) by an operation that is not a put.
INDEX_TOUCH = (
    f"UPDATE tether_threads SET updated_at = ?2, bucket = ?2 >> {BUCKET_BITS} WHERE thread_id = ?1"
)

#: The latest columns and status of a thread whose newest root checkpoint changed:
#: ?1 thread, ?2 id, ?3 step, ?4 ts, ?5 metadata, ?6 runnable, ?7 status known.
INDEX_SET_LATEST = f"""
UPDATE tether_threads SET latest_id = ?2, latest_step = ?3, latest_ts = ?4, metadata = ?5,
    runnable = ?6, status = CASE WHEN ?2 IS NULL OR NOT ?7 THEN NULL
                                 ELSE {_state("?1", "?2", "?6")} END
WHERE thread_id = ?1
"""

#: The status of an unchanged latest checkpoint again (a copy may have brought writes).
INDEX_RESTATE = f"""
UPDATE tether_threads SET status = {_state("?1", "latest_id", "runnable")}
WHERE thread_id = ?1 AND latest_id IS NOT NULL AND status IS NOT NULL
"""

#: Threads whose index rows a migration filled and whose status is still to be read.
INDEX_TO_REBUILD = (
    "SELECT thread_id FROM tether_threads WHERE status = ? ORDER BY thread_id LIMIT ?"
)

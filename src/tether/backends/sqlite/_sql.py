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

__all__ = [
    "BAD_JSON_ANYWHERE",
    "BAD_JSON_IN_THREAD",
    "CARRIED_MISSING",
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


def read_statement(where: str, *, one: bool = False) -> str:
    """One statement that reads checkpoints with every blob and write they need.

    A single SELECT sees one snapshot, so no explicit read transaction is
    needed, and a page costs one run of the VDBE instead of five statements.
    ``where`` filters the checkpoint rows (``c``); the last parameter is the
    row limit. ``one``: the rows are of one checkpoint, which has no
    duplicate blob keys, so the DISTINCTs (temp b-trees) and the
    materializations are skipped.
    """
    distinct = "" if one else "DISTINCT "
    materialized = "NOT MATERIALIZED" if one else "MATERIALIZED"
    return (
        f"WITH p AS MATERIALIZED (\n"
        f"    SELECT {_prefixed('c')}\n"
        f"    FROM tether_checkpoints AS c {where}\n"
        f"    ORDER BY c.checkpoint_id DESC, c.thread_id DESC, c.checkpoint_ns DESC LIMIT ?\n"
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

# Of the versions a put carries over from earlier puts (a JSON object), those
# without a stored value in the thread and namespace.
CARRIED_MISSING = """
SELECT j.key, j.value FROM json_each(?1) AS j
WHERE NOT EXISTS (
    SELECT 1 FROM tether_blobs AS b
    WHERE b.thread_id = ?2 AND b.checkpoint_ns = ?3 AND b.channel = j.key AND b.version = j.value
)
"""

# The parent of a put: the values its head keeps inline, what it promised was
# stored (its versions, and what it lacked), and its checksum.
PARENT_PROMISE = (
    f"SELECT {CHECKPOINT_COLUMNS} FROM tether_checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)

# The checkpoints of a namespace, newest first, whose versions give channel ?3
# version ?4: where a put looks for a value kept inline that its parent does
# not have (a scan, made only for a channel no blob row holds).
INLINE_AT = f"""
SELECT {", ".join("c." + c.strip() for c in CHECKPOINT_COLUMNS.split(","))}
FROM tether_checkpoints AS c, json_each(c.channel_versions) AS j
WHERE c.thread_id = ?1 AND c.checkpoint_ns = ?2 AND c.type = 'head+json'
  AND j.key = ?3 AND j.value = ?4
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

# Blobs of one thread that no checkpoint of that thread refers to, directly or
# as the snapshot an append tail extends (one level: snapshots have no base).
# The subquery is materialized once (an ephemeral index), so this is one pass.
COLLECT_BLOBS = """
DELETE FROM tether_blobs WHERE thread_id = ?1
AND (checkpoint_ns, channel, version) NOT IN (
    WITH live AS MATERIALIZED (
        SELECT c.checkpoint_ns AS n, j.key AS ch, j.value AS v
        FROM tether_checkpoints AS c, json_each(c.channel_versions) AS j WHERE c.thread_id = ?1
    )
    SELECT n, ch, v FROM live
    UNION ALL
    SELECT b.checkpoint_ns, b.channel, b.base
    FROM live CROSS JOIN tether_blobs AS b
    ON b.thread_id = ?1 AND b.checkpoint_ns = live.n AND b.channel = live.ch
       AND b.version = live.v
    WHERE b.base IS NOT NULL
)
"""

COLLECT_WRITES = (
    "DELETE FROM tether_writes WHERE thread_id = ? "
    "AND (checkpoint_ns, checkpoint_id) NOT IN ("
    "SELECT checkpoint_ns, checkpoint_id FROM tether_checkpoints WHERE thread_id = ?)"
)

DELETE_THREAD = (
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

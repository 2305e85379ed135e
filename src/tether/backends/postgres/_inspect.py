"""What a Postgres store holds, read without decoding values (see ``backends/_inspect.py``).

Every function takes a connection (the CLI's is read-only), the schema as a
checked, quoted identifier and the store's name for messages. Values are
bound parameters; only the schema identifier is formatted into the SQL.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tether.backends._inspect import HeadInfo, OrphanWrites, TableStats, ThreadInfo
from tether.backends._sqlbase import check_write_count
from tether.backends.postgres._errors import translate
from tether.checkpoint import Address
from tether.errors import shown

__all__ = ["TABLES", "heads", "orphan_writes", "table_stats", "threads"]

# tether's tables in a Postgres schema (LangGraph's official ones may sit beside them).
TABLES = ("tether_checkpoints", "tether_blobs", "tether_writes", "tether_write_counts")

_THREADS = """
SELECT t.thread_id, t.n, t.nss, l.checkpoint_id, l.step, l.ts
FROM (
    SELECT thread_id, count(*) AS n, count(DISTINCT checkpoint_ns) AS nss
    FROM {s}.tether_checkpoints GROUP BY thread_id
) AS t
CROSS JOIN LATERAL (
    SELECT c.checkpoint_id, c.metadata -> 'step' AS step, c.checkpoint ->> 'ts' AS ts
    FROM {s}.tether_checkpoints c WHERE c.thread_id = t.thread_id
    ORDER BY (c.checkpoint_ns = '') DESC, c.checkpoint_id DESC LIMIT 1
) AS l
ORDER BY t.thread_id
"""

# Checkpoints of a thread with their recorded and found write counts, no value read.
_HEADS = """
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       c.checkpoint - 'channel_values', c.metadata,
       coalesce((SELECT wc.n FROM {s}.tether_write_counts wc
                 WHERE wc.thread_id = c.thread_id AND wc.checkpoint_ns = c.checkpoint_ns
                 AND wc.checkpoint_id = c.checkpoint_id), 0),
       (SELECT count(*) FROM {s}.tether_writes w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)
FROM {s}.tether_checkpoints c
WHERE c.thread_id = %(t)s AND (%(ns)s::text IS NULL OR c.checkpoint_ns = %(ns)s)
  AND (%(cid)s::text IS NULL OR c.checkpoint_id = %(cid)s)
ORDER BY c.checkpoint_id DESC, c.checkpoint_ns DESC
LIMIT %(limit)s
"""


def _rows(conn: Any, where: str, what: str, query: str, params: Any = None) -> list[Any]:
    try:
        with conn.cursor() as cur:
            cur.execute(query, params)
            return list(cur.fetchall())
    except psycopg.Error as exc:
        raise translate(exc, f"{what} in {where}") from exc


def threads(conn: Any, schema: str, where: str) -> list[ThreadInfo]:
    """Every thread, sorted by id, with its latest checkpoint (root namespace first)."""
    rows = _rows(conn, where, "listing threads", _THREADS.format(s=schema))
    return [
        ThreadInfo(str(tid), int(n), int(nss), str(cid), step, ts)
        for tid, n, nss, cid, step, ts in rows
    ]


def heads(
    conn: Any,
    schema: str,
    where: str,
    thread_id: str,
    ns: str | None = None,
    *,
    checkpoint_id: str | None = None,
    limit: int | None = None,
) -> list[HeadInfo]:
    """Checkpoints of a thread without their values, newest first; write counts checked."""
    rows = _rows(
        conn,
        where,
        f"reading the history of thread {shown(thread_id)}",
        _HEADS.format(s=schema),
        {"t": thread_id, "ns": ns, "cid": checkpoint_id, "limit": limit},
    )
    out = []
    for tid, row_ns, cid, parent, head, meta, recorded, writes in rows:
        check_write_count(Address(tid, row_ns, cid), recorded, int(writes), where)
        out.append(HeadInfo(str(tid), str(row_ns), dict(head), dict(meta), parent, int(writes)))
    return out


# Pending writes whose checkpoint row is gone, grouped by the checkpoint they name.
_ORPHAN_WRITES = """
SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, count(*)
FROM {s}.tether_writes w
WHERE NOT EXISTS (
    SELECT 1 FROM {s}.tether_checkpoints c WHERE c.thread_id = w.thread_id
    AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id
)
GROUP BY w.thread_id, w.checkpoint_ns, w.checkpoint_id
ORDER BY w.thread_id, w.checkpoint_ns, w.checkpoint_id
"""


def orphan_writes(conn: Any, schema: str, where: str) -> list[OrphanWrites]:
    """Pending writes stored for checkpoints the schema does not hold (see OrphanWrites)."""
    rows = _rows(
        conn, where, "looking for writes without a checkpoint", _ORPHAN_WRITES.format(s=schema)
    )
    return [OrphanWrites(str(t), str(ns), str(cid), int(n)) for t, ns, cid, n in rows]


def table_stats(conn: Any, schema: str, where: str) -> tuple[list[TableStats], int | None]:
    """Rows and bytes (``pg_total_relation_size``) of each of tether's tables, and their sum."""
    tables = []
    total = 0
    for table in TABLES:
        name = f"{schema}.{table}"
        ((rows, size),) = _rows(
            conn,
            where,
            "counting rows",
            f"SELECT (SELECT count(*) FROM {name}), pg_total_relation_size(%s)",  # noqa: S608
            (name,),
        )
        tables.append(TableStats(table, int(rows), int(size)))
        total += int(size)
    return tables, total

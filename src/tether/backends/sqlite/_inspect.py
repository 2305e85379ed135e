"""What a SQLite store holds, read without decoding values (see ``backends/_inspect.py``).

Every function takes a connection (the CLI opens it read-only) and the
file's name for messages. Rows are read whole, so that each is verified
against its checksum before its head or metadata is trusted: a damaged row
is refused, not shown.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from tether.backends._inspect import HeadInfo, OrphanWrites, TableStats, ThreadInfo
from tether.backends._records import decode_head
from tether.backends._sqlbase import metadata_from_json, versions_from_json
from tether.backends.sqlite._conn import translate_errors
from tether.backends.sqlite._rows import check_row, check_write_count
from tether.checkpoint import Address
from tether.errors import DecodeError, TetherError
from tether.serde.base import SerializerProtocol

__all__ = ["TABLES", "heads", "orphan_writes", "table_stats", "threads"]

#: tether's tables in a SQLite file (LangGraph's official ones may sit beside them).
TABLES = ("tether_checkpoints", "tether_blobs", "tether_writes")

# The latest checkpoint of each thread (root namespace first), whole, so that its
# checksum is verified before its metadata and head are read.
_THREADS = """
SELECT c.n, s.nss, c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
       c.type, c.checkpoint, c.channel_versions, c.metadata, c.checksum, c.unstored
FROM (
    SELECT *,
           count(*) OVER (PARTITION BY thread_id) AS n,
           row_number() OVER (
               PARTITION BY thread_id ORDER BY checkpoint_ns = '' DESC, checkpoint_id DESC
           ) AS rn
    FROM tether_checkpoints
) AS c
JOIN (
    SELECT thread_id AS t, count(DISTINCT checkpoint_ns) AS nss
    FROM tether_checkpoints GROUP BY thread_id
) AS s ON s.t = c.thread_id
WHERE c.rn = 1
ORDER BY c.thread_id
"""

# Checkpoints of a thread with their write counts, no blob read; whole rows, so
# that each is verified against its checksum before its head is read. The root
# namespace's rows (primary key) and the others' (the partial index
# tether_checkpoints_nested) are merged in order, without a sort (_sql.read_statement).
_HEAD_BRANCH = """
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,
       c.checkpoint, c.channel_versions, c.metadata, c.checksum, c.unstored, c.nwrites,
       (SELECT count(*) FROM tether_writes AS w WHERE w.thread_id = c.thread_id
        AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)
FROM tether_checkpoints AS c
WHERE c.thread_id = ?1 AND (?3 IS NULL OR c.checkpoint_id = ?3) AND """
_HEADS = (
    _HEAD_BRANCH
    + "c.checkpoint_ns = '' AND coalesce(?2, '') = ''\nUNION ALL"
    + _HEAD_BRANCH
    + "c.checkpoint_ns <> '' AND (?2 IS NULL OR c.checkpoint_ns = ?2)\n"
    + "ORDER BY checkpoint_id DESC, checkpoint_ns DESC\nLIMIT ?4\n"
)


def threads(conn: sqlite3.Connection, serde: SerializerProtocol, where: str) -> list[ThreadInfo]:
    """Every thread, sorted by id, with its latest checkpoint (root namespace first)."""
    out = []
    with translate_errors(where):
        rows = conn.execute(_THREADS).fetchall()
    for n, nss, *row in rows:
        check_row(row, where)  # a damaged row is refused, not shown
        tid, ns, cid, _, tag, head, _, meta = row[:8]
        ts: str | None = None
        try:
            decoded = decode_head(serde, (tag, head), Address(tid, ns, cid))
            ts = decoded.get("ts") if isinstance(decoded, dict) else None
        except TetherError:  # a listing shows what it can
            ts = None
        step = metadata_from_json(meta, address=Address(tid, ns, cid)).get("step")
        out.append(ThreadInfo(str(tid), int(n), int(nss), str(cid), step, ts))
    return out


def heads(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    where: str,
    thread_id: str,
    ns: str | None = None,
    *,
    checkpoint_id: str | None = None,
    limit: int | None = None,
) -> list[HeadInfo]:
    """Checkpoints of a thread without their values, newest first (see Store.heads)."""
    args = (thread_id, ns, checkpoint_id, -1 if limit is None else limit)
    with translate_errors(where):
        rows = conn.execute(_HEADS, args).fetchall()
    out = []
    for *row, writes in rows:
        check_row(row, where)  # a damaged row is refused, not shown
        check_write_count(row, int(writes), where)
        tid, row_ns, cid, parent, tag, head, _, meta = row[:8]
        address = Address(tid, row_ns, cid)
        try:  # not shown, but a row whose versions are not JSON is named here
            versions_from_json(row[6])
        except ValueError as exc:
            raise DecodeError(
                f"stored channel_versions of a checkpoint in {where} is not JSON; "
                "the row is damaged (restore it from a backup)",
                context={"thread_id": tid, "checkpoint_ns": row_ns or None, "checkpoint_id": cid},
            ) from exc
        decoded = decode_head(serde, (tag, head), address)  # plain JSON values only
        out.append(
            HeadInfo(
                str(tid),
                str(row_ns),
                dict(decoded),
                metadata_from_json(meta, address=address),
                parent,
                int(writes),
            )
        )
    return out


# Pending writes whose checkpoint row is gone, grouped by the checkpoint they name.
_ORPHAN_WRITES = """
SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, count(*)
FROM tether_writes AS w
WHERE NOT EXISTS (
    SELECT 1 FROM tether_checkpoints AS c WHERE c.thread_id = w.thread_id
    AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id
)
GROUP BY w.thread_id, w.checkpoint_ns, w.checkpoint_id
ORDER BY w.thread_id, w.checkpoint_ns, w.checkpoint_id
"""


def orphan_writes(conn: sqlite3.Connection, where: str) -> list[OrphanWrites]:
    """Pending writes stored for checkpoints the file does not hold (see OrphanWrites)."""
    with translate_errors(where):
        rows = conn.execute(_ORPHAN_WRITES).fetchall()
    return [OrphanWrites(str(t), str(ns), str(cid), int(n)) for t, ns, cid, n in rows]


def table_stats(conn: sqlite3.Connection, where: str) -> tuple[list[TableStats], int | None]:
    """Rows and bytes of each of tether's tables, and the file's bytes (WAL included)."""
    tables = []
    with translate_errors(where):
        sizes: dict[str, int] = {}
        with contextlib.suppress(sqlite3.Error):  # dbstat is an optional SQLite module
            sizes = {
                str(name): int(size)
                for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
            }
        for table in TABLES:
            (rows,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608
            tables.append(TableStats(table, int(rows), sizes.get(table)))
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    total = pages * size
    wal = Path(where + "-wal")
    if wal.exists():
        total += wal.stat().st_size
    return tables, total

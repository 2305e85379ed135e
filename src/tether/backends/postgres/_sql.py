"""Statement text of the Postgres backend, I/O-free and shared by both cores.

Every statement is built once per saver for its schema (a validated
identifier, the only thing ever formatted into SQL); every value, metadata
filter keys included, travels as a bound parameter.

Writes are single statements wherever the work allows it (data-modifying
CTEs): one statement is one implicit transaction in autocommit mode, so a
``put`` is atomic and costs one round trip, with no BEGIN/COMMIT around it.
The thread index (#15) is a CTE of those same statements.

Why one long module: it is all of one backend's SQL, composed from fragments
that lean on each other (the put's carried-over resolution feeds the index
CTE, the fenced variants gate every fragment); split, each half would need
the other's text.
"""

# ruff: noqa: S608 -- the only formatted-in text is the schema name, checked by
# check_schema_name; values always travel as bound parameters.
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tether.backends._threads import BUCKET_BITS, ThreadQuery
from tether.backends.postgres import _schema
from tether.backends.postgres._history import HistoryStatements
from tether.contract import EMPTY_TAG
from tether.errors import ConfigError

__all__ = ["ListQuery", "Statements", "check_schema_name"]

# What a put's checkpoint insert returns to its thread index step (#15).
_CP_RETURNING = (
    "RETURNING (xmax = 0) AS new, metadata -> 'step' AS step, "
    "metadata - 'source' - 'step' - 'parents' - '__tether_sealed__' AS meta"
)

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def needed_blobs(checkpoints: str, blobs: str, threads: str) -> str:
    """CTEs ``live`` and ``keep``: the blobs (``thread_id, checkpoint_ns, channel,
    version``) that the checkpoints of ``checkpoints`` (a FROM item named ``c``) of
    the threads ``thread_id = threads`` need, directly or as the snapshot a live
    tail extends (one level: snapshots have no base).

    The blob sweep (``Statements.sweep_blobs``, what a prune deletes) and the
    sweep's dry run (``SweepStatements.prune_dry``, what a prune would leave) share
    it and :data:`KEEPS_BLOB`, so the two cannot drift. The thread predicate is
    repeated on the blobs: the planner does not carry it across the join.
    """
    return f"""live AS MATERIALIZED (
    SELECT DISTINCT c.thread_id, c.checkpoint_ns, v.key AS channel, v.value AS version
    FROM {checkpoints}
    CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v(key, value)
    WHERE c.thread_id = {threads}
), keep AS MATERIALIZED (
    SELECT thread_id, checkpoint_ns, channel, version FROM live
    UNION
    SELECT bl.thread_id, bl.checkpoint_ns, bl.channel, bl.base
    FROM live JOIN {blobs} bl
      ON bl.thread_id = live.thread_id AND bl.checkpoint_ns = live.checkpoint_ns
     AND bl.channel = live.channel AND bl.version = live.version
    WHERE bl.base IS NOT NULL AND bl.thread_id = {threads}
)"""


#: Blob row ``bl`` is one that :func:`needed_blobs`' ``keep`` holds.
KEEPS_BLOB = """EXISTS (
        SELECT 1 FROM keep
        WHERE keep.thread_id = bl.thread_id AND keep.checkpoint_ns = bl.checkpoint_ns
          AND keep.channel = bl.channel AND keep.version = bl.version)"""


def check_schema_name(schema: str) -> str:
    """A schema name safe to format into SQL (lower-case identifier)."""
    if not isinstance(schema, str) or not _IDENT.match(schema):
        raise ConfigError(
            f"schema {schema!r} must be a lower-case SQL identifier "
            "(letters, digits, underscore; at most 63 characters)"
        )
    return schema


# Columns every read returns, in this order (see _codec.decode_row): the
# checkpoint, its parent, the channels recorded as absent when it was put, and
# -- in the same round trip -- its channel blobs (with the snapshot each append
# tail extends) and pending writes as parallel arrays, the writes in no
# particular order (decode_row puts them in S2.4 order).
_READ_COLUMNS = """
    c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
    c.checkpoint, c.metadata, c.absent, c.nwrites,
    b.channels, b.types, b.encodings, b.blobs, b.bases, b.s_encodings, b.s_blobs,
    w.task_ids, w.task_paths, w.channels, w.types, w.encodings, w.blobs, w.idxs
"""

# The chosen rows with their inline values and versions taken out of the
# checkpoint once per row. OFFSET 0 keeps the subquery from being flattened
# into the outer query, where each of the per-channel tests below would take
# them out of the (detoasted) checkpoint again: quadratic in the channel count.
# The ORDER BY (a page's) is repeated there so that the outer query knows the
# rows arrive in order and does not sort them again.
_ROWS = """SELECT r.*, r.checkpoint -> 'channel_values' AS inline_values,
       r.checkpoint -> 'channel_versions' AS versions,
       coalesce((SELECT wc.n FROM {counts} wc WHERE wc.thread_id = r.thread_id
                 AND wc.checkpoint_ns = r.checkpoint_ns AND wc.checkpoint_id = r.checkpoint_id),
                0) AS nwrites
FROM ({inner}) r {order_by} OFFSET 0"""


def _order(alias: str, order: tuple[str, ...]) -> str:
    """An ORDER BY list of ``("column DESC", ...)`` on the relation ``alias``."""
    return ", ".join(f"{alias}.{term}" for term in order)


def _read_joins(blobs: str, writes: str) -> str:
    # Inline (primitive) channels are skipped: their value is in the checkpoint
    # (`?` on the row's inline values is a binary search). Each other channel's
    # blob, and the snapshot an append tail extends, is one primary-key lookup:
    # the LIMIT 1 subqueries cannot be flattened into a join, so the planner
    # cannot pick a hash join over every blob of the thread (which it did on a
    # young table whose statistics said "one row"). A channel without a blob row
    # comes back with a NULL type: decode_row decides whether that is allowed.
    # Pending writes come as parallel arrays in scan order, sorted into S2.4
    # order by decode_row (the contract's order is Python's tuple order, which
    # COLLATE "C" matches). Sorting on the server cost a sort per ordered
    # aggregate (five aggregates ordered by (task_path, task_id, idx): 3x the
    # server time at 100,000 writes), and then, with a window sorting once and
    # each aggregate ordered by its row number, still seven sort nodes set up
    # per row read: a fifth of a get_tuple's server time on a short thread,
    # where the checkpoint has no pending writes at all (#19).
    return f"""
    LEFT JOIN LATERAL (
        SELECT array_agg(v.key) AS channels, array_agg(bl.type) AS types,
               array_agg(bl.encoding) AS encodings, array_agg(bl.blob) AS blobs,
               array_agg(bl.base) AS bases, array_agg(sn.encoding) AS s_encodings,
               array_agg(sn.blob) AS s_blobs
        FROM jsonb_each_text(c.versions) AS v(key, value)
        LEFT JOIN LATERAL (
            SELECT b1.type, b1.encoding, b1.blob, b1.base FROM {blobs} b1
            WHERE b1.thread_id = c.thread_id AND b1.checkpoint_ns = c.checkpoint_ns
              AND b1.channel = v.key AND b1.version = v.value
            LIMIT 1
        ) bl ON true
        LEFT JOIN LATERAL (
            SELECT s1.encoding, s1.blob FROM {blobs} s1
            WHERE bl.base IS NOT NULL AND s1.thread_id = c.thread_id
              AND s1.checkpoint_ns = c.checkpoint_ns AND s1.channel = v.key
              AND s1.version = bl.base
            LIMIT 1
        ) sn ON true
        WHERE NOT coalesce(c.inline_values ? v.key, false)
    ) b ON true
    LEFT JOIN LATERAL (
        SELECT array_agg(cw.task_id) AS task_ids, array_agg(cw.task_path) AS task_paths,
               array_agg(cw.channel) AS channels, array_agg(cw.type) AS types,
               array_agg(cw.encoding) AS encodings, array_agg(cw.blob) AS blobs,
               array_agg(cw.idx) AS idxs
        FROM {writes} cw
        WHERE cw.thread_id = c.thread_id AND cw.checkpoint_ns = c.checkpoint_ns
          AND cw.checkpoint_id = c.checkpoint_id
    ) w ON true
"""


@dataclass(frozen=True, slots=True)
class ListQuery:
    """One page query of ``list`` and its parameters."""

    text: str
    params: list[Any]


class Statements:
    """All statement text for one schema."""

    def __init__(self, schema: str) -> None:
        self.schema = check_schema_name(schema)
        q = f'"{self.schema}"'
        self._schema = q
        self.checkpoints = f"{q}.{_schema.CHECKPOINTS}"
        self.blobs = f"{q}.{_schema.BLOBS}"
        self.writes = f"{q}.{_schema.WRITES}"
        self.migrations = f"{q}.{_schema.MIGRATIONS_TABLE}"
        self.leases = f"{q}.{_schema.LEASES}"
        self.counts = f"{q}.{_schema.WRITE_COUNTS_TABLE}"
        self.threads = f"{q}.{_schema.THREADS_TABLE}"
        self._joins = _read_joins(self.blobs, self.writes)
        #: LangGraph's get_delta_channel_history, one statement (see _history).
        self.history = HistoryStatements(self.checkpoints, self.blobs, self.writes, self.counts)

        self.get_by_id = self._read(
            "c.thread_id = %s AND c.checkpoint_ns = %s AND c.checkpoint_id = %s"
        )
        self.get_latest = self._read(
            "c.thread_id = %s AND c.checkpoint_ns = %s", ("checkpoint_id DESC",), "1"
        )
        # get_writes: one checkpoint's writes with their keys, in get_tuple's order.
        # The first row holds the checkpoint's write count (none: no checkpoint row).
        self.get_writes = f"""
(SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, coalesce((
     SELECT wc.n FROM {self.counts} wc WHERE wc.thread_id = c.thread_id
     AND wc.checkpoint_ns = c.checkpoint_ns AND wc.checkpoint_id = c.checkpoint_id), 0)
 FROM {self.checkpoints} c
 WHERE c.thread_id = %(t)s AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = %(cid)s)
UNION ALL
(SELECT cw.task_id, cw.task_path, cw.idx, cw.channel, cw.type, cw.encoding, cw.blob, NULL
 FROM {self.writes} cw
 WHERE cw.thread_id = %(t)s AND cw.checkpoint_ns = %(ns)s AND cw.checkpoint_id = %(cid)s
 ORDER BY cw.task_path, cw.task_id, cw.idx)
"""

        # A put is composed of named fragments: the blob rows it writes (left out
        # when every written value is inline: then the server neither plans nor
        # runs an INSERT into tether_blobs, its indexes and its foreign key), and
        # the checkpoint row, inserted as it is when every channel is named in
        # new_versions (most steps of a loop that updates its whole state; about
        # a sixth less server time), else with the unnamed channels resolved.
        # Each is made once plain and once fenced (the variants below, for leased
        # threads): the fenced one gates every row source on the lease's epoch.
        def blob_rows(gate: str = "") -> str:
            return f"""INSERT INTO {self.blobs}
        (thread_id, checkpoint_ns, channel, version, type, encoding, blob, base)
    SELECT %(thread_id)s, %(ns)s, x.channel, x.version, x.type, x.encoding, x.blob, x.base
    FROM unnest(%(channels)s::text[], %(versions)s::text[], %(types)s::text[],
                %(encodings)s::smallint[], %(blobs)s::bytea[], %(bases)s::text[])
        AS x(channel, version, type, encoding, blob, base){gate}
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE
        SET type = EXCLUDED.type, blob = EXCLUDED.blob, encoding = EXCLUDED.encoding,
            base = EXCLUDED.base"""

        # Channels the put does not name are read from storage, never from the
        # caller's channel_values (the contract). Each is, in this order:
        # - carried: inline in the parent at the same version (a binary search
        #   in the parent's inline values);
        # - a blob row at that version (one primary-key probe, LIMIT 1 so that
        #   the planner cannot hash every blob of the thread instead): nothing
        #   to do;
        # - inline in any row of the namespace at that version (a scan, made
        #   only for a channel neither of the above has: LangGraph's `__copy__`
        #   fork is put under another parent with new_versions={});
        # - else absent: no put stored a value for it. Recorded in `absent`, so
        #   that a read can tell such a channel from one whose row was lost.
        # Every step is per channel and logarithmic, so a put is linear in the
        # channel count (the parent's JSONB was detoasted once per channel before).
        # The parent's inline values and versions are taken out of its row once,
        # on the outer side of the per-channel loop: read there, a large JSONB is
        # used in place, where a rescanned inner side copied it for every channel.
        resolve_ctes = f"""head AS (
    SELECT %(checkpoint)s::jsonb AS cp, %(named)s::jsonb AS named
), unnamed AS MATERIALIZED (
    SELECT v.key, v.version,
           CASE WHEN parent.versions -> v.key = v.version
                THEN parent.inline_values -> v.key END AS carried
    FROM head
    LEFT JOIN (
        SELECT p.checkpoint -> 'channel_values' AS inline_values,
               p.checkpoint -> 'channel_versions' AS versions
        FROM {self.checkpoints} p
        WHERE p.thread_id = %(thread_id)s AND p.checkpoint_ns = %(ns)s
          AND p.checkpoint_id = %(parent_id)s
        OFFSET 0
    ) parent ON true
    CROSS JOIN LATERAL jsonb_each(head.cp -> 'channel_versions') AS v(key, version)
    WHERE NOT head.named ? v.key
), found AS MATERIALIZED (
    SELECT u.key, coalesce(u.carried, (
        SELECT o.checkpoint -> 'channel_values' -> u.key FROM {self.checkpoints} o
        WHERE o.thread_id = %(thread_id)s AND o.checkpoint_ns = %(ns)s
          AND o.checkpoint -> 'channel_versions' -> u.key = u.version
          AND o.checkpoint -> 'channel_values' ? u.key
        LIMIT 1)) AS value
    FROM unnamed u
    WHERE u.carried IS NOT NULL OR (
        SELECT 1 FROM {self.blobs} bl
        WHERE bl.thread_id = %(thread_id)s AND bl.checkpoint_ns = %(ns)s
          AND bl.channel = u.key AND bl.version = u.version #>> '{{}}'
        LIMIT 1) IS NULL
)"""
        columns = (
            "(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, "
            "metadata, absent)"
        )
        upsert = """ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE
    SET parent_checkpoint_id = EXCLUDED.parent_checkpoint_id,
        checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata,
        absent = EXCLUDED.absent"""

        def insert_resolved(gate: str = "") -> str:
            return f"""INSERT INTO {self.checkpoints} {columns}
SELECT %(thread_id)s, %(ns)s, %(checkpoint_id)s, %(parent_id)s,
    jsonb_set(head.cp, '{{channel_values}}', coalesce(
        (SELECT jsonb_object_agg(f.key, f.value) FROM found f WHERE f.value IS NOT NULL),
        '{{}}'::jsonb) || coalesce(head.cp -> 'channel_values', '{{}}'::jsonb)),
    %(metadata)s::jsonb,
    (SELECT array_agg(f.key) FROM found f WHERE f.value IS NULL)
FROM head{gate}
{upsert}"""

        named_values = (
            "%(thread_id)s, %(ns)s, %(checkpoint_id)s, %(parent_id)s, %(checkpoint)s::jsonb,\n"
            "        %(metadata)s::jsonb, NULL"
        )

        def insert_named(gate: str = "") -> str:
            source = f"SELECT {named_values}{gate}" if gate else f"VALUES ({named_values})"
            return f"INSERT INTO {self.checkpoints} {columns}\n{source}\n{upsert}"

        # The thread index (#15) is the statement's last step: it reads what the
        # checkpoint's insert returns (whether the row is new, its step and user
        # metadata taken out of the JSONB just stored), so it neither probes the
        # checkpoint table for the row nor parses the metadata again.
        blobs_cte = f"blobs AS (\n    {blob_rows()}\n)"
        cp_resolved = f"cp_row AS (\n{insert_resolved()}\n{_CP_RETURNING}\n)"
        cp_named = f"cp_row AS (\n{insert_named()}\n{_CP_RETURNING}\n)"
        idx = self._index_put(resolved=True)
        idx_named = self._index_put(resolved=False)
        self.put = f"WITH {blobs_cte}, {resolve_ctes}, {cp_resolved}\n{idx}"
        self.put_inline = f"WITH {resolve_ctes}, {cp_resolved}\n{idx}"
        self.put_named = f"WITH {blobs_cte}, {cp_named}\n{idx_named}"
        self.put_named_inline = f"WITH {cp_named}\n{idx_named}"

        # Special writes (negative idx) replace, ordinary ones are insert-or-ignore
        # (S2.4); both halves in one statement so a batch is atomic.
        write_cols = (
            "(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
            "channel, type, encoding, blob)"
        )
        pk = "(thread_id, checkpoint_ns, checkpoint_id, task_id, idx)"

        def write_rows(p: str, gate: str = "") -> str:
            arrays = (
                f"%({p}idx)s::integer[], %({p}channels)s::text[], %({p}types)s::text[], "
                f"%({p}encodings)s::smallint[],\n                %({p}blobs)s::bytea[]"
            )
            return f"""INSERT INTO {self.writes} {write_cols}
    SELECT %(thread_id)s, %(ns)s, %(checkpoint_id)s, %(task_id)s, %(task_path)s,
           x.idx, x.channel, x.type, x.encoding, x.blob
    FROM unnest({arrays}) AS x(idx, channel, type, encoding, blob){gate}"""

        def special_rows(gate: str = "") -> str:
            return f"""{write_rows("s_", gate)}
    ON CONFLICT {pk} DO UPDATE
        SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob,
            encoding = EXCLUDED.encoding, task_path = EXCLUDED.task_path
    RETURNING (xmax = 0) AS fresh"""

        def ordinary_rows(gate: str = "") -> str:
            return f"{write_rows('o_', gate)}\nON CONFLICT {pk} DO NOTHING\n    RETURNING 1"

        # The checkpoint's write count (tether_write_counts) goes up by the rows
        # the batch inserted, as its inserts return them: an ordinary row that
        # met an existing key (or one a concurrent batch was inserting: the
        # insert waits for it) returns nothing, a special row that replaced one
        # returns xmax <> 0. So concurrent batches with the same keys count each
        # row once. Two batches meet on the count row's key: the second upsert
        # waits for the first to commit and adds to its count, whether or not
        # the checkpoint row is there yet (LangGraph's "async" durability puts
        # writes beside their put). A gated (fenced) batch that wrote nothing
        # adds nothing.
        def count_rows(special: bool) -> str:
            fresh = "(SELECT count(*) FROM ordinary)"
            if special:
                fresh += " + (SELECT count(*) FROM special WHERE fresh)"
            return f"""INSERT INTO {self.counts} AS wc (thread_id, checkpoint_ns, checkpoint_id, n)
    SELECT %(thread_id)s, %(ns)s, %(checkpoint_id)s, k.n FROM (SELECT {fresh} AS n) k
    WHERE k.n > 0
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET n = wc.n + EXCLUDED.n"""

        self.put_writes = (
            f"\nWITH special AS (\n    {special_rows()}\n), "
            f"ordinary AS (\n{ordinary_rows()}\n), "
            f"idx AS (\n{self._index_writes(special=True)}\n)\n{count_rows(True)}\n"
        )
        # A batch of ordinary writes only (what a task's writes almost always
        # are): the special half would plan and run an empty upsert.
        self.put_writes_ordinary = (
            f"\nWITH ordinary AS (\n{ordinary_rows()}\n), "
            f"idx AS (\n{self._index_writes(special=False)}\n)\n{count_rows(False)}\n"
        )

        # The fenced variants, for writes to a thread this saver holds a lease
        # on (S5.4, #18.7). `fence` reads the thread's lease row FOR SHARE and
        # every row source is gated on its epoch being the lease's, so a
        # stale holder's statement writes nothing, blobs included, and returns
        # the epoch it found (the statement's one row). FOR SHARE, not FOR KEY
        # SHARE: a new holder's epoch bump is an UPDATE of a non-key column,
        # which takes FOR NO KEY UPDATE and conflicts with FOR SHARE only. So
        # the bump waits for an in-flight put that read the old epoch, and a
        # put that reads the row after the bump (READ COMMITTED re-reads the
        # newest version of a row it locks) sees the new epoch: every put is
        # ordered before or after each takeover.
        gate = (
            "\n    WHERE EXISTS (SELECT 1 FROM fence WHERE fence.epoch = %(lease_epoch)s::bigint)"
        )
        fence = f"""fence AS (
    SELECT l.epoch FROM {self.leases} l WHERE l.thread_id = %(thread_id)s FOR SHARE
)"""
        fenced_result = "SELECT (SELECT fence.epoch FROM fence)"
        fenced_blobs = f"blobs AS (\n    {blob_rows(gate)}\n)"
        f_idx = f"idx AS (\n{self._index_put(resolved=True)}\n)"
        f_idx_named = f"idx AS (\n{self._index_put(resolved=False)}\n)"
        # The index step reads the gated checkpoint insert: a stale holder's
        # statement inserts no checkpoint row and so no index change.
        self.put_fenced = (
            f"WITH {fence}, {fenced_blobs}, {resolve_ctes}, "
            f"cp_row AS (\n{insert_resolved(gate)}\n{_CP_RETURNING}\n), {f_idx}\n"
            f"{fenced_result}\n"
        )
        self.put_named_fenced = (
            f"WITH {fence}, {fenced_blobs}, "
            f"cp_row AS (\n{insert_named(gate)}\n{_CP_RETURNING}\n), {f_idx_named}\n"
            f"{fenced_result}\n"
        )
        self.put_inline_fenced = (
            f"WITH {fence}, {resolve_ctes}, "
            f"cp_row AS (\n{insert_resolved(gate)}\n{_CP_RETURNING}\n), {f_idx}\n"
            f"{fenced_result}\n"
        )
        self.put_named_inline_fenced = (
            f"WITH {fence}, cp_row AS (\n{insert_named(gate)}\n{_CP_RETURNING}\n), "
            f"{f_idx_named}\n{fenced_result}\n"
        )
        self.put_writes_fenced = (
            f"WITH {fence}, special AS (\n    {special_rows(gate)}\n), "
            f"ordinary AS (\n{ordinary_rows(gate)}\n), counted AS (\n{count_rows(True)}\n), "
            f"idx AS (\n{self._index_writes(special=True, gate=gate)}\n)\n"
            f"{fenced_result}\n"
        )
        self.put_writes_ordinary_fenced = (
            f"WITH {fence}, ordinary AS (\n{ordinary_rows(gate)}\n), "
            f"counted AS (\n{count_rows(False)}\n), "
            f"idx AS (\n{self._index_writes(special=False, gate=gate)}\n)\n"
            f"{fenced_result}\n"
        )

        self.delete_thread = f"""
WITH i AS (DELETE FROM {self.threads} WHERE thread_id = %(t)s),
     w AS (DELETE FROM {self.writes} WHERE thread_id = %(t)s),
     n AS (DELETE FROM {self.counts} WHERE thread_id = %(t)s),
     b AS (DELETE FROM {self.blobs} WHERE thread_id = %(t)s)
DELETE FROM {self.checkpoints} WHERE thread_id = %(t)s
"""

        # copy_thread: one statement, so the copy is all-or-nothing.
        self.copy_thread = f"""
WITH b AS (
    INSERT INTO {self.blobs}
        (thread_id, checkpoint_ns, channel, version, encoding, type, blob, base)
    SELECT %(dst)s, checkpoint_ns, channel, version, encoding, type, blob, base
    FROM {self.blobs} WHERE thread_id = %(src)s
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO UPDATE
        SET encoding = EXCLUDED.encoding, type = EXCLUDED.type, blob = EXCLUDED.blob,
            base = EXCLUDED.base
), w AS (
    INSERT INTO {self.writes} {write_cols}
    SELECT %(dst)s, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type,
           encoding, blob
    FROM {self.writes} WHERE thread_id = %(src)s
    ON CONFLICT {pk} DO UPDATE
        SET task_path = EXCLUDED.task_path, channel = EXCLUDED.channel,
            type = EXCLUDED.type, encoding = EXCLUDED.encoding, blob = EXCLUDED.blob
), n AS (
    -- the source's counts plus the target's rows the copy keeps (other keys), so
    -- that a write the source lost is still found missing in the copy
    INSERT INTO {self.counts} (thread_id, checkpoint_ns, checkpoint_id, n)
    SELECT %(dst)s, wc.checkpoint_ns, wc.checkpoint_id, wc.n + (
        SELECT count(*) FROM {self.writes} t
        WHERE t.thread_id = %(dst)s AND t.checkpoint_ns = wc.checkpoint_ns
          AND t.checkpoint_id = wc.checkpoint_id
          AND NOT EXISTS (
              SELECT 1 FROM {self.writes} s
              WHERE s.thread_id = %(src)s AND s.checkpoint_ns = t.checkpoint_ns
                AND s.checkpoint_id = t.checkpoint_id AND s.task_id = t.task_id
                AND s.idx = t.idx))
    FROM {self.counts} wc WHERE wc.thread_id = %(src)s
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET n = EXCLUDED.n
)
INSERT INTO {self.checkpoints} {columns}
SELECT %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata,
       absent
FROM {self.checkpoints} WHERE thread_id = %(src)s
{upsert}
"""

        # Thread operations that drop checkpoints run as three statements in one
        # transaction. The blob sweep is last and, in READ COMMITTED, takes a
        # fresh snapshot: a checkpoint another process committed meanwhile is
        # seen, so the blobs it refers to survive (the appending-writer test).
        # `metadata ? 'run_id'` is the predicate of the partial run_id index:
        # without it the planner cannot use that index and scans the table.
        self.delete_runs = f"""
DELETE FROM {self.checkpoints}
WHERE metadata ? 'run_id' AND metadata ->> 'run_id' = ANY(%(runs)s::text[])
RETURNING thread_id
"""
        self.prune_checkpoints = f"""
DELETE FROM {self.checkpoints} c
USING (
    SELECT thread_id, checkpoint_ns, checkpoint_id,
           row_number() OVER (PARTITION BY thread_id, checkpoint_ns
                              ORDER BY checkpoint_id DESC) AS rn
    FROM {self.checkpoints} WHERE thread_id = ANY(%(threads)s::text[])
) r
WHERE c.thread_id = r.thread_id AND c.checkpoint_ns = r.checkpoint_ns
  AND c.checkpoint_id = r.checkpoint_id AND r.rn > %(keep)s
"""

        # Writes (and their counts) whose checkpoint is gone, then blobs no
        # checkpoint refers to, both limited to the threads just touched (every
        # namespace of them). The thread list is repeated inside NOT EXISTS: the
        # planner does not carry `= ANY` across the join, and would scan all
        # checkpoints.
        def orphans(table: str) -> str:
            return f"""DELETE FROM {table} w
WHERE w.thread_id = ANY(%(threads)s::text[])
  AND NOT EXISTS (
    SELECT 1 FROM {self.checkpoints} c
    WHERE c.thread_id = ANY(%(threads)s::text[])
      AND c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns
      AND c.checkpoint_id = w.checkpoint_id)"""

        self.sweep_writes = f"WITH n AS (\n{orphans(self.counts)}\n)\n{orphans(self.writes)}\n"
        # Blobs are live when a checkpoint refers to them or when they are the
        # snapshot a live tail extends (one level: snapshots have no base).
        # Rows another transaction holds locked are skipped, not waited for:
        # that is a concurrent put whose tail's foreign-key check locked the
        # snapshot it extends, so the snapshot is about to be live again. A
        # snapshot this sweep deletes first makes that put's check fail, and
        # the put stores the whole value instead.
        self.sweep_blobs = f"""
WITH {needed_blobs(f"{self.checkpoints} c", self.blobs, "ANY(%(threads)s::text[])")}, doomed AS (
    SELECT bl.thread_id, bl.checkpoint_ns, bl.channel, bl.version
    FROM {self.blobs} bl
    WHERE bl.thread_id = ANY(%(threads)s::text[])
      AND NOT {KEEPS_BLOB}
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {self.blobs} bl USING doomed
WHERE bl.thread_id = ANY(%(threads)s::text[])
  AND bl.thread_id = doomed.thread_id AND bl.checkpoint_ns = doomed.checkpoint_ns
  AND bl.channel = doomed.channel AND bl.version = doomed.version
"""
        self.prune_all = f"""
WITH i AS (DELETE FROM {self.threads} WHERE thread_id = ANY(%(threads)s::text[])),
     w AS (DELETE FROM {self.writes} WHERE thread_id = ANY(%(threads)s::text[])),
     n AS (DELETE FROM {self.counts} WHERE thread_id = ANY(%(threads)s::text[])),
     b AS (DELETE FROM {self.blobs} WHERE thread_id = ANY(%(threads)s::text[]))
DELETE FROM {self.checkpoints} WHERE thread_id = ANY(%(threads)s::text[])
"""

        # Leases (S5.4): an advisory lock on a hash of lease_key(), taken on the
        # lease's own connection (a session lock on a caller's single one); the
        # statement also names the server process holding it.
        self.try_lease = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0)), pg_backend_pid()"
        self.try_xact_lease = (
            "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0)), pg_backend_pid()"
        )
        self.release_lease = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
        # Whether the server process %(pid)s holds the advisory lock of %(key)s:
        # pg_locks shows a bigint key as its high and low halves (classid, objid).
        lock_held = """EXISTS (
        SELECT 1 FROM pg_locks k
        WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1
          AND k.pid = %(pid)s
          AND k.classid = ((hashtextextended(%(key)s, 0) >> 32) & 4294967295)::oid
          AND k.objid = (hashtextextended(%(key)s, 0) & 4294967295)::oid)"""
        # Taking a lease bumps the thread's epoch, committed at once on another
        # connection than the lock's (whose transaction stays open). The bump
        # happens only while the lock is still held by the taker, checked after
        # the row is locked (ON CONFLICT locks it before its WHERE): a taker
        # whose lock died on the way cannot raise the epoch over a newer
        # holder's, so the current epoch is always the latest lock holder's.
        self.take_lease = f"""
INSERT INTO {self.leases} AS l (thread_id, epoch, backend_pid)
SELECT %(thread_id)s, 1, %(pid)s WHERE {lock_held}
ON CONFLICT (thread_id) DO UPDATE
    SET epoch = l.epoch + 1, backend_pid = EXCLUDED.backend_pid, taken_at = now()
    WHERE {lock_held}
RETURNING l.epoch
"""
        # A held lease: the thread's epoch (NULL without a lease row) and whether
        # the lease's server process still holds the lock.
        self.lease_state = f"""
SELECT (SELECT l.epoch FROM {self.leases} l WHERE l.thread_id = %(thread_id)s), {lock_held}
"""

    def _read(self, where: str, order: tuple[str, ...] = (), limit: str | None = None) -> str:
        """Checkpoints chosen by ``where`` (first ``limit`` by ``order``), values joined on.

        The rows are chosen in a subquery and only then joined to their blobs
        and writes, so the joins run for the rows returned and nothing else,
        whatever plan the filter gets.
        """
        inner = f"SELECT * FROM {self.checkpoints} c WHERE {where}"
        if order:
            inner += f" ORDER BY {_order('c', order)}"
        if limit is not None:
            inner += f" LIMIT {limit}"
        return self._read_from(inner, order)

    def _read_from(self, inner: str, order: tuple[str, ...]) -> str:
        """The rows of the query ``inner``, values joined on, in ``order`` (column DESC, ...)."""
        order_by = f"ORDER BY {_order('r', order)}" if order else ""
        rows = _ROWS.format(inner=inner, order_by=order_by, counts=self.counts)
        text = f"SELECT {_READ_COLUMNS} FROM ({rows}) c {self._joins}"
        return f"{text} ORDER BY {_order('c', order)}" if order else text

    def lease_key(self, thread_id: str) -> str:
        """The text hashed into the advisory-lock key of a thread's lease."""
        return f"tether.lease:{self.schema}:{thread_id}"

    def list_page(
        self,
        *,
        thread_id: str | None,
        ns: str | None,
        before_id: str | None,
        filter: dict[str, Any],
        after: tuple[str, str, str] | None,
        page: int,
        jsonb: Any,
    ) -> ListQuery:
        """The query of one ``list`` page, newest first, resuming after the key ``after``.

        Keyset pagination: each page is one indexed query starting where the
        previous one stopped, so no cursor is held between pages and memory
        stays bounded by the page size. The key is
        ``(checkpoint_id, thread_id, checkpoint_ns)``, unique per row.
        """
        where: list[str] = []
        params: list[Any] = []
        if thread_id is not None:
            where.append("c.thread_id = %s")
            params.append(thread_id)
        if ns is not None:
            where.append("c.checkpoint_ns = %s")
            params.append(ns)
        if before_id is not None:
            where.append("c.checkpoint_id < %s")
            params.append(before_id)
        if filter and thread_id is None:
            # Containment is implied by the exact equality below and can use the
            # GIN index on metadata; a thread's own index serves thread listings.
            where.append("c.metadata @> %s::jsonb")
            params.append(jsonb(filter))
        for key, value in filter.items():
            # JSONB `=` is exact equality with numbers by value and booleans apart
            # from numbers (metadata_matches); a missing key gives NULL, never true.
            where.append("c.metadata -> %s = %s::jsonb")
            params.extend([key, jsonb(value)])
        if thread_id is not None and ns is None:
            return self._thread_page(where, params, after, page)
        if thread_id is not None:
            order: tuple[str, ...] = ("checkpoint_id DESC",)
            if after is not None:
                where.append("c.checkpoint_id < %s")
                params.append(after[0])
        else:
            order = ("checkpoint_id DESC", "thread_id DESC", "checkpoint_ns DESC")
            if after is not None:
                where.append("(c.checkpoint_id, c.thread_id, c.checkpoint_ns) < (%s, %s, %s)")
                params.extend(after)
        params.append(page)
        return ListQuery(self._read(" AND ".join(where) or "true", order, "%s"), params)

    # --- the thread index (#15) ------------------------------------------------------

    def _state(self, cid: str, runnable: str, batch: str = "") -> str:
        """The index's status of root checkpoint ``cid`` (SQL) from its write rows as the
        statement's snapshot sees them, plus ``batch`` (a UNION ALL of the rows it
        writes itself): :func:`tether._status.state_of` in SQL."""
        source = (
            f"SELECT task_id, channel FROM {self.writes} WHERE thread_id = %(thread_id)s "
            f"AND checkpoint_ns = '' AND checkpoint_id = {cid}{batch}"
        )
        return _schema.state_query(source, runnable)

    def _status_call(self, runnable: str, task: str, channels: str) -> str:
        """SQL calling ``tether_thread_status`` for the statement's root checkpoint."""
        return (
            f"{self._schema}.tether_thread_status(%(thread_id)s, %(checkpoint_id)s, "
            f"{runnable}, {task}, {channels})"
        )

    def _index_put(self, *, resolved: bool) -> str:
        """A put's upsert of its thread's index row, reading the ``cp_row`` insert.

        ``cp_row`` returns whether the checkpoint row is new (``xmax = 0``: an
        ON CONFLICT update leaves the row's lock in the new version's xmax) and
        the step and user metadata of the JSONB it stored. The statement's
        snapshot does not see the new row, so the namespace probe tells a new
        namespace; it is skipped when the checkpoint is not new or is a root
        one in a thread that has a latest root checkpoint. The status reads
        the checkpoint's write rows through ``tether_thread_status`` (see
        ``_schema.THREAD_STATUS``) as the statement's snapshot sees them; in
        the ON CONFLICT branch, which runs with the index row locked, it is
        computed again when another writer changed the row since that snapshot
        (the locked row's xmin is not the one the snapshot sees): a put_writes
        of the checkpoint that committed while this statement waited for the
        row is counted.
        (A thread's first checkpoint has no index row to lock: a put_writes
        racing it sees no row to update and leaves the status the put
        computes. LangGraph's first checkpoint of a thread is its input one,
        whose only task writes the input: no error or interrupt to miss.)
        ``resolved``: the put carries channels over
        (the ``unnamed``/``found`` CTEs), and a candidate trigger
        (``_threads.py``) with a stored value, not the empty marker, makes
        nodes runnable. ``OFFSET 0`` keeps ``r`` a subquery, evaluated once:
        pulled up, its EXISTS was copied into each of the three places that
        read ``r.runnable`` and run twice per put (about 10 us).
        """
        runnable = "%(ix_runnable)s::boolean"
        if resolved:
            runnable += f""" OR EXISTS (
            SELECT 1 FROM unnamed u WHERE u.key = ANY(%(ix_candidates)s::text[])
              AND NOT EXISTS (SELECT 1 FROM found f WHERE f.key = u.key AND f.value IS NULL)
              AND NOT EXISTS (
                  SELECT 1 FROM {self.blobs} bl
                  WHERE bl.thread_id = %(thread_id)s AND bl.checkpoint_ns = %(ns)s
                    AND bl.channel = u.key AND bl.version = u.version #>> '{{}}'
                    AND bl.type = '{EMPTY_TAG}'))"""
        newest = "%(ix_root)s AND (t.latest_id IS NULL OR %(checkpoint_id)s >= t.latest_id)"
        later = ("latest_id", "latest_step", "latest_ts", "metadata", "runnable")
        moved = ",\n        ".join(
            f"{c} = CASE WHEN {newest} THEN EXCLUDED.{c} ELSE t.{c} END" for c in later
        )
        # The status the INSERT computed (EXCLUDED.status) read the write rows
        # with the statement's snapshot. It is exact when nobody changed the
        # index row between that snapshot and the lock: every put_writes
        # upserts the row, so one that committed meanwhile gave the locked row a
        # newer xmin. Only then is the status computed again where the row is
        # locked (a plpgsql call with a fresh snapshot, about a sixth of a put's
        # server time; a sync-durability put of a new checkpoint never needs it).
        status = self._status_call("EXCLUDED.runnable", "NULL", "NULL")
        unchanged = (
            f"t.xmin = (SELECT s.xmin FROM {self.threads} s WHERE s.thread_id = %(thread_id)s)"
        )
        moved += (
            f",\n        status = CASE WHEN NOT ({newest}) THEN t.status"
            f"\n            WHEN {unchanged} THEN EXCLUDED.status ELSE {status} END"
        )
        has_writes = (
            f"EXISTS (SELECT 1 FROM {self.writes} WHERE thread_id = %(thread_id)s "
            "AND checkpoint_ns = '' AND checkpoint_id = %(checkpoint_id)s)"
        )
        state = self._status_call("r.runnable", "NULL", "NULL")
        return f"""INSERT INTO {self.threads} AS t (thread_id, created_at, updated_at, checkpoints,
        namespaces, bytes, latest_id, latest_step, latest_ts, metadata, runnable, status,
        bucket)
    SELECT %(thread_id)s, %(ix_now)s, %(ix_now)s, cp_row.new::int, 1,
           %(ix_bytes)s + octet_length(%(metadata)s::text),
           CASE WHEN %(ix_root)s THEN %(checkpoint_id)s END,
           CASE WHEN %(ix_root)s THEN cp_row.step END,
           CASE WHEN %(ix_root)s THEN %(ix_ts)s::text END,
           CASE WHEN %(ix_root)s THEN cp_row.meta ELSE '{{}}'::jsonb END,
           %(ix_root)s AND r.runnable,
           CASE WHEN NOT %(ix_root)s THEN NULL WHEN {has_writes} THEN {state}
                WHEN r.runnable THEN 'pending' ELSE 'idle' END,
           %(ix_now)s::bigint >> {BUCKET_BITS}
    FROM cp_row, (SELECT {runnable} AS runnable OFFSET 0) r
    ON CONFLICT (thread_id) DO UPDATE SET
        updated_at = EXCLUDED.updated_at,
        bucket = EXCLUDED.bucket,
        checkpoints = t.checkpoints + EXCLUDED.checkpoints,
        namespaces = t.namespaces + CASE
            WHEN EXCLUDED.checkpoints = 0 OR (%(ix_root)s AND t.latest_id IS NOT NULL) THEN 0
            ELSE (NOT EXISTS (SELECT 1 FROM {self.checkpoints} c
                WHERE c.thread_id = %(thread_id)s AND c.checkpoint_ns = %(ns)s))::int END,
        bytes = t.bytes + EXCLUDED.bytes,
        {moved}"""

    def _index_writes(self, *, special: bool, gate: str = "") -> str:
        """A put_writes' upsert of its thread's index row (a CTE of its statement).

        The status follows the writes of the latest root checkpoint: the rows
        stored when the row is locked and the batch's own. The SET of an ON
        CONFLICT DO UPDATE runs with the row locked, and ``tether_thread_status``
        is volatile (a fresh snapshot), so a put or put_writes that held the
        row first is seen (see ``_schema.THREAD_STATUS``). An upsert, not an
        UPDATE: when the thread's first put has inserted the row but not yet
        committed, an UPDATE would not see the row and pass by, and a put of
        the next checkpoint could then compute the status before these writes
        commit (LangGraph's async durability stores a failed node's error
        while the checkpoints before it are still being put). The insert waits
        for that put instead; with no row at all it leaves one that counts no
        checkpoint yet, which the put then fills in.
        """
        channels = "%(o_channels)s::text[]"
        if special:
            channels += " || %(s_channels)s::text[]"
        state = self._status_call("t.runnable", "%(task_id)s", channels)
        # The row's status is exact for its latest checkpoint as it stands (each
        # writer set it under the row lock), so a batch changes it only in ways
        # its channels tell: an error write makes it `error`; a batch without
        # control writes (what a node's writes are) leaves `error`, `pending`
        # and `idle` as they are (it cannot add an error or an interrupted task);
        # the rest (an interrupt, a resume, an `interrupted` thread whose task
        # may now have written) read the writes again (_threads.write_hint).
        state = (
            "CASE WHEN %(ix_error)s::boolean THEN 'error' WHEN %(ix_plain)s::boolean "
            f"AND t.status IN ('error', 'pending', 'idle') THEN t.status ELSE {state} END"
        )
        return f"""INSERT INTO {self.threads} AS t (thread_id, created_at, updated_at, checkpoints,
        namespaces, bytes, bucket)
    SELECT %(thread_id)s, %(ix_now)s, %(ix_now)s, 0, 0, %(ix_bytes)s,
           %(ix_now)s::bigint >> {BUCKET_BITS}{gate}
    ON CONFLICT (thread_id) DO UPDATE
    SET updated_at = EXCLUDED.updated_at, bucket = EXCLUDED.bucket,
        bytes = t.bytes + EXCLUDED.bytes,
        status = CASE WHEN %(ns)s = '' AND t.latest_id = %(checkpoint_id)s
                           AND t.status IS NOT NULL
                      THEN {state} ELSE t.status END"""

    def index_statements(self) -> dict[str, str]:
        """Statements that recount a thread's index row after a thread operation."""
        t = self.threads
        state = self._state("t.latest_id", "t.runnable")
        return {
            "has_rows": f"SELECT EXISTS (SELECT 1 FROM {self.checkpoints} WHERE thread_id = %s)",
            "create": f"INSERT INTO {t} (thread_id, created_at, updated_at, checkpoints, "
            "namespaces, bytes, bucket) VALUES (%(thread_id)s, %(now)s, %(now)s, 0, 0, 0, "
            f"%(now)s::bigint >> {BUCKET_BITS}) ON CONFLICT (thread_id) DO UPDATE "
            "SET updated_at = EXCLUDED.updated_at, bucket = EXCLUDED.bucket",
            "drop_empty": f"DELETE FROM {t} WHERE thread_id = %(thread_id)s AND NOT EXISTS "
            f"(SELECT 1 FROM {self.checkpoints} WHERE thread_id = %(thread_id)s)",
            "latest": f"SELECT t.latest_id, (SELECT max(checkpoint_id) FROM {self.checkpoints} "
            "WHERE thread_id = %(thread_id)s AND checkpoint_ns = '') "
            f"FROM {t} t WHERE t.thread_id = %(thread_id)s FOR UPDATE",
            "recount": f"""UPDATE {t} SET
    checkpoints = (SELECT count(*) FROM {self.checkpoints} WHERE thread_id = %(thread_id)s),
    namespaces = (SELECT count(DISTINCT checkpoint_ns) FROM {self.checkpoints}
                  WHERE thread_id = %(thread_id)s),
    bytes = coalesce((SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text))
                      FROM {self.checkpoints} WHERE thread_id = %(thread_id)s), 0)
          + coalesce((SELECT sum(octet_length(blob)) FROM {self.blobs}
                      WHERE thread_id = %(thread_id)s), 0)
          + coalesce((SELECT sum(octet_length(blob)) FROM {self.writes}
                      WHERE thread_id = %(thread_id)s), 0)
WHERE thread_id = %(thread_id)s""",
            "restate": f"UPDATE {t} t SET status = {state} WHERE t.thread_id = %(thread_id)s "
            "AND t.latest_id IS NOT NULL AND t.status IS NOT NULL",
            "set_latest": f"""UPDATE {t} t
SET latest_id = %(latest)s, latest_step = %(step)s::jsonb,
    latest_ts = %(ts)s, metadata = %(metadata)s::jsonb, runnable = %(runnable)s,
    status = CASE WHEN %(latest)s::text IS NULL OR NOT %(known)s THEN NULL
                  ELSE {self._state("%(latest)s", "%(runnable)s")} END
WHERE t.thread_id = %(thread_id)s""",
            "to_rebuild": f"SELECT thread_id, latest_id FROM {t} WHERE status = %(status)s "
            "ORDER BY thread_id LIMIT 64",
        }

    def threads_query(self, q: ThreadQuery, jsonb: Any) -> ListQuery:
        """One page of ``threads()``: keyset paging on (updated_at, thread_id) or thread_id.

        Metadata keys and values are bound parameters; JSONB ``=`` is the
        contract's equality (as ``list``'s filter), so no row is re-checked.
        """
        where: list[str] = []
        params: list[Any] = []
        if q.statuses is not None:
            where.append("c.status = ANY(%s::text[])")
            params.append(list(q.statuses))
        # Each bound on updated_at is also one on bucket, which the indexes hold.
        if q.updated_before is not None:
            where.append(f"c.updated_at < %s AND c.bucket <= %s::bigint >> {BUCKET_BITS}")
            params.extend((q.updated_before, q.updated_before))
        if q.updated_after is not None:
            where.append(f"c.updated_at > %s AND c.bucket >= %s::bigint >> {BUCKET_BITS}")
            params.extend((q.updated_after, q.updated_after))
        for key, value in q.metadata.items():
            where.append("c.metadata -> %s = %s::jsonb")
            params.extend([key, jsonb(value)])
        if q.order == "thread_id":
            order = "c.thread_id"
            if q.after is not None:
                where.append("c.thread_id > %s")
                params.append(q.after[0])
        else:
            # bucket first: the index's order (see _threads.BUCKET_BITS)
            desc = " DESC" if q.descending else ""
            order = f"c.bucket{desc}, c.updated_at{desc}, c.thread_id{desc}"
            if q.after is not None:
                cmp = "<" if desc else ">"
                where.append(
                    f"c.bucket {cmp}= %s::bigint >> {BUCKET_BITS} "
                    f"AND (c.updated_at, c.thread_id) {cmp} (%s, %s)"
                )
                params.extend((q.after[0], *q.after))
        params.append(q.limit + 1)
        text = (
            "SELECT c.thread_id, c.status, c.created_at, c.updated_at, c.checkpoints, "
            "c.namespaces, c.bytes, c.latest_id, c.latest_step, c.latest_ts, c.metadata "
            f"FROM {self.threads} c WHERE {' AND '.join(where) or 'true'} "
            f"ORDER BY {order} LIMIT %s"
        )
        return ListQuery(text, params)

    def _thread_page(
        self,
        where: list[str],
        params: list[Any],
        after: tuple[str, str, str] | None,
        page: int,
    ) -> ListQuery:
        """A page of one thread across its namespaces: root rows merged with the rest.

        Root-namespace rows come from the primary key ``(thread_id,
        checkpoint_ns, checkpoint_id)``; the others from the partial index
        ``tether_checkpoints_thread_ns_idx`` (``WHERE checkpoint_ns <> ''``), so a
        thread without subgraphs (most of them) costs no second index on every
        put. Each branch is already in ``(checkpoint_id, checkpoint_ns)`` DESC
        order and stops at ``page`` rows; Postgres merges the two.
        """
        base = " AND ".join(where)
        root = [base, "c.checkpoint_ns = ''"]
        rest = [base, "c.checkpoint_ns <> ''"]
        root_params, rest_params = list(params), list(params)
        if after is not None:
            cid, after_ns = after[0], after[2]
            # Rows after (cid, after_ns) in this order: (id, ns) < (cid, after_ns).
            # For a root row (ns '', the least string) that is id < cid, or
            # id = cid when after_ns is not itself ''.
            root.append("c.checkpoint_id <= %s" if after_ns else "c.checkpoint_id < %s")
            root_params.append(cid)
            rest.append("(c.checkpoint_id, c.checkpoint_ns) < (%s, %s)")
            rest_params.extend([cid, after_ns])
        order = ("checkpoint_id DESC", "checkpoint_ns DESC")
        table = self.checkpoints
        inner = (
            f"(SELECT * FROM {table} c WHERE {' AND '.join(root)} "
            "ORDER BY c.checkpoint_id DESC LIMIT %s) UNION ALL "
            f"(SELECT * FROM {table} c WHERE {' AND '.join(rest)} "
            f"ORDER BY {_order('c', order)} LIMIT %s)"
        )
        text = self._read_from(
            f"SELECT * FROM ({inner}) c ORDER BY {_order('c', order)} LIMIT %s", order
        )
        return ListQuery(text, [*root_params, page, *rest_params, page, page])

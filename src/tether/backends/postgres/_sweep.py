"""The Postgres statements of a sweep (#15), built once per schema.

A thread is swept in a statement (TTL: a batch of threads) whose rows are
the index rows still due *and* free:

* ``updated_at`` is before the thread's cutoff, re-read on the row's newest
  version (``FOR UPDATE``), so a put or put_writes committed since the sweep
  found the thread keeps it;
* ``SKIP LOCKED``: a put or put_writes whose statement has reached the
  thread's index row holds that row's lock until it commits, and the sweep
  leaves that thread for next time rather than wait, so no writer ever waits
  for a sweep longer than one batch's statement, nor a sweep for a writer.
  A put that had not reached the row when the sweep deleted it stores its
  checkpoint into a new thread row, as after ``delete_thread`` (its parent's
  rows are gone; the grace period makes this an idle thread's first put in
  longer than its TTL);
* ``pg_try_advisory_xact_lock`` on the lease's key (``Statements.lease_key``):
  a leased thread is skipped, and until the sweep commits nobody can take a
  lease on a thread it deletes.

The deletes of every table are data-modifying CTEs of that one statement, so
a thread goes whole or not at all whatever kills the sweep.
"""

from __future__ import annotations

from tether.backends._threads import BUCKET_BITS
from tether.backends.postgres._sql import KEEPS_BLOB, Statements, needed_blobs

__all__ = ["SweepStatements"]


class SweepStatements:
    """The sweep's SQL text for one schema (only the validated schema name is formatted in)."""

    def __init__(self, sql: Statements) -> None:
        t = sql.threads
        # The lease key as Statements.lease_key builds it, in SQL; the schema
        # name travels as a parameter.
        lease = "hashtextextended('tether.lease:' || %(schema)s || ':' || t.thread_id, 0)"
        due = f"""SELECT t.thread_id, t.checkpoints, t.bytes
    FROM {t} t
    JOIN unnest(%(threads)s::text[], %(cutoffs)s::bigint[]) AS d(thread_id, cutoff)
      ON t.thread_id = d.thread_id
    WHERE t.updated_at < d.cutoff"""  # noqa: S608
        self.expired_dry = f"""
SELECT t.thread_id, t.checkpoints, t.bytes FROM ({due}) t
WHERE pg_try_advisory_xact_lock({lease})
"""  # noqa: S608 -- fixed fragments and the validated schema name
        gone = "(SELECT thread_id FROM free)"
        self.expired = f"""
WITH locked AS (
    {due}
    ORDER BY t.thread_id
    FOR UPDATE OF t SKIP LOCKED
), free AS MATERIALIZED (
    SELECT t.thread_id, t.checkpoints, t.bytes FROM locked t
    WHERE pg_try_advisory_xact_lock({lease})
), i AS (DELETE FROM {t} WHERE thread_id IN {gone}),
   w AS (DELETE FROM {sql.writes} WHERE thread_id IN {gone}),
   n AS (DELETE FROM {sql.counts} WHERE thread_id IN {gone}),
   b AS (DELETE FROM {sql.blobs} WHERE thread_id IN {gone}),
   c AS (DELETE FROM {sql.checkpoints} WHERE thread_id IN {gone})
SELECT thread_id, checkpoints, bytes FROM free
"""  # noqa: S608
        # One thread to prune: its row if still idle and not leased, locked
        # until the prune commits.
        self.claim = f"""
SELECT t.checkpoints, t.bytes FROM {t} t
WHERE t.thread_id = %(thread)s AND t.updated_at < %(before)s
  AND pg_try_advisory_xact_lock({lease})
FOR UPDATE SKIP LOCKED
"""  # noqa: S608
        # A dry run's prune of one thread: the claim's checks without its row lock
        # (nothing is written), then what prune_checkpoints, sweep_writes and
        # sweep_blobs would leave (the same predicates, read rather than run;
        # the blobs' are sweep_blobs' own fragments, needed_blobs and KEEPS_BLOB),
        # counted as the index's recount counts it. Rows: none when the thread is
        # left alone, else (checkpoints, bytes) of its row now and of what is left.
        c, bl, w = sql.checkpoints, sql.blobs, sql.writes
        self.prune_dry = f"""
WITH claim AS (
    SELECT t.checkpoints, t.bytes FROM {t} t
    WHERE t.thread_id = %(thread)s AND t.updated_at < %(before)s
      AND pg_try_advisory_xact_lock({lease})
), kept AS MATERIALIZED (
    SELECT r.thread_id, r.checkpoint_ns, r.checkpoint_id, r.checkpoint, r.size FROM (
        SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint,
               octet_length(checkpoint::text) + octet_length(metadata::text) AS size,
               row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn
        FROM {c} WHERE thread_id = %(thread)s
    ) r WHERE r.rn <= %(keep)s
), {needed_blobs("kept c", bl, "%(thread)s")}
SELECT claim.checkpoints, claim.bytes, (SELECT count(*) FROM kept),
    coalesce((SELECT sum(size) FROM kept), 0)
    + coalesce((SELECT sum(octet_length(bl.blob)) FROM {bl} bl
                WHERE bl.thread_id = %(thread)s AND {KEEPS_BLOB}), 0)
    + coalesce((SELECT sum(octet_length(w.blob)) FROM {w} w
                WHERE w.thread_id = %(thread)s AND EXISTS (
                    SELECT 1 FROM kept k
                    WHERE k.checkpoint_ns = w.checkpoint_ns
                      AND k.checkpoint_id = w.checkpoint_id)), 0)
FROM claim
"""  # noqa: S608
        # A read counts as activity (refresh_on_read).
        self.touch = (
            f"UPDATE {t} SET updated_at = %(now)s, bucket = %(now)s::bigint >> {BUCKET_BITS} "  # noqa: S608
            "WHERE thread_id = %(thread)s AND updated_at < %(now)s"
        )
        self.counts = f"SELECT checkpoints, bytes FROM {t} WHERE thread_id = %s"  # noqa: S608
        self.retention_rows = f"SELECT thread_id, retention FROM {t} WHERE retention IS NOT NULL"  # noqa: S608
        self.retention_get = f"SELECT retention FROM {t} WHERE thread_id = %s"  # noqa: S608
        # RETURNING, not the row count: a pipeline's cursor may not know it yet.
        self.retention_set = (
            f"UPDATE {t} SET retention = %s::jsonb WHERE thread_id = %s RETURNING 1"  # noqa: S608
        )
        # One sweeper per schema at a time (the background sweeper): a session
        # advisory lock on this key, held for one round.
        self.try_lock = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
        self.unlock = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"
        self.lock_key = f"tether.sweep:{sql.schema}"

"""Sealed rows of the Postgres backend sealed again (#17): statements and row updates.

I/O-free, shared by both cores. What changes in a record is
:mod:`tether.backends._sealing`; this module lays rows out for the
statements below, composed from named fragments like those of :mod:`._sql`.

``copy_thread`` runs its copy statement and, in the same transaction, seals
the target's copies of sealed rows again for the target thread. A rekey goes
through each table in primary-key order, a batch of stale rows at a time (rows
not sealed under the active key), seals them in the client, and writes each
back only if it is still the row it read (``AND b.blob = x.old``): a put that
replaced it meanwhile wins. Which rows remain is read from the store, so a
rekey killed at any point is finished by running it again.
"""

# ruff: noqa: S608 -- the only formatted-in text is the schema's table names
# (checked by check_schema_name) and the fixed fragments of this module.

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.backends._payload import BlobCodec
from tether.backends._records import WriteRecord
from tether.backends._sealing import (
    head_is_current,
    metadata_is_current,
    reseal_head,
    reseal_metadata,
    reseal_value,
    reseal_write,
)
from tether.backends.postgres._arrays import BYTEA
from tether.backends.postgres._codec import metadata_json
from tether.backends.postgres._sql import Statements
from tether.encryption import SEALED_METADATA, Encryption

__all__ = [
    "SealingStatements",
    "blob_updates",
    "head_updates",
    "meta_updates",
    "stale_checkpoints",
    "write_updates",
]

_BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
_WRITE_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
_CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")

_BLOB_COLS = "thread_id, checkpoint_ns, channel, version, type, encoding, base, blob"
_WRITE_COLS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, "
    "encoding, blob"
)
_CHECKPOINT_COLS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
    "checkpoint -> 'channel_versions', metadata"
)
# Not sealed under the key whose header is %(header)s (it follows the
# payload's 4-byte checksum): what a rekey pass rewrites.
_STALE = "NOT (encoding & 8 = 8 AND substring({col} from 5 for length(%(header)s)) = %(header)s)"


def _after(key: Sequence[str]) -> str:
    cols = ", ".join(key)
    marks = ", ".join(f"%(k{i})s" for i in range(len(key)))
    return f" AND ({cols}) > ({marks})"


class SealingStatements:
    """The statements of copy's sealing and of rekey, for one schema."""

    def __init__(self, sql: Statements) -> None:
        blobs, writes, checkpoints = sql.blobs, sql.writes, sql.checkpoints
        self.sealed_blobs = (
            f"SELECT {_BLOB_COLS} FROM {blobs} WHERE thread_id = %(src)s AND encoding & 8 = 8"
        )
        self.sealed_writes = (
            f"SELECT {_WRITE_COLS} FROM {writes} WHERE thread_id = %(src)s AND encoding & 8 = 8"
        )
        self.sealed_meta = (
            f"SELECT {_CHECKPOINT_COLS} FROM {checkpoints} "
            f"WHERE thread_id = %(src)s AND metadata ? '{SEALED_METADATA}'"
        )
        stale_blobs = f"SELECT {_BLOB_COLS} FROM {blobs} WHERE {_STALE.format(col='blob')}"
        stale_writes = f"SELECT {_WRITE_COLS} FROM {writes} WHERE {_STALE.format(col='blob')}"
        every_meta = f"SELECT {_CHECKPOINT_COLS} FROM {checkpoints} WHERE true"
        self.stale: dict[str, tuple[str, str]] = {}
        for table, text, key in (
            ("blobs", stale_blobs, _BLOB_KEY),
            ("writes", stale_writes, _WRITE_KEY),
            ("checkpoints", every_meta, _CHECKPOINT_KEY),
        ):
            order = f" ORDER BY {', '.join(key)} LIMIT %(batch)s"
            self.stale[table] = (text + order, text + _after(key) + order)
        self.count_stale = (
            f"SELECT (SELECT count(*) FROM {blobs} WHERE {_STALE.format(col='blob')}) "
            f"+ (SELECT count(*) FROM {writes} WHERE {_STALE.format(col='blob')})"
        )
        # Which key sealed a head's inline values and its metadata is read in the client.
        self.every_checkpoint = (
            f"SELECT checkpoint -> 'channel_values', metadata FROM {checkpoints}"
        )
        # Heads keep small values inline, sealed (or in clear, written before
        # encryption was on): which key sealed them is read in the client.
        inline = "coalesce(checkpoint -> 'channel_values', '{}'::jsonb) <> '{}'::jsonb"
        heads = (
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, "
            f"metadata FROM {checkpoints} WHERE {inline}"
        )
        order = f" ORDER BY {', '.join(_CHECKPOINT_KEY)} LIMIT %(batch)s"
        self.stale["heads"] = (heads + order, heads + _after(_CHECKPOINT_KEY) + order)
        # A head with a value sealed inline: a one-element array (encryption.seal_inline).
        sealed_inline = "checkpoint -> 'channel_values' @? 'strict $.* ? (@.type() == \"array\")'"
        self.sealed_heads = (
            "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, "
            f"metadata FROM {checkpoints} WHERE thread_id = %(src)s AND {sealed_inline}"
        )
        # copy_thread: the target's copies, made in this transaction (their
        # metadata is set_meta's).
        self.set_heads = (
            f"UPDATE {checkpoints} AS c SET checkpoint = x.head::jsonb "
            "FROM unnest(%(ht)s::text[], %(hns)s::text[], %(hcid)s::text[], %(head)s::text[]) "
            "AS x(t, ns, cid, head) "
            "WHERE c.thread_id = x.t AND c.checkpoint_ns = x.ns AND c.checkpoint_id = x.cid"
        )
        # rekey: head and metadata, only if still as read (a put may have replaced it).
        self.swap_heads = (
            f"UPDATE {checkpoints} AS c SET checkpoint = x.head::jsonb, "
            "metadata = x.metadata::jsonb FROM unnest(%(ht)s::text[], %(hns)s::text[], "
            "%(hcid)s::text[], %(head)s::text[], %(meta)s::text[], %(old_head)s::text[], "
            "%(old)s::text[]) AS x(t, ns, cid, head, metadata, old_head, old) "
            "WHERE c.thread_id = x.t AND c.checkpoint_ns = x.ns AND c.checkpoint_id = x.cid "
            "AND c.checkpoint = x.old_head::jsonb AND c.metadata = x.old::jsonb"
        )
        # copy_thread by a saver without keys, still one statement: the copy,
        # returning whether the source holds sealed rows (the caller then rolls
        # it back: their copies would be bound to the source thread).
        self.copy_unless_sealed = (
            sql.copy_thread.rstrip()
            + f"\nRETURNING EXISTS (SELECT 1 FROM {blobs} WHERE thread_id = %(src)s "
            f"AND encoding & 8 = 8) OR EXISTS (SELECT 1 FROM {writes} WHERE "
            f"thread_id = %(src)s AND encoding & 8 = 8) OR EXISTS (SELECT 1 FROM "
            f"{checkpoints} WHERE thread_id = %(src)s AND (metadata ? '{SEALED_METADATA}' "
            f"OR {sealed_inline}))"
        )

        blob_set = (
            f"UPDATE {blobs} AS b SET encoding = x.encoding, blob = x.blob "
            "FROM unnest(%(t)s::text[], %(ns)s::text[], %(ch)s::text[], %(v)s::text[], "
            "%(enc)s::smallint[], %(blob)s::bytea[], %(old)s::bytea[]) "
            "AS x(t, ns, ch, v, encoding, blob, old) "
            "WHERE b.thread_id = x.t AND b.checkpoint_ns = x.ns AND b.channel = x.ch "
            "AND b.version = x.v"
        )
        write_set = (
            f"UPDATE {writes} AS w SET encoding = x.encoding, blob = x.blob "
            "FROM unnest(%(t)s::text[], %(ns)s::text[], %(cid)s::text[], %(task)s::text[], "
            "%(idx)s::integer[], %(enc)s::smallint[], %(blob)s::bytea[], %(old)s::bytea[]) "
            "AS x(t, ns, cid, task, idx, encoding, blob, old) "
            "WHERE w.thread_id = x.t AND w.checkpoint_ns = x.ns AND w.checkpoint_id = x.cid "
            "AND w.task_id = x.task AND w.idx = x.idx"
        )
        meta_set = (
            f"UPDATE {checkpoints} AS c SET metadata = x.metadata::jsonb "
            "FROM unnest(%(t)s::text[], %(ns)s::text[], %(cid)s::text[], %(meta)s::text[], "
            "%(old)s::text[]) AS x(t, ns, cid, metadata, old) "
            "WHERE c.thread_id = x.t AND c.checkpoint_ns = x.ns AND c.checkpoint_id = x.cid"
        )
        # copy_thread: the target's rows are the copies just made, in this transaction.
        self.set_blobs, self.set_writes, self.set_meta = blob_set, write_set, meta_set
        # rekey: only rows still as read (a put may have replaced one meanwhile).
        self.swap_blobs = blob_set + " AND b.blob = x.old"
        self.swap_writes = write_set + " AND w.blob = x.old"
        self.swap_meta = meta_set + " AND c.metadata = x.old::jsonb"


def blob_updates(
    codec: BlobCodec, rows: Sequence[Sequence[Any]], dst: str | None
) -> dict[str, Any]:
    """The parameters of ``set_blobs``/``swap_blobs`` for rows of ``sealed_blobs``/stale.

    ``dst``: the target thread of a copy; ``None``: each row's own (rekey).
    """
    out: dict[str, list[Any]] = {k: [] for k in ("t", "ns", "ch", "v", "enc", "blob", "old")}
    for tid, ns, channel, version, tag, encoding, base, blob in rows:
        to = tid if dst is None else dst
        _, enc, payload, _ = reseal_value(
            codec, (tag, encoding, blob, base), tid, to, ns, channel, version
        )
        for key, value in zip(out, (to, ns, channel, version, enc, payload, blob), strict=True):
            out[key].append(value)
    return _binary(out)


def write_updates(
    codec: BlobCodec, rows: Sequence[Sequence[Any]], dst: str | None
) -> dict[str, Any]:
    """The parameters of ``set_writes``/``swap_writes`` (as :func:`blob_updates`)."""
    keys = ("t", "ns", "cid", "task", "idx", "enc", "blob", "old")
    out: dict[str, list[Any]] = {k: [] for k in keys}
    for tid, ns, cid, task_id, idx, task_path, channel, tag, encoding, blob in rows:
        to = tid if dst is None else dst
        record = WriteRecord(task_id, task_path, idx, channel, tag, encoding, blob)
        w = reseal_write(codec, record, tid, to, ns, cid)
        for key, value in zip(
            out, (to, ns, cid, task_id, idx, w.encoding, w.value, blob), strict=True
        ):
            out[key].append(value)
    return _binary(out)


def _binary(params: dict[str, list[Any]]) -> dict[str, Any]:
    """``params`` with its payload arrays framed in binary (:mod:`._arrays`): psycopg's
    own adaptation of a list of large ``bytes`` runs in Python, hundreds of
    milliseconds a batch of large values, on the event loop of an async rekey."""
    return {**params, "blob": BYTEA(params["blob"]), "old": BYTEA(params["old"])}


def meta_updates(
    crypt: Encryption | None,
    rows: Sequence[Sequence[Any]],
    dst: str | None,
    *,
    keep: Any = None,
) -> dict[str, Any]:
    """The parameters of ``set_meta``/``swap_meta`` (as :func:`blob_updates`).

    ``keep(metadata)``: rows to leave alone (rekey: those already current).
    """
    out: dict[str, list[Any]] = {k: [] for k in ("t", "ns", "cid", "meta", "old")}
    for tid, ns, cid, parent, versions, metadata in rows:
        if keep is not None and keep(metadata):
            continue
        to = tid if dst is None else dst
        stored = {str(k): str(v) for k, v in (versions or {}).items()}
        sealed = reseal_metadata(crypt, metadata, tid, to, ns, cid, stored, parent)
        if sealed is None:
            continue
        for key, value in zip(
            out, (to, ns, cid, metadata_json(sealed), metadata_json(dict(metadata))), strict=True
        ):
            out[key].append(value)
    return out


def head_updates(
    crypt: Encryption | None,
    rows: Sequence[Sequence[Any]],
    dst: str | None,
) -> dict[str, Any]:
    """The parameters of ``set_heads``/``swap_heads`` for rows of ``sealed_heads``/stale
    heads: their inline values sealed for ``dst`` (as :func:`blob_updates`), and for a
    rekey their metadata too.
    """
    heads: dict[str, list[Any]] = {
        k: [] for k in ("ht", "hns", "hcid", "head", "meta", "old_head", "old")
    }
    for tid, ns, cid, parent, head, metadata in rows:
        to = tid if dst is None else dst
        new_head = reseal_head(crypt, head, tid, to, ns)
        if new_head is None:
            continue
        versions = {str(k): str(v) for k, v in (head.get("channel_versions") or {}).items()}
        sealed = None  # a copy's metadata is set_meta's
        if to == tid and crypt is not None and not metadata_is_current(crypt, metadata):
            sealed = reseal_metadata(crypt, metadata, tid, to, ns, cid, versions, parent)
        meta = metadata_json(dict(metadata if sealed is None else sealed))
        row = (
            *(to, ns, cid, metadata_json(new_head), meta),
            *(metadata_json(dict(head)), metadata_json(dict(metadata))),
        )
        for key, value in zip(heads, row, strict=True):
            heads[key].append(value)
    return heads


def stale_checkpoints(crypt: Encryption, rows: Sequence[Any]) -> int:
    """How many checkpoint rows (``every_checkpoint``) a rekey would seal again: a head
    value or the metadata not sealed under the active key (one update per row)."""
    return sum(
        not head_is_current(crypt, {"channel_values": values})
        or not metadata_is_current(crypt, metadata)
        for values, metadata in rows
    )

"""Sealed rows of the SQLite backend sealed again (#17): ``copy_thread`` and ``rekey``.

What changes in a record is :mod:`tether.backends._sealing`; this module
only reads and writes the rows, with their checksums (:mod:`._rows`).

``rekey`` goes through each table in primary-key order, a batch at a time:
it reads the rows that are not sealed under the active key, seals them
outside the write lock, and writes each back only if it is still the row it
read (``... AND value = old``), in one short transaction per batch. A put
that replaced a row meanwhile wins (its value is sealed by that writer's
active key, and picked up by the next pass if that is another key). The state
of a rekey is the store itself (which rows are sealed under which key), so a
rekey killed at any point is finished by running it again.
"""

# ruff: noqa: S608 -- only the fixed fragments below are formatted into SQL.

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from tether.backends._payload import BlobCodec
from tether.backends._records import HEAD_JSON, WriteRecord
from tether.backends._sealing import (
    head_is_current,
    metadata_is_current,
    refuse_copy,
    reseal_head,
    reseal_metadata,
    reseal_value,
    reseal_write,
)
from tether.backends._sqlbase import (
    metadata_from_json,
    row_checksum,
    value_checksum,
    versions_from_json,
    write_checksum,
)
from tether.checkpoint import Address
from tether.contract import dumps_json, loads_json
from tether.encryption import SEALED_METADATA, Encryption

__all__ = ["REKEY_TABLES", "count_pending", "rekey_batches", "reseal_copy"]

_BLOB_KEY = ("thread_id", "checkpoint_ns", "channel", "version")
_WRITE_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
_CHECKPOINT_KEY = ("thread_id", "checkpoint_ns", "checkpoint_id")

_BLOB_COLS = "thread_id, checkpoint_ns, channel, version, type, encoding, base, value"
_WRITE_COLS = (
    "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, "
    "encoding, value"
)
_CHECKPOINT_COLS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
    "channel_versions, metadata, unstored"
)
# Not sealed under the key whose header (?2, of ?1 bytes) follows the payload's
# checksum: what a rekey pass rewrites.
_STALE = "NOT (encoding & 8 AND substr(value, 5, ?1) = ?2)"

_SET_BLOB = (
    "UPDATE tether_blobs SET encoding = ?, value = ?, checksum = ? "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND channel = ? AND version = ?"
)
_SET_WRITE = (
    "UPDATE tether_writes SET encoding = ?, value = ?, checksum = ? WHERE thread_id = ? "
    "AND checkpoint_ns = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?"
)
_SET_CHECKPOINT = (
    "UPDATE tether_checkpoints SET checkpoint = ?, metadata = ?, checksum = ? "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
# A rekey writes a row back only if it is still the row it read (a put may
# have replaced it meanwhile, sealed by its own writer).
_UPDATE_BLOB = _SET_BLOB + " AND value = ?"
_UPDATE_WRITE = _SET_WRITE + " AND value = ?"
_UPDATE_CHECKPOINT = _SET_CHECKPOINT + " AND checkpoint = ? AND metadata = ?"
# A head with a value sealed inline: a one-element array (tether.encryption.seal_inline).
_SEALED_INLINE = (
    f"CASE WHEN type = '{HEAD_JSON}' THEN EXISTS (SELECT 1 FROM "
    "json_each(checkpoint, '$.channel_values') AS j WHERE j.type = 'array') END"
)

#: The tables a rekey goes through, in order.
REKEY_TABLES = ("tether_blobs", "tether_writes", "tether_checkpoints")


def _blob_update(codec: BlobCodec, row: Sequence[Any], dst: str) -> tuple[Any, ...]:
    tid, ns, channel, version, tag, encoding, base, value = row
    tag, enc, payload, base = reseal_value(
        codec, (tag, encoding, value, base), tid, dst, ns, channel, version
    )
    checksum = value_checksum(channel, version, tag, enc, base, payload)
    return (enc, payload, checksum, dst, ns, channel, version)


def _write_update(codec: BlobCodec, row: Sequence[Any], dst: str) -> tuple[Any, ...]:
    tid, ns, cid, task_id, idx, task_path, channel, tag, encoding, value = row
    w = reseal_write(
        codec,
        WriteRecord(task_id, task_path, idx, channel, tag, encoding, value),
        tid,
        dst,
        ns,
        cid,
    )
    checksum = write_checksum(cid, task_id, task_path, idx, channel, tag, w.encoding, w.value)
    return (w.encoding, w.value, checksum, dst, ns, cid, task_id, idx)


def _checkpoint_update(
    crypt: Encryption | None, row: Sequence[Any], dst: str
) -> tuple[Any, ...] | None:
    """A checkpoint row's head values and metadata as sealed for thread ``dst`` (a copy)
    or under the active key (``dst`` its own thread: rekey); ``None``: nothing to change."""
    tid, ns, cid, parent, head_type, head, versions_json, meta_json, unstored = row
    new_head = head
    # The versions metadata is bound to: every channel's, as a read takes them
    # from the head (since schema 9 the row's column names only the channels
    # whose values are rows); a head older than JSON heads has them all in the column.
    head_versions: dict[str, str] | None = None
    if head_type == HEAD_JSON:
        doc = loads_json(head)
        sealed_head = reseal_head(crypt, doc, tid, dst, ns) if isinstance(doc, dict) else None
        if sealed_head is not None:
            new_head = msgspec.json.encode(sealed_head)
        if isinstance(doc, dict):
            stored = doc.get("channel_versions") or {}
            head_versions = {str(k): str(v) for k, v in stored.items()}
    meta = metadata_from_json(meta_json, address=Address(tid, ns, cid))
    if (tid == dst and crypt is not None and metadata_is_current(crypt, meta)) or (
        tid != dst and SEALED_METADATA not in meta  # a copy leaves clear metadata clear
    ):
        sealed = None
    else:
        versions = head_versions if head_versions is not None else versions_from_json(versions_json)
        sealed = reseal_metadata(crypt, meta, tid, dst, ns, cid, versions, parent)
    if sealed is None and new_head is head:
        return None
    text = meta_json if sealed is None else dumps_json(sealed)
    checksum = row_checksum(cid, parent, head_type, new_head, versions_json, text, unstored)
    return (new_head, text, checksum, dst, ns, cid)


def reseal_copy(
    conn: sqlite3.Connection, crypt: Encryption | None, codec: BlobCodec, src: str, dst: str
) -> None:
    """After ``copy_thread``'s SQL copy, in its transaction: the target's copies of
    sealed rows sealed again for the target thread (their ciphertexts name the source).

    Raises:
        ConfigError: sealed rows and no keyring (the transaction rolls back).
    """
    sealed_blobs = conn.execute(
        f"SELECT {_BLOB_COLS} FROM tether_blobs WHERE thread_id = ? AND encoding & 8", (src,)
    ).fetchall()
    sealed_writes = conn.execute(
        f"SELECT {_WRITE_COLS} FROM tether_writes WHERE thread_id = ? AND encoding & 8", (src,)
    ).fetchall()
    sealed_meta = conn.execute(
        f"SELECT {_CHECKPOINT_COLS} FROM tether_checkpoints WHERE thread_id = ? "
        f"AND (json_extract(metadata, '$.{SEALED_METADATA}') IS NOT NULL OR {_SEALED_INLINE})",
        (src,),
    ).fetchall()
    if crypt is None:
        if sealed_blobs or sealed_writes or sealed_meta:
            raise refuse_copy(src)
        return
    conn.executemany(_SET_BLOB, [_blob_update(codec, r, dst) for r in sealed_blobs])
    conn.executemany(_SET_WRITE, [_write_update(codec, r, dst) for r in sealed_writes])
    heads = [m for r in sealed_meta if (m := _checkpoint_update(crypt, r, dst)) is not None]
    conn.executemany(_SET_CHECKPOINT, heads)


def _after(key: Sequence[str], cursor: Sequence[Any] | None) -> tuple[str, list[Any]]:
    if cursor is None:
        return "", []
    cols = ", ".join(key)
    marks = ", ".join("?" * len(key))
    return f"AND ({cols}) > ({marks}) ", list(cursor)


def count_pending(conn: sqlite3.Connection, crypt: Encryption) -> int:
    """How many rows a rekey to ``crypt.active`` would rewrite (metadata read in Python)."""
    header = crypt.header()
    n = 0
    for table in ("tether_blobs", "tether_writes"):
        stale = conn.execute(f"SELECT count(*) FROM {table} WHERE {_STALE}", (len(header), header))
        n += stale.fetchone()[0]
    for head_type, head, meta in conn.execute(
        "SELECT type, checkpoint, metadata FROM tether_checkpoints"
    ):
        old_head = head_type == HEAD_JSON and not head_is_current(crypt, loads_json(head))
        n += old_head or not metadata_is_current(crypt, loads_json(meta))
    return int(n)


def rekey_batches(
    read: Callable[[str, Sequence[Any]], list[Any]],
    write: Callable[[list[tuple[str, list[tuple[Any, ...]]]]], int],
    crypt: Encryption,
    codec: BlobCodec,
    batch: int,
) -> Iterator[int]:
    """One rekey pass over every table; yields the rows each batch rewrote.

    ``read(sql, args)`` runs a read (its own snapshot); ``write(ops)`` runs
    ``executemany(sql, rows)`` for each op in one write transaction and
    returns the rows the last one changed (rows that changed since they were
    read are left alone).
    """
    header = crypt.header()
    cursor: Sequence[Any] | None = None
    while True:  # channel values
        after, args = _after(_BLOB_KEY, cursor)
        rows = read(
            f"SELECT {_BLOB_COLS} FROM tether_blobs WHERE {_STALE} {after}"
            f"ORDER BY {', '.join(_BLOB_KEY)} LIMIT ?",
            [len(header), header, *args, batch],
        )
        if not rows:
            break
        updates = [(*_blob_update(codec, r, r[0]), r[7]) for r in rows]
        yield write([(_UPDATE_BLOB, updates)])
        cursor = rows[-1][:4]
    cursor = None
    while True:  # pending writes
        after, args = _after(_WRITE_KEY, cursor)
        rows = read(
            f"SELECT {_WRITE_COLS} FROM tether_writes WHERE {_STALE} {after}"
            f"ORDER BY {', '.join(_WRITE_KEY)} LIMIT ?",
            [len(header), header, *args, batch],
        )
        if not rows:
            break
        updates = [(*_write_update(codec, r, r[0]), r[9]) for r in rows]
        yield write([(_UPDATE_WRITE, updates)])
        cursor = rows[-1][:5]
    cursor = None
    while True:  # heads and metadata: which key sealed them is in their JSON, read in Python
        after, args = _after(_CHECKPOINT_KEY, cursor)
        rows = read(
            f"SELECT {_CHECKPOINT_COLS} FROM tether_checkpoints WHERE 1 {after}"
            f"ORDER BY {', '.join(_CHECKPOINT_KEY)} LIMIT ?",
            [*args, batch],
        )
        if not rows:
            break
        updates = []
        for r in rows:
            update = _checkpoint_update(crypt, r, r[0])
            if update is not None:
                updates.append((*update, r[5], r[7]))
        yield write([(_UPDATE_CHECKPOINT, updates)]) if updates else 0
        cursor = rows[-1][:3]

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
    inline_out,
    metadata_is_current,
    refuse_copy,
    reseal_metadata,
    reseal_value,
    reseal_write,
)
from tether.backends._sqlbase import (
    metadata_from_json,
    row_checksum,
    value_checksum,
    versions_from_json,
    versions_to_json,
    write_checksum,
)
from tether.checkpoint import Address
from tether.contract import dumps_json, loads_json
from tether.encryption import SEALED_METADATA, Encryption
from tether.serde.base import SerializerProtocol

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
_SET_META = (
    "UPDATE tether_checkpoints SET metadata = ?, checksum = ? WHERE thread_id = ? "
    "AND checkpoint_ns = ? AND checkpoint_id = ?"
)
# A rekey writes a row back only if it is still the row it read (a put may
# have replaced it meanwhile, sealed by its own writer).
_UPDATE_BLOB = _SET_BLOB + " AND value = ?"
_UPDATE_WRITE = _SET_WRITE + " AND value = ?"
_UPDATE_META = _SET_META + " AND metadata = ?"
# A head written before encryption, its values in clear, moved to sealed value rows.
_UPDATE_HEAD = (
    "UPDATE tether_checkpoints SET checkpoint = ?, channel_versions = ?, metadata = ?, "
    "checksum = ? "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
    "AND checkpoint = ? AND metadata = ?"
)
_ADD_BLOB = (
    "INSERT OR IGNORE INTO tether_blobs "
    "(thread_id, checkpoint_ns, channel, version, type, encoding, base, value, checksum) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
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


def _meta_update(crypt: Encryption | None, row: Sequence[Any], dst: str) -> tuple[Any, ...] | None:
    tid, ns, cid, parent, head_type, head, versions_json, meta_json, unstored = row
    meta = metadata_from_json(meta_json, address=Address(tid, ns, cid))
    sealed = reseal_metadata(
        crypt, meta, tid, dst, ns, cid, versions_from_json(versions_json), parent
    )
    if sealed is None:
        return None
    text = dumps_json(sealed)
    checksum = row_checksum(cid, parent, head_type, head, versions_json, text, unstored)
    return (text, checksum, dst, ns, cid)


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
        f"AND json_extract(metadata, '$.{SEALED_METADATA}') IS NOT NULL",
        (src,),
    ).fetchall()
    if crypt is None:
        if sealed_blobs or sealed_writes or sealed_meta:
            raise refuse_copy(src)
        return
    conn.executemany(_SET_BLOB, [_blob_update(codec, r, dst) for r in sealed_blobs])
    conn.executemany(_SET_WRITE, [_write_update(codec, r, dst) for r in sealed_writes])
    metas = [m for r in sealed_meta if (m := _meta_update(crypt, r, dst)) is not None]
    conn.executemany(_SET_META, metas)


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
        clear = head_type == HEAD_JSON and bool(loads_json(head).get("channel_values"))
        n += clear or not metadata_is_current(crypt, loads_json(meta))
    return int(n)


def rekey_batches(
    read: Callable[[str, Sequence[Any]], list[Any]],
    write: Callable[[list[tuple[str, list[tuple[Any, ...]]]]], int],
    crypt: Encryption,
    codec: BlobCodec,
    serde: SerializerProtocol,
    batch: int,
) -> Iterator[int]:
    """One rekey pass over every table; yields the rows each batch rewrote.

    ``read(sql, args)`` runs a read (its own snapshot); ``write(ops)`` runs
    ``executemany(sql, rows)`` for each op in one write transaction and
    returns the rows the last one changed (rows that changed since they were
    read are left alone). ``serde`` encodes values a head kept in clear.
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
    while True:  # metadata: which key sealed it is in its base64 text, read in Python
        after, args = _after(_CHECKPOINT_KEY, cursor)
        rows = read(
            f"SELECT {_CHECKPOINT_COLS} FROM tether_checkpoints WHERE 1 {after}"
            f"ORDER BY {', '.join(_CHECKPOINT_KEY)} LIMIT ?",
            [*args, batch],
        )
        if not rows:
            break
        updates = []
        n = 0
        for r in rows:
            moved = _head_update(codec, serde, crypt, r)
            if moved is not None:
                n += write(moved)
                continue
            if metadata_is_current(crypt, loads_json(r[7])):
                continue
            update = _meta_update(crypt, r, r[0])
            if update is not None:
                updates.append((*update, r[7]))
        yield n + (write([(_UPDATE_META, updates)]) if updates else 0)
        cursor = rows[-1][:3]


def _head_update(
    codec: BlobCodec, serde: SerializerProtocol, crypt: Encryption, row: Sequence[Any]
) -> list[tuple[str, list[tuple[Any, ...]]]] | None:
    """The ops that move a head's clear values to sealed rows and seal its metadata."""
    tid, ns, cid, parent, head_type, head, _versions, meta_json, unstored = row
    if head_type != HEAD_JSON:
        return None
    doc = loads_json(head)
    moved = inline_out(codec, serde, tid, ns, doc) if isinstance(doc, dict) else None
    if moved is None:
        return None
    new_head, records = moved
    head_bytes = msgspec.json.encode(new_head)
    meta = metadata_from_json(meta_json, address=Address(tid, ns, cid))
    # Every channel's values are rows now: the row names them all (since schema
    # 9 it named only those not kept inline), and metadata is bound to them all.
    stored = new_head.get("channel_versions") or {}
    text_versions = versions_to_json(stored)
    versions = versions_from_json(text_versions)
    sealed = reseal_metadata(crypt, meta, tid, tid, ns, cid, versions, parent)
    text = meta_json if sealed is None else dumps_json(sealed)
    check = row_checksum(cid, parent, head_type, head_bytes, text_versions, text, unstored)
    blobs = [
        (
            *(tid, ns, v.channel, v.version, v.type, v.encoding, None, v.payload),
            value_checksum(v.channel, v.version, v.type, v.encoding, None, v.payload),
        )
        for v in records
    ]
    return [
        (_ADD_BLOB, blobs),
        (
            _UPDATE_HEAD,
            [(head_bytes, text_versions, text, check, tid, ns, cid, head, meta_json)],
        ),
    ]

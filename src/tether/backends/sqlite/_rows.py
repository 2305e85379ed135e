"""Checkpoint rows as read back: checksum verification, and naming a damaged row.

Every read of a checkpoint row (``get_tuple``, ``list``, the CLI's own
queries) goes through :func:`check_row` before anything in it is trusted.
When SQLite's JSON functions fail on a stored column ("malformed JSON"), the
statement does not say which row; :func:`find_bad_json` finds it with
``json_valid()`` so the error names thread and checkpoint instead of calling
the whole database unusable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from typing import Any

from tether.backends._sqlbase import check_write_count as _check_count
from tether.backends._sqlbase import row_checksum, value_checksum, write_checksum
from tether.backends.sqlite._sql import BAD_JSON_ANYWHERE, BAD_JSON_IN_THREAD
from tether.checkpoint import Address
from tether.contract import loads_json
from tether.errors import DecodeError, StorageError, TetherError

__all__ = [
    "check_row",
    "check_value_row",
    "check_write_count",
    "check_write_row",
    "find_bad_json",
    "row_name",
    "row_unstored",
]


def row_name(row: Sequence[Any]) -> str:
    """``checkpoint 'x' of thread 't' (namespace 'n')`` for a row of ``CHECKPOINT_COLUMNS``."""
    ns = f" (namespace {row[1]!r})" if row[1] else ""
    return f"checkpoint {row[2]!r} of thread {row[0]!r}{ns}"


def check_row(row: Sequence[Any], where: str) -> None:
    """Verify a checkpoint row (columns as ``CHECKPOINT_COLUMNS``) against its checksum.

    A NULL checksum marks a row written before schema version 4: not verified.

    Raises:
        StorageError: the row does not match its checksum (it is damaged).
    """
    checksum = row[8]
    if checksum is None:
        return
    try:
        ok = row_checksum(row[2], row[3], row[4], row[5], row[6], row[7], row[9]) == checksum
    except (AttributeError, TypeError):  # a column of another SQL type than tether wrote
        ok = False
    if not ok:
        raise StorageError(
            f"{row_name(row)} in {where} does not match its checksum: the row is damaged. "
            "Restore the row (or the file) from a backup"
        )


def row_unstored(row: Sequence[Any]) -> Collection[str] | None:
    """The channels a checkpoint row (``CHECKPOINT_COLUMNS``) says its put stored no value
    for; ``None`` for a row from before schema version 4 (its put recorded nothing).

    Raises:
        StorageError: the column is not a JSON list (the row is damaged).
    """
    if row[8] is None:
        return None
    if row[9] is None:
        return ()
    try:
        names = loads_json(row[9])
    except ValueError:
        names = None
    if not isinstance(names, list):
        raise StorageError(
            f"{row_name(row)}: its unstored column is not a JSON list; the row is damaged"
        )
    return [str(n) for n in names]


def check_value_row(row: Sequence[Any], where: str) -> None:
    """Verify a blob row of a read (``1, thread, ns, channel, version, type, value,
    encoding, base, checksum, ...``) against its checksum.

    Raises:
        StorageError: the row does not match it (it is damaged).
    """
    try:
        ok = value_checksum(row[3], row[4], row[5], row[7], row[8], row[6]) == row[9]
    except (AttributeError, TypeError):  # a column of another SQL type than tether wrote
        ok = False
    if not ok:
        ns = f" (namespace {row[2]!r})" if row[2] else ""
        raise StorageError(
            f"the stored value of channel {row[3]!r} at version {row[4]!r} of thread "
            f"{row[1]!r}{ns} in {where} does not match its checksum: the row is damaged. "
            "Restore the row (or the file) from a backup"
        )


def check_write_row(row: Sequence[Any], where: str) -> None:
    """Verify a write row of a read (``2, thread, ns, checkpoint, task, path, idx,
    channel, type, encoding, value, checksum``) against its checksum.

    Raises:
        StorageError: the row does not match it (it is damaged).
    """
    try:
        ok = (
            write_checksum(row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[10])
            == row[11]
        )
    except (AttributeError, TypeError):
        ok = False
    if not ok:
        ns = f" (namespace {row[2]!r})" if row[2] else ""
        raise StorageError(
            f"pending write {row[6]!r} of task {row[4]!r} of checkpoint {row[3]!r} of thread "
            f"{row[1]!r}{ns} in {where} does not match its checksum: the row is damaged. "
            "Restore the row (or the file) from a backup"
        )


def check_write_count(row: Sequence[Any], found: int, where: str) -> None:
    """Check that a checkpoint row (``CHECKPOINT_COLUMNS``) has all its pending writes.

    ``nwrites`` is NULL in rows written before schema version 5: not checked.

    Raises:
        StorageError: more or fewer write rows than the checkpoint recorded.
    """
    if row[10] is not None and row[10] != found:
        _check_count(Address(row[0], row[1], row[2]), row[10], found, where)


def find_bad_json(
    conn: sqlite3.Connection, where: str, thread_ids: Sequence[str] | None
) -> TetherError | None:
    """The error naming a checkpoint row whose metadata or versions column is not JSON.

    Looks in ``thread_ids`` first (the threads the failed statement read),
    then anywhere; ``None`` when every row is JSON.
    """
    row = None
    for tid in thread_ids or ():
        row = conn.execute(BAD_JSON_IN_THREAD, (tid,)).fetchone()
        if row is not None:
            break
    if row is None:
        row = conn.execute(BAD_JSON_ANYWHERE).fetchone()
    if row is None:
        return None
    try:
        check_row(row, where)
    except StorageError as exc:
        return exc
    column = "metadata" if not _is_json(conn, row[7]) else "channel_versions"
    return DecodeError(
        f"stored {column} of a checkpoint in {where} is not JSON; the row is damaged "
        "(restore it from a backup)",
        context={"thread_id": row[0], "checkpoint_ns": row[1] or None, "checkpoint_id": row[2]},
    )


def _is_json(conn: sqlite3.Connection, text: Any) -> bool:
    found = conn.execute("SELECT json_valid(?)", (text,)).fetchone()
    return bool(found and found[0])

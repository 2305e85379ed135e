"""Building checkpoints the way a graph runtime does, for the SQLite tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tether.base import BaseCheckpointSaver
from tether.checkpoint import copy_checkpoint, empty_checkpoint
from tether.ids import uuid6


def step(
    saver: BaseCheckpointSaver,
    config: dict[str, Any],
    prev: Any,
    values: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    """Put a child of ``prev`` (None = first) that changes ``values``; returns (config, ckpt)."""
    ckpt = empty_checkpoint() if prev is None else copy_checkpoint(prev)
    ckpt["id"] = str(uuid6())
    new_versions = {}
    for channel, value in values.items():
        version = saver.get_next_version(ckpt["channel_versions"].get(channel))
        ckpt["channel_versions"][channel] = version
        ckpt["channel_values"][channel] = value
        new_versions[channel] = version
    ckpt["updated_channels"] = sorted(values)
    out = saver.put(config, ckpt, metadata or {"source": "loop", "step": 0}, new_versions)
    return out, ckpt


def thread(tid: str, ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}


# --- populated stores, and the same rows in a previous schema version's tables ------------

# tether's tables now, and their names and columns in each earlier version.
_OLD_NAMES = {
    "tether_checkpoints": "checkpoints",
    "tether_blobs": "checkpoint_blobs",
    "tether_writes": "checkpoint_writes",
}


def populate(saver: BaseCheckpointSaver, *, deltas: bool = True) -> None:
    """Threads a real run leaves: subgraph namespaces, forks, writes, and (``deltas``)
    a history long enough for append-delta snapshots and tails."""
    from tether.testing._history import message

    for t in range(3):
        tid = f"thread-{t}"
        for ns in ("", f"sub:{t}"):
            cfg, prev = thread(tid, ns), None
            history: list[Any] = []
            steps = 40 if deltas and t == 0 else 6
            for i in range(steps):
                history = [*history, message(i, tid)] if deltas else [i, tid]
                values = {"history": history, "turn": i}
                if i == 0:
                    values["fixed"] = {"kind": "set once", "t": t}
                meta = {"source": "loop", "step": i, "run_id": f"run-{t}-{i % 2}", "k": [t, i]}
                cfg, prev = step(saver, cfg, prev, values, meta)
                saver.put_writes(cfg, [("turn", i), ("history", ["w", i])], f"task-{i}", "p")
                if i % 3 == 0:
                    saver.put_writes(cfg, [("__interrupt__", {"ask": i})], f"task-{i}")
        # a fork from an early checkpoint of the root namespace
        early = list(saver.list(thread(tid), limit=99))[-2]
        step(saver, early.config, early.checkpoint, {"turn": -1}, {"source": "fork", "step": 1})


def snapshot(saver: BaseCheckpointSaver) -> list[tuple[Any, ...]]:
    """Every checkpoint of the store as plain data, in list order."""
    return [
        (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
        for t in saver.list(None)
    ]


def as_version(source: Path, target: Path, version: int) -> None:
    """Lay the rows of the current store ``source`` out in a new file at schema ``version``.

    The tables are made by the migrations of that version
    (``ensure_schema(..., target=version)``); the rows are copied column by
    column (by name), so the file is what a tether of that version would hold
    after the same puts. Versions 1 and 2 predate append deltas (no ``base``)
    and version 1 compression (no ``encoding``): the source must not use them.
    """
    from tether.backends.sqlite._schema import ensure_schema

    conn = sqlite3.connect(target, isolation_level=None)
    try:
        ensure_schema(conn, str(target), wal=True, target=version)
        conn.execute("ATTACH DATABASE ? AS src", (str(source),))
        # Payloads as a tether before checksums wrote them (every version these
        # files stand for): encoding 4 (crc + bytes) as 0, 6 (crc + size + frame) as 2.
        legacy = {
            "encoding": "CASE encoding WHEN 4 THEN 0 WHEN 6 THEN 2 ELSE encoding END",
            "value": "CASE encoding WHEN 4 THEN substr(value, 5) WHEN 6 THEN substr(value, 9) "
            "ELSE value END",
        }
        tables = dict(_OLD_NAMES)
        if version >= 8:  # the thread index (its rows are the saver's, copied as they are)
            tables["tether_threads"] = "tether_threads"
        for new, old in tables.items():
            if version >= 4:  # tether's own names, and payloads with checksums
                old, legacy = new, {}
            mine = [r[1] for r in conn.execute(f"PRAGMA table_info({old})")]
            theirs = {r[1] for r in conn.execute(f"PRAGMA src.table_info({new})")}
            cols = [c for c in mine if c in theirs]
            values = [legacy.get(c, c) if "encoding" in theirs else c for c in cols]
            conn.execute(
                f"INSERT INTO main.{old} ({', '.join(cols)}) "
                f"SELECT {', '.join(values)} FROM src.{new}"
            )
        if version < 3:
            assert conn.execute(
                "SELECT count(*) FROM src.tether_blobs WHERE base IS NOT NULL"
            ).fetchone() == (0,)
        if version < 2:
            assert conn.execute(
                "SELECT count(*) FROM src.tether_blobs WHERE encoding NOT IN (0, 4)"
            ).fetchone() == (0,)
        conn.execute("DETACH DATABASE src")
        if version in (7, 8):
            _versions_of_every_channel(conn)
        if 5 <= version < 11:
            _writes_checksummed_v1(conn)
        if version < 6:
            _heads_through_the_serializer(conn, version)
    finally:
        conn.close()


def _writes_checksummed_v1(conn: sqlite3.Connection) -> None:
    """Write rows as a tether of versions 5 to 10 checksummed them (the text framing)."""
    from tether.backends._sqlbase import write_checksum_v1

    rows = conn.execute(
        "SELECT rowid, checkpoint_id, task_id, task_path, idx, channel, type, encoding, value "
        "FROM tether_writes"
    ).fetchall()
    conn.executemany(
        "UPDATE tether_writes SET checksum = ? WHERE rowid = ?",
        [(write_checksum_v1(*r[1:]), r[0]) for r in rows],
    )


def _versions_of_every_channel(conn: sqlite3.Connection) -> None:
    """Rows as a tether of version 7 or 8 wrote them: ``channel_versions`` names every
    channel, those kept inline in the head too (version 9 names only the others)."""
    import json

    from tether.backends._sqlbase import row_checksum, versions_to_json

    rows = conn.execute(
        "SELECT rowid, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, "
        "unstored FROM tether_checkpoints"
    ).fetchall()
    for rowid, cid, parent, tag, head, meta, unstored in rows:
        versions = versions_to_json(json.loads(head)["channel_versions"])
        checksum = row_checksum(cid, parent, tag, head, versions, meta, unstored)
        conn.execute(
            "UPDATE tether_checkpoints SET channel_versions = ?, checksum = ? WHERE rowid = ?",
            (versions, checksum, rowid),
        )


def _heads_through_the_serializer(conn: sqlite3.Connection, version: int) -> None:
    """Heads as a tether before version 6 wrote them: the serializer's bytes, not JSON."""
    import json

    from tether.backends._records import HEAD_JSON
    from tether.backends._sqlbase import row_checksum
    from tether.serde import MsgpackSerializer

    serde = MsgpackSerializer()
    table = "tether_checkpoints" if version >= 4 else "checkpoints"
    rows = conn.execute(
        f"SELECT rowid, checkpoint_id, parent_checkpoint_id, checkpoint, channel_versions, "
        f"metadata{', unstored' if version >= 4 else ''} FROM {table} WHERE type = ?",
        (HEAD_JSON,),
    ).fetchall()
    for rowid, cid, parent, head, versions, meta, *unstored in rows:
        tag, data = serde.dumps_typed(json.loads(head))
        conn.execute(
            f"UPDATE {table} SET type = ?, checkpoint = ? WHERE rowid = ?", (tag, data, rowid)
        )
        if version >= 4:
            checksum = row_checksum(cid, parent, tag, data, versions, meta, unstored[0])
            conn.execute(f"UPDATE {table} SET checksum = ? WHERE rowid = ?", (checksum, rowid))


def user_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])

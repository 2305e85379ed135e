"""Raw access to the rows of a SQLite file or a Postgres schema, for tampering tests.

Each store exposes the same small interface: the payload of a value row or a
write row, and a way to write one back *with every non-cryptographic check
made to agree* (the payload's checksum, SQLite's row checksum), so that only
AES-GCM's tag stands between a tampered or moved ciphertext and the reader.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tether import PostgresSaver, SqliteSaver
from tether.backends._payload import checksum
from tether.backends._sqlbase import row_checksum, value_checksum, write_checksum
from tether.checkpoint import empty_checkpoint
from tether.encryption import Encryption
from tether.ids import uuid6

K1 = os.urandom(32)
K2 = os.urandom(32)


def ring(*kids: str, **options: Any) -> Encryption:
    """A keyring of the test keys ``k1``/``k2`` (first listed active)."""
    keys = {"k1": K1, "k2": K2, "k3": os.urandom(32)}
    return Encryption({k: keys[k] for k in kids}, **options)


def fixed_crc(body: bytes) -> bytes:
    """A payload whose 4-byte checksum agrees with ``body``."""
    return struct.pack("<I", checksum(body)) + body


def flip(payload: bytes, at: int = -1) -> bytes:
    """One byte of the sealed body changed, its checksum fixed."""
    body = bytearray(payload[4:])
    body[at] ^= 0x01
    return fixed_crc(bytes(body))


@dataclass
class Raw:
    """One store: how to open a saver on it, and its rows."""

    kind: str
    where: str  # SQLite path or Postgres DSN
    schema: str = "public"

    def saver(self, encryption: Any = False, **options: Any) -> Any:
        if self.kind == "sqlite":
            return SqliteSaver(self.where, encryption=encryption, **options)
        saver = PostgresSaver.from_conn_string(
            self.where, schema=self.schema, pool_size=2, encryption=encryption, **options
        )
        saver.setup()
        return saver

    @contextmanager
    def conn(self) -> Iterator[Any]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.where, isolation_level=None)
            try:
                yield conn
            finally:
                conn.close()
        else:
            with psycopg.connect(self.where, autocommit=True) as conn:
                conn.execute(f'SET search_path TO "{self.schema}"')
                yield conn

    def _sql(self, text: str) -> str:
        return text if self.kind == "sqlite" else text.replace("?", "%s")

    def blobs(self, thread: str) -> list[tuple[str, str, str, int, str | None, bytes]]:
        """``(channel, version, type, encoding, base, payload)`` of a thread's value rows."""
        col = "value" if self.kind == "sqlite" else "blob"
        with self.conn() as c:
            rows = c.execute(
                self._sql(
                    f"SELECT channel, version, type, encoding, base, {col} FROM tether_blobs "
                    "WHERE thread_id = ? ORDER BY channel, version"
                ),
                (thread,),
            ).fetchall()
        return [(r[0], r[1], r[2], r[3], r[4], bytes(r[5])) for r in rows]

    def set_blob(self, thread: str, channel: str, version: str, payload: bytes) -> None:
        """Write a value row's payload, with its row checksum made to agree."""
        with self.conn() as c:
            if self.kind == "sqlite":
                tag, enc, base = c.execute(
                    "SELECT type, encoding, base FROM tether_blobs WHERE thread_id = ? "
                    "AND channel = ? AND version = ?",
                    (thread, channel, version),
                ).fetchone()
                c.execute(
                    "UPDATE tether_blobs SET value = ?, checksum = ? WHERE thread_id = ? "
                    "AND channel = ? AND version = ?",
                    (
                        payload,
                        value_checksum(channel, version, tag, enc, base, payload),
                        thread,
                        channel,
                        version,
                    ),
                )
            else:
                c.execute(
                    "UPDATE tether_blobs SET blob = %s WHERE thread_id = %s AND channel = %s "
                    "AND version = %s",
                    (payload, thread, channel, version),
                )

    def writes(self, thread: str) -> list[tuple[str, str, int, str, bytes]]:
        """``(checkpoint_id, task_id, idx, channel, payload)`` of a thread's write rows."""
        col = "value" if self.kind == "sqlite" else "blob"
        with self.conn() as c:
            rows = c.execute(
                self._sql(
                    f"SELECT checkpoint_id, task_id, idx, channel, {col} FROM tether_writes "
                    "WHERE thread_id = ? ORDER BY task_id, idx"
                ),
                (thread,),
            ).fetchall()
        return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in rows]

    def set_write(self, thread: str, task_id: str, idx: int, payload: bytes) -> None:
        with self.conn() as c:
            if self.kind == "sqlite":
                cid, path, channel, tag, enc = c.execute(
                    "SELECT checkpoint_id, task_path, channel, type, encoding FROM tether_writes "
                    "WHERE thread_id = ? AND task_id = ? AND idx = ?",
                    (thread, task_id, idx),
                ).fetchone()
                check = write_checksum(cid, task_id, path, idx, channel, tag, enc, payload)
                c.execute(
                    "UPDATE tether_writes SET value = ?, checksum = ? WHERE thread_id = ? "
                    "AND task_id = ? AND idx = ?",
                    (payload, check, thread, task_id, idx),
                )
            else:
                c.execute(
                    "UPDATE tether_writes SET blob = %s WHERE thread_id = %s AND task_id = %s "
                    "AND idx = %s",
                    (payload, thread, task_id, idx),
                )

    def metadata(self, thread: str) -> str:
        """The stored metadata (JSON text) of the thread's latest checkpoint."""
        with self.conn() as c:
            row = c.execute(
                self._sql(
                    "SELECT metadata FROM tether_checkpoints WHERE thread_id = ? "
                    "ORDER BY checkpoint_id DESC LIMIT 1"
                ),
                (thread,),
            ).fetchone()
        value = row[0]
        if isinstance(value, str):
            return value
        import json

        return json.dumps(value)

    def head(self, thread: str) -> dict[str, Any]:
        """The stored head (the checkpoint without stored values) of the thread's latest."""
        import json

        with self.conn() as c:
            row = c.execute(
                self._sql(
                    "SELECT checkpoint FROM tether_checkpoints WHERE thread_id = ? "
                    "ORDER BY checkpoint_id DESC LIMIT 1"
                ),
                (thread,),
            ).fetchone()
        value = row[0]
        return json.loads(value) if isinstance(value, str | bytes) else dict(value)

    def set_head(self, thread: str, head: dict[str, Any]) -> None:
        """The latest checkpoint's head replaced, its row checksum made to agree."""
        import json

        text = json.dumps(head, separators=(",", ":"))
        with self.conn() as c:
            if self.kind == "sqlite":
                cid, parent, tag, versions, meta, unstored = c.execute(
                    "SELECT checkpoint_id, parent_checkpoint_id, type, channel_versions, "
                    "metadata, unstored FROM tether_checkpoints WHERE thread_id = ? "
                    "ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread,),
                ).fetchone()
                new = text.encode()
                check = row_checksum(cid, parent, tag, new, versions, meta, unstored)
                c.execute(
                    "UPDATE tether_checkpoints SET checkpoint = ?, checksum = ? "
                    "WHERE thread_id = ? AND checkpoint_id = ?",
                    (new, check, thread, cid),
                )
            else:
                c.execute(
                    "UPDATE tether_checkpoints SET checkpoint = %s::jsonb WHERE thread_id = %s "
                    "AND checkpoint_id = (SELECT max(checkpoint_id) FROM tether_checkpoints "
                    "WHERE thread_id = %s)",
                    (text, thread, thread),
                )

    def set_metadata(self, thread: str, text: str) -> None:
        """The latest checkpoint's metadata replaced, its row checksum made to agree."""
        with self.conn() as c:
            if self.kind == "sqlite":
                row = c.execute(
                    "SELECT checkpoint_id, parent_checkpoint_id, type, checkpoint, "
                    "channel_versions, unstored FROM tether_checkpoints WHERE thread_id = ? "
                    "ORDER BY checkpoint_id DESC LIMIT 1",
                    (thread,),
                ).fetchone()
                cid, parent, tag, head, versions, unstored = row
                c.execute(
                    "UPDATE tether_checkpoints SET metadata = ?, checksum = ? "
                    "WHERE thread_id = ? AND checkpoint_id = ?",
                    (
                        text,
                        row_checksum(cid, parent, tag, head, versions, text, unstored),
                        thread,
                        cid,
                    ),
                )
            else:
                c.execute(
                    "UPDATE tether_checkpoints SET metadata = %s::jsonb WHERE thread_id = %s "
                    "AND checkpoint_id = (SELECT max(checkpoint_id) FROM tether_checkpoints "
                    "WHERE thread_id = %s)",
                    (text, thread, thread),
                )


def fill(saver: Any, thread: str, steps: int, *, version: str | None = None) -> list[Any]:
    """``steps`` checkpoints of a growing chat (with one write each) in ``thread``."""
    configs = []
    parent: dict[str, Any] = {"configurable": {"thread_id": thread}}
    prev: str | None = None
    for i in range(steps):
        ver = version or saver.get_next_version(prev)
        prev = ver
        ck = empty_checkpoint()
        ck["id"] = str(uuid6())
        ck["channel_values"] = {
            "messages": [f"message {j} of {thread}: " + "x" * 200 for j in range(i + 1)],
            "count": i,  # small values: sealed inline in the head
            "status": f"secret status {i} of {thread}",
            "note": {"text": f"secret note {i} of {thread}"},  # a value row
        }
        ck["channel_versions"] = {"messages": ver, "count": ver, "status": ver, "note": ver}
        parent = saver.put(
            parent,
            ck,
            {"source": "loop", "step": i, "user_secret": f"pii-{thread}-{i}"},
            dict(ck["channel_versions"]),
        )
        saver.put_writes(parent, [("messages", f"write {i}"), ("count", i)], task_id=f"task-{i}")
        configs.append(parent)
    return configs


def snapshot(saver: Any, thread: str) -> list[Any]:
    """Everything a thread reads back, comparable."""
    return [
        (t.config, t.checkpoint["channel_values"], t.metadata, t.pending_writes)
        for t in saver.list({"configurable": {"thread_id": thread}})
    ]


def new_path(tmp: Path) -> str:
    return str(tmp / f"store-{os.urandom(4).hex()}.db")

"""A checkpoint row names the versions of the channels not kept inline (schema 9, #19).

The head keeps every version; the row's ``channel_versions`` column, which reads
join value rows by and garbage collection keeps, names only the channels whose
values are rows. Rows written before name every channel and are still read.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tether import SqliteSaver
from tether.checkpoint import copy_checkpoint
from tether.ids import uuid6

from .helpers import step, thread


def _columns(path: Path) -> dict[str, dict[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT checkpoint_id, channel_versions FROM tether_checkpoints")
        return {cid: json.loads(text) for cid, text in rows}


def test_a_tiny_state_names_no_version_and_a_list_only_its_own(db_path: Path) -> None:
    big = [{"text": "x" * 300, "i": i} for i in range(3)]
    with SqliteSaver(db_path) as saver:
        tiny, tiny_ckpt = step(saver, thread("tiny"), None, {"step": 1, "flag": True, "who": "a"})
        chat, chat_ckpt = step(saver, thread("chat"), None, {"messages": big, "step": 1})
        # a child that changes only the small channel carries the list's row over
        child, child_ckpt = step(saver, chat, chat_ckpt, {"step": 2})
        got = saver.get_tuple(child)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"messages": big, "step": 2}
        assert got.checkpoint["channel_versions"] == child_ckpt["channel_versions"]
        back = saver.get_tuple(tiny)
        assert back is not None
        assert back.checkpoint["channel_values"] == {"step": 1, "flag": True, "who": "a"}
    columns = _columns(db_path)
    assert columns[tiny_ckpt["id"]] == {}
    versions = chat_ckpt["channel_versions"]
    assert columns[chat_ckpt["id"]] == {"messages": versions["messages"]}
    assert columns[child_ckpt["id"]] == {"messages": versions["messages"]}


def test_a_value_inline_in_another_checkpoint_is_carried_by_a_copy(db_path: Path) -> None:
    """LangGraph's ``__copy__`` fork: a put under another parent naming no new version
    finds the value kept inline in the checkpoint that has it (found by its head)."""
    with SqliteSaver(db_path) as saver:
        first, first_ckpt = step(saver, thread("t"), None, {"a": 1, "b": "x"})
        _, second_ckpt = step(saver, first, first_ckpt, {"a": 2})
        copy: Any = copy_checkpoint(second_ckpt)
        copy["id"] = str(uuid6())
        # parent: the first checkpoint, whose head has a=1; a=2 is in the second's only
        out = saver.put(first, copy, {"source": "fork", "step": 3}, {})
        got = saver.get_tuple(out)
        assert got is not None
        assert got.checkpoint["channel_values"] == {"a": 2, "b": "x"}
        with sqlite3.connect(db_path) as conn:
            unstored = conn.execute(
                "SELECT unstored FROM tether_checkpoints WHERE checkpoint_id = ?", (copy["id"],)
            ).fetchone()[0]
        assert unstored is None  # nothing found missing


def test_an_inline_value_at_another_version_is_not_carried(db_path: Path) -> None:
    """The lookup compares the head's version: a checkpoint keeping the channel inline
    at another version is passed over, and the channel reads as never stored."""
    with SqliteSaver(db_path) as saver:
        _, first_ckpt = step(saver, thread("t"), None, {"a": 1})
        other: Any = copy_checkpoint(first_ckpt)
        other["id"] = str(uuid6())
        other["channel_versions"]["a"] = saver.get_next_version(first_ckpt["channel_versions"]["a"])
        out = saver.put(thread("t"), other, {"source": "fork", "step": 1}, {})
        got = saver.get_tuple(out)
        assert got is not None
        assert got.checkpoint["channel_values"] == {}
        with sqlite3.connect(db_path) as conn:
            unstored = conn.execute(
                "SELECT unstored FROM tether_checkpoints WHERE checkpoint_id = ?", (other["id"],)
            ).fetchone()[0]
        assert json.loads(unstored) == ["a"]

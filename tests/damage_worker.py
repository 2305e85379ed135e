"""The child process of tests/test_random_damage.py: builds stores, reads damaged copies.

Run by path (``python tests/damage_worker.py ...``), so that a crash of the
process while reading a damaged store (a segfault in a decoder, say) fails
the test that ran it instead of killing the test run.

Commands:
    populate sqlite PATH EXPECTED         a store in PATH; every checkpoint, as read, in EXPECTED
    populate postgres DSN SCHEMA EXPECTED
    check sqlite EXPECTED PATH...         one JSON line per store: what each read gave
    check postgres EXPECTED DSN SCHEMA...
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tether import PostgresSaver, SqliteSaver
from tether.base import BaseCheckpointSaver
from tether.errors import TetherError

Key = tuple[str, str, str]


def _cfg(tid: str, ns: str = "", cid: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ns}
    if cid is not None:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def populate(saver: BaseCheckpointSaver) -> None:
    """Threads a real run leaves: namespaces, forks, pending writes, append-delta tails."""
    from tether.checkpoint import empty_checkpoint
    from tether.ids import uuid6
    from tether.testing._history import message

    for t in range(3):
        tid = f"thread-{t}"
        for ns in ("", f"sub:{t}"):
            cfg, prev = _cfg(tid, ns), None
            history: list[Any] = []
            for i in range(30 if t == 0 else 6):
                history = [*history, message(i, tid)]
                values: dict[str, Any] = {"history": history, "turn": i}
                if i == 0:
                    values["fixed"] = {"kind": "set once", "t": t}
                cp = empty_checkpoint() if prev is None else dict(prev)
                cp = {**cp, "id": str(uuid6()), "channel_values": {**cp["channel_values"]}}
                versions = dict(cp["channel_versions"])
                new = {}
                for channel, value in values.items():
                    cp["channel_values"][channel] = value
                    new[channel] = versions[channel] = f"{i + 1:032}.{t}"
                cp["channel_versions"] = versions
                meta = {"source": "loop", "step": i, "run_id": f"run-{t}", "k": [t, i]}
                cfg = saver.put(cfg, cp, meta, new)  # type: ignore[arg-type]
                prev = cp
                saver.put_writes(cfg, [("turn", i), ("history", ["w", i])], f"task-{i}", "p")
                if i % 3 == 0:
                    saver.put_writes(cfg, [("__interrupt__", {"ask": i})], f"task-{i}")


def read_all(saver: BaseCheckpointSaver) -> dict[Key, Any]:
    """Every checkpoint with its pending writes, by (thread, ns, id)."""
    out: dict[Key, Any] = {}
    for t in saver.list(None):
        c = t.config["configurable"]
        out[(c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])] = _plain(t)
    return out


def _plain(t: Any) -> Any:
    return (t.checkpoint, t.metadata, t.parent_config, t.pending_writes)


def check(saver_cm: Any, expected: dict[Key, Any]) -> dict[str, Any]:
    """Read every expected checkpoint three ways; count what each read gave.

    ``different`` lists reads that returned a value other than the stored one:
    the test fails on any. ``foreign`` lists exceptions from outside tether's
    hierarchy: also a failure. ``absent`` counts checkpoints a read did not
    find (a whole row gone: the store then looks pruned, see the test).
    """
    result: dict[str, Any] = {"same": 0, "error": 0, "absent": 0, "different": [], "foreign": []}

    def note_exc(exc: BaseException, what: str) -> None:
        if isinstance(exc, TetherError):
            result["error"] += 1
        else:
            result["foreign"].append(f"{what}: {type(exc).__name__}: {exc}"[:300])

    try:
        with saver_cm() as saver:
            for key, want in expected.items():
                tid, ns, cid = key
                absent = False
                try:
                    tup = saver.get_tuple(_cfg(tid, ns, cid))
                except Exception as exc:
                    note_exc(exc, f"get_tuple {key}")
                else:
                    if tup is None:
                        result["absent"] += 1
                        absent = True
                    elif _plain(tup) == want:
                        result["same"] += 1
                    else:
                        result["different"].append(f"get_tuple {key}")
                try:
                    writes = saver.get_writes(_cfg(tid, ns, cid))
                except Exception as exc:
                    note_exc(exc, f"get_writes {key}")
                else:
                    got = [(w.task_id, w.channel, w.value) for w in writes]
                    if got != list(want[3]) and not (absent and not got):
                        result["different"].append(f"get_writes {key}")
            threads = sorted({(k[0], k[1]) for k in expected})
            for tid, ns in threads:
                try:
                    for t in saver.list(_cfg(tid, ns)):
                        c = t.config["configurable"]
                        key = (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
                        if key not in expected or _plain(t) != expected[key]:
                            result["different"].append(f"list {key}")
                        else:
                            result["same"] += 1
                except Exception as exc:
                    note_exc(exc, f"list {tid} {ns}")
    except Exception as exc:  # opening the store
        note_exc(exc, "open")
    return result


@contextmanager
def _pg(dsn: str, schema: str) -> Iterator[PostgresSaver]:
    with PostgresSaver.from_conn_string(dsn, schema=schema) as saver:
        yield saver


def main(argv: list[str]) -> int:
    command, backend, *args = argv
    if command == "populate":
        out = args[-1]
        if backend == "sqlite":
            with SqliteSaver(args[0]) as saver:
                populate(saver)
                expected = read_all(saver)
        else:
            with _pg(args[0], args[1]) as pg:
                pg.setup()
                populate(pg)
                expected = read_all(pg)
        with open(out, "wb") as f:
            pickle.dump(expected, f)
        print(len(expected))
        return 0
    with open(args[0], "rb") as f:
        expected = pickle.load(f)
    if backend == "sqlite":
        stores = [(p, lambda p=p: SqliteSaver(p, read_only=True)) for p in args[1:]]
    else:
        dsn = args[1]
        stores = [(s, lambda s=s: _pg(dsn, s)) for s in args[2:]]
    for name, opener in stores:
        print(json.dumps({"store": name, **check(opener, expected)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

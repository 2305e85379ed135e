"""A plain reference model of the saver contract, and random programs to compare it with.

A program is a list of operations (put, put_writes, delete_thread, copy_thread,
prune, delete_for_runs) over three threads and two namespaces. The suite runs
it against the backend and the model, and after every operation the backend
must list exactly what the model holds (ids, values, metadata, parents,
pending writes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from tether.checkpoint import ERROR, INTERRUPT, WRITES_IDX_MAP, make_config
from tether.testing._driver import Driver, cid, new_checkpoint
from tether.testing._threads import check_index

__all__ = ["programs", "run_program"]

THREADS = ("A", "B", "C")
NAMESPACES = ("", "sub:1")
#: "branch:to:n" is a trigger: its value makes the thread index's status pending (#15).
CHANNELS = ("a", "b", "c", "branch:to:n")
RUNS = ("r1", "r2")
CLEAR = "<clear>"

Op = tuple[Any, ...]


@dataclass
class _Cp:
    values: dict[str, Any]
    versions: dict[str, Any]
    metadata: dict[str, Any]
    parent: str | None
    #: (task_id, idx) -> (task_id, channel, value)
    writes: dict[tuple[str, int], tuple[str, str, Any]] = field(default_factory=dict)


def _copy(cp: _Cp) -> _Cp:
    return _Cp(dict(cp.values), dict(cp.versions), dict(cp.metadata), cp.parent, dict(cp.writes))


class Model:
    """thread -> namespace -> checkpoint id -> what the saver must return."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names  # model thread -> the saver's thread id
        self.threads: dict[str, dict[str, dict[str, _Cp]]] = {}

    def space(self, thread: str, ns: str) -> dict[str, _Cp]:
        return self.threads.setdefault(thread, {}).setdefault(ns, {})

    def pick(self, thread: str, ns: str, pick: int | None) -> str | None:
        ids = sorted(self.threads.get(thread, {}).get(ns, {}))
        if pick is None or not ids:
            return None
        return ids[pick % len(ids)]

    def expected(self, thread: str) -> list[tuple[Any, ...]]:
        rows = []
        for ns, space in self.threads.get(thread, {}).items():
            for at, cp in space.items():
                writes = [cp.writes[k] for k in sorted(cp.writes)]
                parent = make_config(self.names[thread], ns, cp.parent) if cp.parent else None
                rows.append((at, ns, cp.values, cp.metadata, parent, writes))
        rows.sort(key=lambda r: r[0], reverse=True)
        return rows


_values = st.one_of(
    st.integers(-3, 3),
    st.text(alphabet="xyz", max_size=2),
    st.lists(st.integers(0, 3), max_size=3),
    st.none(),
    st.just(CLEAR),
)
_thread = st.sampled_from(THREADS)
_ns = st.sampled_from(NAMESPACES)

_put = st.tuples(
    st.just("put"),
    _thread,
    _ns,
    # None: a new root; otherwise the parent, by position among the namespace's ids
    st.one_of(st.none(), st.integers(0, 7), st.just(-1)),
    st.dictionaries(st.sampled_from(CHANNELS), _values, max_size=3),
    st.sampled_from(RUNS),
    st.integers(0, 2),
)
_writes = st.tuples(
    st.just("writes"),
    _thread,
    _ns,
    st.integers(0, 7),
    st.sampled_from(("t1", "t2")),
    st.lists(
        st.tuples(st.sampled_from(("x", "y", ERROR, INTERRUPT)), st.integers(0, 9)),
        min_size=1,
        max_size=3,
    ),
)
_others = st.one_of(
    st.tuples(st.just("delete"), _thread),
    st.tuples(st.just("copy"), _thread, _thread),
    st.tuples(
        st.just("prune"),
        _thread,
        st.sampled_from(("keep_latest", "keep_last", "delete")),
        st.integers(1, 3),
    ),
    st.tuples(st.just("runs"), st.lists(st.sampled_from(RUNS), max_size=2)),
)
# Puts and writes are drawn more often than the operations that remove things.
_op: st.SearchStrategy[Op] = st.one_of(_put, _put, _put, _writes, _writes, _others)


def programs(min_size: int = 10, max_size: int = 30) -> st.SearchStrategy[list[Op]]:
    """Random operation lists over three threads and two namespaces."""
    return st.lists(_op, min_size=min_size, max_size=max_size)


async def _apply(driver: Driver, model: Model, name: dict[str, str], op: Op) -> None:
    kind = op[0]
    if kind == "put":
        _, t, ns, pick, changes, run, k = op
        parent_id = model.pick(t, ns, pick)
        parent = model.threads[t][ns][parent_id] if parent_id else None
        values = dict(parent.values) if parent else {}
        versions = dict(parent.versions) if parent else {}
        new: dict[str, Any] = {}
        for channel, value in changes.items():
            new[channel] = driver.saver.get_next_version(versions.get(channel), None)
            if value == CLEAR:
                values.pop(channel, None)
            else:
                values[channel] = value
        versions.update(new)
        cp = new_checkpoint(values, versions)
        meta = {"run_id": run, "k": k}
        await driver.put(make_config(name[t], ns, parent_id), cp, meta, new)
        model.space(t, ns)[cp["id"]] = _Cp(values, versions, meta, parent_id)
    elif kind == "writes":
        _, t, ns, pick, task, writes = op
        at = model.pick(t, ns, pick)
        if at is None:
            return
        await driver.put_writes(make_config(name[t], ns, at), writes, task)
        target = model.threads[t][ns][at].writes
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            if idx >= 0 and (task, idx) in target:
                continue
            target[(task, idx)] = (task, channel, value)
    elif kind == "delete":
        await driver.delete_thread(name[op[1]])
        model.threads.pop(op[1], None)
    elif kind == "copy":
        _, src, dst = op
        if src == dst or any(model.threads.get(dst, {}).values()):
            return  # overwriting a non-empty target has its own test
        await driver.copy_thread(name[src], name[dst])
        if src in model.threads:
            model.threads[dst] = {
                ns: {at: _copy(cp) for at, cp in space.items()}
                for ns, space in model.threads[src].items()
            }
    elif kind == "prune":
        _, t, strategy, keep = op
        await driver.prune([name[t]], strategy=strategy, keep=keep)
        if strategy == "delete":
            model.threads.pop(t, None)
            return
        n = 1 if strategy == "keep_latest" else keep
        for space in model.threads.get(t, {}).values():
            for at in sorted(space, reverse=True)[n:]:
                del space[at]
    elif kind == "runs":
        runs = set(op[1])
        await driver.delete_for_runs(sorted(runs))
        for spaces in model.threads.values():
            for space in spaces.values():
                for at in [a for a, cp in space.items() if cp.metadata["run_id"] in runs]:
                    del space[at]


async def _compare(driver: Driver, model: Model, name: dict[str, str], step: str) -> None:
    for t in THREADS:
        got = [
            (
                cid(tup.config),
                tup.config["configurable"]["checkpoint_ns"],
                tup.checkpoint["channel_values"],
                tup.metadata,
                tup.parent_config,
                tup.pending_writes,
            )
            for tup in await driver.list({"configurable": {"thread_id": name[t]}})
        ]
        assert got == model.expected(t), f"thread {t} after {step}"


async def run_program(driver: Driver, program: list[Op]) -> None:
    """Run ``program`` on the saver and on the model; they must agree after every step."""
    # Thread names are fresh per program: hypothesis runs many on one saver.
    prefix = uuid.uuid4().hex[:8]
    name = {t: f"{prefix}-{t}" for t in THREADS}
    model = Model(name)
    for i, op in enumerate(program):
        await _apply(driver, model, name, op)
        await _compare(driver, model, name, f"op #{i} {op!r}")
        await check_index(driver, [name[t] for t in THREADS], f"op #{i} {op!r}")
    for t in THREADS:
        for ns in NAMESPACES:
            space = model.threads.get(t, {}).get(ns, {})
            tup = await driver.get_tuple(make_config(name[t], ns))
            if not space:
                assert tup is None, (t, ns)
            else:
                assert tup is not None, (t, ns)
                assert cid(tup.config) == max(space), (t, ns)
        for k in range(3):
            want = [r[0] for r in model.expected(t) if r[3]["k"] == k]
            assert await driver.ids({"configurable": {"thread_id": name[t]}}, filter={"k": k}) == (
                want
            )

"""Contract tests for long, growing list channels (message histories).

Backends may store such a channel in any way (tether's store a snapshot plus
appended tails, see ``tether.backends._delta``); whatever they do, every
checkpoint must read back exactly the list it was put with, through forks,
edits, shrinking, re-puts and every thread operation. The messages are a few
hundred bytes each so that histories of a few dozen steps are tens of KiB,
above any sensible delta or compression threshold.
"""

from __future__ import annotations

import copy
from typing import Any

from tether.checkpoint import make_config
from tether.testing._driver import Driver, Line, cid, new_checkpoint

__all__ = ["HistoryContract", "message"]


def message(i: int, tag: str = "") -> dict[str, Any]:
    """A chat-message dict of ~400 bytes, distinct per ``(i, tag)``."""
    return {
        "type": "ai" if i % 2 else "human",
        "id": f"msg-{tag}{i:05d}",
        "content": f"{tag}{i} " + "lorem ipsum dolor sit amet " * 14,
        "meta": {"tokens": i % 97, "tag": tag},
    }


async def grow(line: Line, n: int, tag: str = "") -> list[str]:
    """``n`` steps, each appending one message to ``history`` and bumping ``turn``."""
    out = []
    for _ in range(n):
        history = [*line.values.get("history", []), message(len(line.configs), tag)]
        out.append(cid(await line.step({"history": history, "turn": len(line.configs)})))
    return out


class HistoryContract:
    """Mixed into :class:`~tether.testing.SaverContract`; uses its ``driver`` fixture."""

    async def test_growing_history_reads_back_at_every_step(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await grow(line, 80)
        await line.check()
        listed = await driver.list(make_config("t"))
        assert [cid(t.config) for t in listed] == line.ids[::-1]
        for tup in listed:
            assert tup.checkpoint["channel_values"] == line.expected[cid(tup.config)]

    async def test_listed_histories_are_lists_of_their_own(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await grow(line, 40)
        listed = await driver.list(make_config("t"))
        first, second = listed[0], listed[1]
        first.checkpoint["channel_values"]["history"].append("mine")
        second.checkpoint["channel_values"]["history"].clear()
        assert listed[2].checkpoint["channel_values"] == line.expected[cid(listed[2].config)]
        # Changing what was read changes nothing stored.
        first.checkpoint["channel_values"]["history"][0]["content"] = "edited"
        await line.check()

    async def test_listings_read_every_history_as_put(self, driver: Driver) -> None:
        # A listing shares the decoded elements of a growing list between the
        # tuples that hold the same bytes (across pages too); branches that
        # differ, edits, shrinking and other threads' lists must still read
        # back exactly as put, whatever order the listing meets them in.
        line = Line(driver, "t")
        await grow(line, 70)
        left, right = line.fork(line.configs[40]), line.fork(line.configs[40])
        for _ in range(10):
            await grow(left, 1, "left-")
            await grow(right, 1, "right-")
        edited = copy.deepcopy(line.values["history"])
        edited[3] = message(3, "edited-")
        await line.step({"history": edited})
        await grow(line, 4)
        await line.step({"history": line.values["history"][:30]})
        await grow(line, 3)
        sub = Line(driver, "t", "child:1")
        await grow(sub, 50)
        other = Line(driver, "u")
        await grow(other, 60)  # the same message bytes as t's first 60
        expected = {
            (branch.thread_id, branch.ns, at): values
            for branch in (line, left, right, sub, other)
            for at, values in branch.expected.items()
        }
        listed = await driver.list(None)
        got = {
            (
                t.config["configurable"]["thread_id"],
                t.config["configurable"]["checkpoint_ns"],
                cid(t.config),
            ): t.checkpoint["channel_values"]
            for t in listed
        }
        assert len(listed) == len(got) == len(expected)
        assert got == expected
        for tup in await driver.list(make_config("t")):
            key = ("t", tup.config["configurable"]["checkpoint_ns"], cid(tup.config))
            assert tup.checkpoint["channel_values"] == expected[key]

    async def test_history_edited_shrunk_and_restarted(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await grow(line, 25)
        edited = copy.deepcopy(line.values["history"])
        edited[5] = message(5, "edited-")
        await line.step({"history": edited})
        await grow(line, 5)
        await line.step({"history": line.values["history"][:-8]})
        await grow(line, 5)
        await line.step({"history": []})
        await grow(line, 3)
        await line.step({"history": ("a", "tuple", "is", "not", "a", "list")})
        await line.step({"history": {"a": "dict", "n": list(range(500))}})
        await grow(line, 1)
        await line.check()

    async def test_forked_histories_keep_their_own_tails(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await grow(line, 20)
        left, right = line.fork(line.configs[14]), line.fork(line.configs[14])
        for _ in range(12):  # the branches alternate, as two runs on one thread would
            await grow(left, 1, "left-")
            await grow(right, 1, "right-")
        await grow(line, 3)
        for branch in (line, left, right):
            await branch.check()
        tip = await driver.get(left.config)
        history = tip.checkpoint["channel_values"]["history"]
        assert [m["id"] for m in history[14:17]] == [
            "msg-00014",
            "msg-left-00000",
            "msg-left-00001",
        ]

    async def test_reput_of_a_history_version_changes_only_that_version(
        self, driver: Driver
    ) -> None:
        line = Line(driver, "t")
        await grow(line, 30)
        at = line.configs[20]
        versions = line.versions_at[cid(at)]
        other = [message(i, "other-") for i in range(12)]
        values = {**line.expected[cid(at)], "history": other}
        parent = line.configs[19]
        await driver.put(
            parent, new_checkpoint(values, versions), {}, {"history": versions["history"]}
        )
        line.expected[cid(at)] = values
        await line.check()
        await grow(line, 5)
        await line.check()

    async def test_thread_operations_keep_histories_readable(self, driver: Driver) -> None:
        line = Line(driver, "t")
        await grow(line, 30)
        sub = Line(driver, "t", "child:1")
        await grow(sub, 15)
        await driver.copy_thread("t", "u")
        await driver.prune(["t"], strategy="keep_last", keep=3)
        await grow(line, 10)
        await grow(sub, 4)
        kept = set(line.ids[-13:]) | set(sub.ids[-7:])
        for branch in (line, sub):
            for at, values in branch.expected.items():
                tup = await driver.get_tuple(make_config("t", branch.ns, at))
                if at in kept:
                    assert tup is not None
                    assert tup.checkpoint["channel_values"] == values
                else:
                    assert tup is None
        copy_line = Line(
            driver,
            "u",
            config=make_config("u", "", line.ids[29]),
            values=line.expected[line.ids[29]],
            versions=line.versions_at[line.ids[29]],
        )
        await grow(copy_line, 5)
        await copy_line.check()
        for at in line.ids[:30]:
            tup = await driver.get(make_config("u", "", at))
            assert tup.checkpoint["channel_values"] == line.expected[at]
        await driver.prune(["t"], strategy="keep_latest")
        await grow(line, 2)
        latest = await driver.get(make_config("t"))
        assert latest.checkpoint["channel_values"] == line.expected[line.ids[-1]]
        await driver.delete_thread("t")
        await grow(line, 2)
        assert (await driver.get(make_config("t"))).checkpoint["channel_values"] == line.expected[
            line.ids[-1]
        ]

    async def test_delete_for_runs_keeps_other_runs_histories(self, driver: Driver) -> None:
        line = Line(driver, "t")
        for run in ("r1", "r2", "r3"):
            for _ in range(10):
                history = [*line.values.get("history", []), message(len(line.configs))]
                await line.step({"history": history}, {"run_id": run})
        await driver.delete_for_runs(["r1", "r2"])
        survivors = await driver.list(make_config("t"))
        assert [cid(t.config) for t in survivors] == line.ids[20:][::-1]
        for tup in survivors:
            assert tup.checkpoint["channel_values"] == line.expected[cid(tup.config)]
        for _ in range(3):
            history = [*line.values["history"], message(len(line.configs))]
            await line.step({"history": history}, {"run_id": "r4"})
        assert (await driver.get(make_config("t"))).checkpoint["channel_values"] == line.expected[
            line.ids[-1]
        ]

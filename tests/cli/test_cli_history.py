"""``history``, ``show``, ``diff``, ``threads`` and ``verify`` as a person reads them (#16).

Golden texts: the commands run on a store a real LangGraph graph left behind
(``chat.run_chat``: a long chat with a fork, interrupts in a subgraph,
a Send fan-out, a failed node), on SQLite and on Postgres, and their output
must equal the texts below once checkpoint ids, times and versions are
replaced (``chat.normalize``). Both backends give the same text.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from click.testing import CliRunner, Result

import tether.langgraph as tlg
from tether.backends.sqlite import SqliteSaver
from tether.cli._app import cli
from tether.graph import END, START, Send, StateGraph, interrupt

from .chat import THREADS, normalize, run_chat
from .graphs import Order, as_url, order_graph

# Wide enough that no cell is cut: how much of a cell fits depends on the
# width of the id column, which varies from run to run (unique prefixes of
# time-ordered ids); test_long_cells_are_cut_to_the_width checks the cut.
WIDTH = "300"


def invoke(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    return CliRunner().invoke(
        cli, list(args), env={"COLUMNS": WIDTH, **(env or {})}, input=input, catch_exceptions=False
    )


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = invoke(*args, env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr == "", result.stderr
    return result.stdout


def ok_json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(ok(*args, "--json", env=env))


def ids(store: str, thread: str) -> list[str]:
    """The thread's checkpoint ids, newest first over every namespace (#1, #2, ...)."""
    return [r["checkpoint_id"] for r in ok_json("history", store, thread)]


def golden(store: str, *args: str) -> str:
    """A command's output on ``store`` (STORE in the text), normalized."""
    command, rest = args[0], args[1:]
    text = ok(command, store, *rest)
    thread = rest[0] if rest and command != "threads" and command != "verify" else None
    return normalize(text.replace(store, "STORE"), ids(store, thread) if thread else [])


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("chat") / "chat.db"
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        run_chat(saver)
    return str(path)


@pytest.fixture
def postgres_store(pg_database: str) -> str:
    url = as_url(pg_database) + "?schema=chat"
    with tlg.PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        run_chat(saver)
    return url


# --- golden texts ------------------------------------------------------------------------------

GOLDEN = Path(__file__).parent / "golden"

#: (file in tests/cli/golden, command and arguments after STORE)
GOLDENS = [
    ("threads.txt", ("threads",)),
    ("history.txt", ("history", "chat")),
    ("history-tree.txt", ("history", "chat", "--tree", "--ns", "")),
    ("history-interrupted.txt", ("history", "waiting")),
    ("history-page.txt", ("history", "chat", "-n", "4", "-p", "2")),
    ("show.txt", ("show", "waiting", "#3")),
    ("diff-parent.txt", ("diff", "chat", "#10")),
    ("diff-two.txt", ("diff", "chat", "#33", "#1")),
    ("verify.txt", ("verify",)),
]


def _goldens(store: str) -> None:
    """Each command's text equals its golden file; TETHER_UPDATE_GOLDEN=1 rewrites
    the files instead (review the diff before committing it)."""
    update = os.environ.get("TETHER_UPDATE_GOLDEN") == "1"
    for name, args in GOLDENS:
        text = golden(store, *args)
        if update:
            (GOLDEN / name).write_text(text, encoding="utf-8")
        assert text == (GOLDEN / name).read_text(encoding="utf-8"), name


def test_golden_texts_on_sqlite(sqlite_store: str) -> None:
    _goldens(sqlite_store)


@pytest.mark.postgres
def test_golden_texts_on_postgres(postgres_store: str) -> None:
    _goldens(postgres_store)


# --- JSON shapes --------------------------------------------------------------------------------

ROW_KEYS = [
    "n",
    "checkpoint_id",
    "checkpoint_ns",
    "step",
    "source",
    "parent_checkpoint_id",
    "parent_n",
    "ts",
    "changed",
    "pending_writes",
    "next",
    "status",
    "interrupts",
    "changes",
    "summary",
]
CHANGE_KEYS = ["kind", "channel", "path", "old", "new", "index", "count"]


def test_history_json(sqlite_store: str) -> None:
    rows = ok_json("history", sqlite_store, "waiting")
    assert [r["n"] for r in rows] == list(range(1, 12))
    for row in rows:
        assert list(row) == ROW_KEYS
        for change in row["changes"]:
            assert list(change) == CHANGE_KEYS
    first = rows[0]
    assert first["checkpoint_ns"].startswith("review:")
    assert first["status"] == "interrupted"
    assert first["next"] == ["ask"]
    assert first["interrupts"] == [{"question": "send this answer?", "messages": 6}]
    assert first["parent_n"] == 2
    appended = rows[2]["changes"]
    assert [(c["kind"], c["path"], c["index"], c["count"]) for c in appended] == [
        ("appended", "messages", 5, 1),
        ("changed", "profile.prefs.turns", None, None),
    ]
    assert appended[0]["new"][0]["type"] == "ai"
    assert rows[2]["summary"].startswith("messages +1 ai: answer 5 to 'w2'")
    # the runtime's channels on demand
    internal = ok_json("history", sqlite_store, "waiting", "--internal")
    assert "branch:to:review" in {c["channel"] for c in internal[2]["changes"]}
    assert "branch:to:review" not in {c["channel"] for c in rows[2]["changes"]}
    # a tree: rows in tree order, each with its place
    tree = ok_json("history", sqlite_store, "chat", "--tree", "--ns", "")
    assert [list(r["tree"]) for r in tree[:1]] == [
        ["depth", "branch", "last", "guides", "children"]
    ]
    forks = [r for r in tree if r["tree"]["children"] > 1]
    assert len(forks) == 1
    assert [r["tree"]["depth"] for r in tree if r["tree"]["branch"]] == [1, 1]
    # paging
    page = ok_json("history", sqlite_store, "chat", "--limit", "3", "--page", "2")
    assert [r["n"] for r in page] == [4, 5, 6]
    assert invoke("history", sqlite_store, "chat", "--page", "2").exit_code == 2
    assert ok_json("history", sqlite_store, "chat", "--limit", "3", "--page", "99") == []


def test_show_and_diff_json(sqlite_store: str) -> None:
    shown = ok_json("show", sqlite_store, "waiting", "#3")
    assert list(shown) == [
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "ts",
        "metadata",
        "status",
        "channel_versions",
        "channel_values",
        "pending_writes",
    ]
    assert shown["status"] == {
        "state": "interrupted",
        "next": ["review"],
        "interrupts": [{"question": "send this answer?", "messages": 6}],
        "errors": [],
    }
    chat = ids(sqlite_store, "chat")
    edit = ok_json("diff", sqlite_store, "chat", "#10")
    assert list(edit) == ["thread_id", "from", "to", "changes"]
    assert edit["from"]["checkpoint_id"] == chat[10]  # #11, the parent of #10
    assert edit["to"] == {
        "checkpoint_id": chat[9],
        "checkpoint_ns": "",
        "n": 10,
        "step": 21,
        "source": "update",
    }
    (change,) = edit["changes"]
    assert change["kind"] == "changed"
    assert change["path"] == "messages[1].content"
    assert change["new"] == "an edited answer"
    assert change["old"].startswith("answer 1 to 'question 1'")
    # the first checkpoint has no parent: everything it holds is added
    first = ok_json("diff", sqlite_store, "chat", f"#{len(chat)}")
    assert first["from"] is None
    assert [c["path"] for c in first["changes"]] == ["__start__"]
    broken = ok_json("show", sqlite_store, "broken")
    assert broken["status"]["state"] == "error"
    assert broken["status"]["errors"] == ["ValueError: the model is unreachable"]


def test_threads_json(sqlite_store: str) -> None:
    infos = {i["thread_id"]: i for i in ok_json("threads", sqlite_store)}
    assert sorted(infos) == sorted(THREADS)
    assert {t: (i["status"], i["next"]) for t, i in infos.items()} == {
        "broken": ("error", ["reply"]),
        "chat": ("idle", []),
        "done": ("idle", []),
        "paused": ("pending", ["reply"]),
        "waiting": ("interrupted", ["review"]),
    }
    assert infos["waiting"]["interrupts"] == [{"question": "send this answer?", "messages": 6}]
    assert list(infos["chat"]) == [
        "thread_id",
        "checkpoints",
        "namespaces",
        "latest_checkpoint_id",
        "latest_step",
        "latest_ts",
        "status",
        "next",
        "interrupts",
        # from the thread index (#15), after the keys of before
        "updated_at",
        "created_at",
        "bytes",
        "metadata",
    ]


def test_threads_filters_and_pages_from_the_index(sqlite_store: str) -> None:
    """``--status``, ``--older-than`` and ``--limit``/``--cursor`` ask saver.threads() (#15)."""
    waiting = ok_json("threads", sqlite_store, "--status", "interrupted")
    assert [i["thread_id"] for i in waiting] == ["waiting"]
    assert waiting[0]["interrupts"] == [{"question": "send this answer?", "messages": 6}]
    two = ok_json("threads", sqlite_store, "--status", "idle", "--status", "error")
    assert [i["thread_id"] for i in two] == ["broken", "chat", "done"]
    assert ok_json("threads", sqlite_store, "--older-than", "7d") == []
    assert len(ok_json("threads", sqlite_store, "--older-than", "0s")) == len(THREADS)
    seen: list[str] = []
    args = ["threads", sqlite_store, "--limit", "2", "--order", "-updated", "--json"]
    cursor: list[str] = []
    while True:
        result = CliRunner().invoke(cli, [*args, *cursor], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        page = json.loads(result.stdout)
        assert 1 <= len(page) <= 2
        seen += [i["thread_id"] for i in page]
        if "next page: --cursor" not in result.stderr:
            break
        cursor = ["--cursor", result.stderr.split("--cursor", 1)[1].strip()]
    assert sorted(seen) == sorted(THREADS)
    text = CliRunner().invoke(cli, ["threads", sqlite_store, "--limit", "1"])
    assert "next page: --cursor" in text.stdout
    bad = CliRunner().invoke(cli, ["threads", sqlite_store, "--older-than", "soon"])
    assert bad.exit_code == 2
    assert "not a duration" in bad.output
    bad = CliRunner().invoke(cli, ["threads", sqlite_store, "--cursor", "nope"])
    assert bad.exit_code == 1
    assert "cursor" in bad.stderr


def _copy(store: str, tmp_path: Path) -> str:
    target = tmp_path / "copy.db"
    with sqlite3.connect(store) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return str(target)


def test_manage_json(sqlite_store: str, tmp_path: Path) -> None:
    store = _copy(sqlite_store, tmp_path)
    copied = ok_json("copy", store, "chat", "chat-2")
    assert copied == {"source": "chat", "target": "chat-2", "checkpoints": 38, "overwritten": False}
    again = ok_json("copy", store, "chat", "chat-2", "--overwrite")
    assert again["overwritten"] is True
    pruned = ok_json("prune", store, "chat-2", "waiting", "--keep", "2")
    assert pruned == {
        "strategy": "keep_last",
        "keep": 2,
        "threads": [
            {"thread_id": "chat-2", "before": 38, "after": 8, "kept_per_namespace": 2},
            {"thread_id": "waiting", "before": 11, "after": 4, "kept_per_namespace": 2},
        ],
    }
    deleted = ok_json("prune", store, "waiting", "--delete", "--yes")
    assert deleted["strategy"] == "delete"
    assert deleted["threads"] == [
        {"thread_id": "waiting", "before": 4, "after": 0, "kept_per_namespace": None}
    ]
    assert ok_json("delete", store, "chat-2", "--yes") == {
        "thread_id": "chat-2",
        "deleted_checkpoints": 8,
    }
    # what prune leaves is not damage: verify notes it and exits 0
    report = ok_json("verify", store)
    assert report["ok"] is True
    assert report["problems"] == 0


# --- the environment ----------------------------------------------------------------------------


def test_tether_store_stands_for_store(sqlite_store: str, tmp_path: Path) -> None:
    env = {"TETHER_STORE": sqlite_store}
    assert ok_json("threads", env=env) == ok_json("threads", sqlite_store)
    assert ok_json("history", "chat", env=env) == ok_json("history", sqlite_store, "chat")
    assert ok_json("show", "waiting", "#3", env=env) == ok_json(
        "show", sqlite_store, "waiting", "#3"
    )
    assert ok_json("show", "--ns", "", "chat", "--step", "4", env=env)["metadata"]["step"] == 4
    assert ok_json("diff", "chat", "#10", env=env)["changes"][0]["path"] == "messages[1].content"
    # a STORE given is used: the first argument when it names a store
    other = _copy(sqlite_store, tmp_path)
    assert ok_json("delete", other, "done", "--yes", env=env)["thread_id"] == "done"
    assert "done" not in {i["thread_id"] for i in ok_json("threads", other)}
    assert "done" in {i["thread_id"] for i in ok_json("threads", env=env)}
    # the error names the store read from the environment
    result = invoke("history", "nope", env=env)
    assert result.exit_code == 1
    assert f"thread 'nope' not found in {sqlite_store}" in result.stderr
    # without it, STORE is required (a usage error)
    assert invoke("threads").exit_code == 2


def test_tether_allowlist_is_the_default_of_allow(tmp_path: Path) -> None:
    path = str(tmp_path / "order.db")
    with tlg.SqliteSaver.from_conn_string(path, allowlist=[(Order.__module__, "Order")]) as s:
        order_graph(s).invoke({"order": Order("tea", 1)}, {"configurable": {"thread_id": "o"}})
    refused = invoke("show", path, "o")
    assert refused.exit_code == 1
    assert f"--allow {Order.__module__}:Order" in refused.stderr
    env = {"TETHER_ALLOWLIST": f"{Order.__module__}:Order"}
    shown = ok_json("show", path, "o", env=env)
    assert shown["channel_values"]["order"] == {"type": "Order", "item": "tea", "qty": 2}
    assert ok_json("threads", path, env=env)[0]["status"] == "idle"
    assert "TETHER_ALLOWLIST" in invoke("show", "--help").stdout
    bad = invoke("show", path, "o", env={"TETHER_ALLOWLIST": "not a name"})
    assert bad.exit_code == 2
    assert "TETHER_ALLOWLIST" in bad.stderr or "--allow" in bad.stderr


# --- references ---------------------------------------------------------------------------------


def test_checkpoint_references(sqlite_store: str) -> None:
    chat = ids(sqlite_store, "chat")
    by_id = ok_json("show", sqlite_store, "chat", chat[9])
    assert ok_json("show", sqlite_store, "chat", "#10") == by_id
    prefix = chat[9][:14]
    assert ok_json("show", sqlite_store, "chat", prefix) == by_id
    assert ok_json("show", sqlite_store, "chat", "--step", "21") == by_id
    # #N names the same checkpoint whatever --ns is given
    assert ok_json("show", sqlite_store, "chat", "#10", "--ns", "")["checkpoint_id"] == chat[9]
    ambiguous = invoke("show", sqlite_store, "chat", chat[0][:8])
    assert ambiguous.exit_code == 1
    assert "is the start of 38 checkpoint ids of thread 'chat'" in ambiguous.stderr
    assert "#1 " in ambiguous.stderr
    forked = invoke("show", sqlite_store, "chat", "--step", "5")
    assert forked.exit_code == 1
    assert "2 checkpoints of thread 'chat' are at step 5 (forks or subgraphs): #9 " in forked.stderr
    assert invoke("show", sqlite_store, "chat", "#99").exit_code == 1
    assert "no row #99" in invoke("show", sqlite_store, "chat", "#99").stderr
    # a subgraph's steps with --ns
    sub = ok_json("history", sqlite_store, "waiting")[0]
    got = ok_json("show", sqlite_store, "waiting", "--ns", sub["checkpoint_ns"], "--step", "0")
    assert got["checkpoint_id"] == sub["checkpoint_id"]


def test_show_folds_long_values_unless_full(sqlite_store: str) -> None:
    text = ok("show", sqlite_store, "chat", "#10")
    assert "12 messages" in text
    assert "… 7 more (--full shows every message)" in text
    assert "[0] human: question 1" in text
    assert "[2] human" not in text
    full = ok("show", sqlite_store, "chat", "#10", "--full")
    assert "[2] human: question 2" in full
    assert "12 messages" in full
    assert "more (--full" not in full
    assert "…" not in full  # whole texts, folded onto more lines
    internal = ok("show", sqlite_store, "chat", "#10", "--internal")
    assert "branch:to:" in internal or "__start__" in internal
    # no line ends in spaces when the output is not a terminal
    for output in (text, full, ok("threads", sqlite_store), ok("history", sqlite_store, "chat")):
        assert [line for line in output.splitlines() if line.endswith(" ")] == []


# --- verify -------------------------------------------------------------------------------------


def _damage(store: str, tmp_path: Path, sql: str, *args: Any) -> str:
    path = _copy(store, tmp_path)
    with sqlite3.connect(path) as conn:
        assert conn.execute(sql, args).rowcount >= 1
    return path


def test_verify_names_a_missing_value(sqlite_store: str, tmp_path: Path) -> None:
    path = _damage(
        sqlite_store,
        tmp_path,
        "DELETE FROM tether_blobs WHERE thread_id = 'waiting' AND channel = 'profile'",
    )
    result = invoke("verify", path)
    assert result.exit_code == 1
    assert "thread 'waiting'" in result.stdout
    assert "channel 'profile'" in result.stdout
    assert "is missing: the checkpoint names it and its row is gone" in result.stdout
    assert "problem(s) found" in result.stdout
    report = json.loads(invoke("verify", path, "--json").stdout)
    assert report["ok"] is False
    assert {f["kind"] for f in report["findings"]} == {"unreadable"}
    assert {f["thread_id"] for f in report["findings"]} == {"waiting"}


def test_verify_names_a_missing_snapshot(tmp_path: Path) -> None:
    path = str(tmp_path / "long.db")
    with tlg.SqliteSaver.from_conn_string(path) as saver:
        run_chat(saver, turns=40)  # long enough for snapshots and append tails
    with sqlite3.connect(path) as conn:
        (base,) = conn.execute(
            "SELECT base FROM tether_blobs WHERE base IS NOT NULL LIMIT 1"
        ).fetchone()
        conn.execute("DELETE FROM tether_blobs WHERE version = ?", (base,))
    result = invoke("verify", path)
    assert result.exit_code == 1
    assert f"the snapshot {base!r}" in result.stdout
    assert "extends is missing" in result.stdout


def test_verify_names_a_missing_parent_and_orphan_writes(sqlite_store: str, tmp_path: Path) -> None:
    chat = ids(sqlite_store, "chat")
    gone = chat[16]  # #17: a loop checkpoint in the middle, with pending writes
    path = _damage(
        sqlite_store, tmp_path, "DELETE FROM tether_checkpoints WHERE checkpoint_id = ?", gone
    )
    result = invoke("verify", path, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    kinds = {(f["kind"], f["checkpoint_id"]) for f in report["findings"]}
    assert ("missing-parent", chat[15]) in kinds  # #16's parent is gone
    assert ("orphan-writes", gone) in kinds
    text = invoke("verify", path).stdout
    assert f"the parent {gone} of checkpoint {chat[15]} is not in the store" in text
    assert f"pending write(s) of checkpoint {gone}, which is not in the store" in text


def test_verify_progress_only_on_demand(sqlite_store: str) -> None:
    quiet = invoke("verify", sqlite_store)
    assert quiet.stderr == ""
    shown = invoke("verify", sqlite_store, "--progress")
    assert shown.exit_code == 0
    assert "verifying" in shown.stderr
    pruned = invoke("prune", _copy_for_prune(sqlite_store), "done", "--keep", "1", "--progress")
    assert "pruning" in pruned.stderr


def _copy_for_prune(store: str) -> str:
    target = Path(store).with_name("prune.db")
    with sqlite3.connect(store) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return str(target)


@pytest.mark.postgres
def test_verify_on_postgres(postgres_store: str) -> None:
    report = ok_json("verify", postgres_store)
    assert report["ok"] is True
    assert report["checkpoints"] == 56
    assert report["findings"] == []


class OwnState(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    answer: str


def test_a_store_of_tethers_own_runtime(tmp_path: Path) -> None:
    """Graphs of tether.graph store its Send packets: read without --allow."""

    def ask(state: OwnState) -> OwnState:
        return {"answer": str(interrupt({"question": "go?"}))}

    g = StateGraph(OwnState)
    g.add_node("plan", lambda s: {})
    g.add_node("item", lambda arg: {"items": [arg]})
    g.add_node("ask", ask)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("item", "a"), Send("item", "b")])
    g.add_edge("item", "ask")
    g.add_edge("ask", END)
    path = str(tmp_path / "own.db")
    with SqliteSaver(path) as saver:
        g.compile(checkpointer=saver).invoke({"items": []}, {"configurable": {"thread_id": "t"}})
    rows = ok_json("history", path, "t")
    assert rows[0]["status"] == "interrupted"
    assert rows[0]["interrupts"] == [{"question": "go?"}]
    assert [r["next"] for r in rows] == [["ask"], ["item", "item"], ["plan"], ["__start__"]]
    assert ok_json("threads", path)[0]["status"] == "interrupted"
    assert ok_json("verify", path)["ok"] is True


def test_long_cells_are_cut_to_the_width(sqlite_store: str) -> None:
    for width in (80, 120, 160):
        text = invoke("history", sqlite_store, "chat", env={"COLUMNS": str(width)}).stdout
        lines = text.splitlines()[1:]
        assert max(len(line) for line in lines) == width
        assert all(len(line) <= width for line in lines)
        cut = [line for line in lines if len(line) == width]
        assert cut
        assert all(line.endswith("…") for line in cut)
    narrow = invoke("history", sqlite_store, "chat", env={"COLUMNS": "20"}).stdout
    # the columns before "changes" are never cut; changes keep 20 characters
    assert "#38" in narrow

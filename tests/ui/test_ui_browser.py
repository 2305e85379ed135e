"""``tether ui`` in a real headless Chromium, as a person would use it.

Each test serves the viewer of a store a real graph left (``conftest``), opens
it in Chromium and clicks through: the threads list, a thread's fork tree, a
checkpoint, a diff, a fork with ``--allow-edit`` (then read back through the
saver and by LangGraph), copy and delete; the stored HTML that must stay
text, CSRF refusals, and a read-only viewer without edit controls.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

import tether.langgraph as tlg
from tether import history
from tether.backends.sqlite import SqliteSaver
from tether.checkpoint import CheckpointTuple
from tether.langgraph import langgraph_serializer

from ..cli.graphs import build
from .helpers import XSS_TEXT, XSS_THREAD, Watched, long_thread

pytestmark = pytest.mark.ui

Serve = Callable[..., str]


def _tuples(path: Path, thread: str, ns: str | None = "") -> list[CheckpointTuple]:
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    serde = langgraph_serializer([("tests.cli.graphs", "Order")])
    with SqliteSaver(str(path), serde=serde) as saver:
        return list(saver.list({"configurable": conf}))


def _parent(tup: CheckpointTuple) -> str | None:
    return tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None


def _id(tup: CheckpointTuple) -> str:
    return str(tup.checkpoint["id"])


# --- reading -------------------------------------------------------------------------------


def test_threads_page_lists_status_counts_and_filters(
    store: Path, serve: Serve, page: Watched
) -> None:
    url = serve(store)
    page.page.goto(url + "/")
    rows = page.page.locator("table.threads tbody tr")
    expect(rows).to_have_count(4)
    chat2 = page.page.locator("tr[data-thread='chat-2']")
    expect(chat2.locator(".badge")).to_have_text("interrupted")
    expect(chat2.locator("td").nth(2)).to_have_text("review")
    expect(chat2.locator("td").nth(3)).to_have_text(str(len(_tuples(store, "chat-2", None))))
    # A thread whose state holds a class the allowlist refuses: no status, and why.
    orders = page.page.locator("tr[data-thread='orders']")
    expect(orders.locator(".badge")).to_have_text("unreadable")
    assert "tests.cli.graphs.Order" in (orders.locator(".problem").get_attribute("title") or "")
    expect(page.page.locator(".mode")).to_have_text("read-only")
    page.page.fill("input[name=q]", "CHAT")
    page.page.click("form.filter button")
    expect(rows).to_have_count(2)
    expect(page.page.locator(".count")).to_contain_text("2 thread(s) matching")


def test_threads_page_pages(
    store: Path, serve: Serve, page: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tether.ui._reader.THREADS_PAGE", 3)
    page.page.goto(serve(store) + "/")
    expect(page.page.locator("table.threads tbody tr")).to_have_count(3)
    expect(page.page.locator(".count")).to_contain_text("page 1 of 2")
    page.page.click("a[rel=next]")
    expect(page.page.locator("table.threads tbody tr")).to_have_count(1)
    expect(page.page.locator("a[rel=prev]")).to_be_visible()


def test_navigate_the_fork_tree(store: Path, serve: Serve, page: Watched) -> None:
    root = _tuples(store, "chat-1")
    by_id = {_id(t): t for t in root}
    forked = [cid for cid in by_id if sum(_parent(t) == cid for t in root) > 1]
    assert len(forked) == 1, "the scenario forks chat-1 once (update_state on an old checkpoint)"
    fork_point = forked[0]
    url = serve(store)
    page.page.goto(url + "/")
    page.page.click("a.thread-link:text-is('chat-1')")
    expect(page.page.locator("h1")).to_contain_text("chat-1")
    nodes = page.page.locator("table.tree tr.node")
    expect(nodes).to_have_count(len(root))
    # Oldest first, every checkpoint once; the fork point says so, its children start branches.
    shown = nodes.evaluate_all("rows => rows.map(r => r.dataset.checkpoint)")
    assert sorted(shown) == sorted(by_id)
    assert shown[0] == _id(root[-1])
    fork_row = page.page.locator(f"tr[data-checkpoint='{fork_point}']")
    expect(fork_row.locator(".badge.forked")).to_have_text("fork ×2")
    children = [cid for cid, t in by_id.items() if _parent(t) == fork_point]
    for child in children:
        row = page.page.locator(f"tr[data-checkpoint='{child}']")
        expect(row).to_have_class(re.compile(r"\bbranch\b"))
        assert row.get_attribute("data-depth") == "1"
    # The interrupted checkpoint is marked, with the node it waits in.
    latest_loop = next(t for t in root if t.metadata["source"] == "loop")
    row = page.page.locator(f"tr[data-checkpoint='{_id(latest_loop)}']")
    expect(row.locator(".badge")).to_have_text("interrupted")
    expect(row.locator("td").nth(6)).to_contain_text("review")
    # Down the newer branch to its checkpoint page, then up to the fork point.
    newest = max(children)
    page.page.click(f"tr[data-checkpoint='{newest}'] a.cp-link")
    expect(page.page.locator("h1 code")).to_have_text(newest)
    expect(page.page.locator(".facts-grid")).to_contain_text(str(by_id[newest].metadata["step"]))
    page.page.click("a.parent-link")
    expect(page.page.locator("h1 code")).to_have_text(fork_point)
    expect(page.page.locator(".facts-grid .badge.forked")).to_be_visible()
    # The state at the fork point: messages as a conversation, user channels by name.
    values = by_id[fork_point].checkpoint["channel_values"]
    bubbles = page.page.locator(".channel[data-channel='messages'] .msg")
    expect(bubbles).to_have_count(len(values["messages"]))
    expect(bubbles.first.locator(".text")).to_have_text(values["messages"][0].content)
    expect(bubbles.first).to_have_class(re.compile("msg-user"))
    # A subgraph's namespace is a click away.
    page.page.locator(".crumbs a").nth(1).click()
    page.page.click(".namespaces a.ns >> nth=0")
    expect(page.page.locator(".namespaces .ns.current")).to_contain_text("review")
    assert page.dialogs == []
    assert page.errors == []


def test_diff_default_parent_and_any_two(store: Path, serve: Serve, page: Watched) -> None:
    root = _tuples(store, "chat-1")
    url = serve(store)
    page.page.goto(f"{url}/thread?t=chat-1")
    # A checkpoint that appended a message: its changes from its parent (the Δ link).
    by_id = {_id(t): t for t in root}

    def count(t: CheckpointTuple | None) -> int:
        return len(t.checkpoint["channel_values"].get("messages", [])) if t else 0

    grew = next(t for t in root if _parent(t) and count(t) > count(by_id.get(_parent(t) or "")))
    page.page.click(f"tr[data-checkpoint='{_id(grew)}'] a.delta")
    expect(page.page.locator(".diff-ends a.to")).to_have_text(_id(grew))
    expect(page.page.locator(".diff-ends a.from")).to_have_text(_parent(grew) or "")
    appended = page.page.locator(".change-appended")
    expect(appended).to_have_count(1)
    expect(appended.locator(".path")).to_have_text("messages")
    expect(appended.locator(".msg")).to_have_count(1)
    # Any two, picked in the tree: the oldest and the fork (newest) checkpoint.
    page.page.go_back()
    newest, oldest = root[0], root[-1]
    page.page.check(f"tr[data-checkpoint='{_id(oldest)}'] input[name=a]")
    page.page.check(f"tr[data-checkpoint='{_id(newest)}'] input[name=b]")
    page.page.click("button:text('Compare A → B')")
    expect(page.page.locator(".diff-ends a.from")).to_have_text(_id(oldest))
    want = history.diff(oldest.checkpoint["channel_values"], newest.checkpoint["channel_values"])
    paths = page.page.locator(".changes .change .path").all_inner_texts()
    assert paths == [c.path for c in want]
    assert "approved" in paths


def test_xss_in_stored_strings_renders_as_text(store: Path, serve: Serve, page: Watched) -> None:
    url = serve(store)
    page.page.goto(url + "/")
    link = page.page.locator("a.thread-link", has_text="bold")
    expect(link).to_have_text(XSS_THREAD)
    assert page.page.locator("table.threads b, table.threads i").count() == 0
    link.click()
    expect(page.page.locator("h1 code")).to_have_text(XSS_THREAD)
    page.page.locator("tr.node a.cp-link").last.click()
    bubble = page.page.locator(".msg-user .text").first
    expect(bubble).to_have_text(XSS_TEXT)
    # The stored markup is text: no element was made of it, no script ran.
    assert page.page.locator("script").count() == 1  # ui.js, from /static
    assert page.page.locator("img").count() == 0
    assert page.page.evaluate("window.__xss") is None
    page.page.locator(".msg-user .fields summary").first.click()
    page.page.wait_for_timeout(200)
    assert page.dialogs == []
    assert page.errors == []


def test_undecodable_value_shows_its_class_and_a_hint(
    store: Path, serve: Serve, page: Watched
) -> None:
    url = serve(store)
    response = page.page.goto(f"{url}/checkpoint?t=orders")
    assert response is not None
    assert response.status == 200
    box = page.page.locator(".channel[data-channel='order'] .undecodable")
    expect(box).to_contain_text("tests.cli.graphs.Order")
    expect(box).to_contain_text("--allow tests.cli.graphs:Order")
    page.page.goto(f"{url}/thread?t=orders")
    expect(page.page.locator("tr.node")).to_have_count(len(_tuples(store, "orders")))


def test_allowed_class_is_shown_by_field(store: Path, serve: Serve, page: Watched) -> None:
    url = serve(store, allow=(("tests.cli.graphs", "Order"),))
    page.page.goto(f"{url}/checkpoint?t=orders")
    order = page.page.locator(".channel[data-channel='order']")
    expect(order.locator(".type").first).to_have_text("Order")
    expect(order).to_contain_text('"tea"')
    assert order.locator(".undecodable").count() == 0


def test_a_missing_thread_is_a_404_page(store: Path, serve: Serve, page: Watched) -> None:
    response = page.page.goto(serve(store) + "/thread?t=ghost")
    assert response is not None
    assert response.status == 404
    expect(page.page.locator(".error-message")).to_contain_text("thread 'ghost' not found")


# --- editing -------------------------------------------------------------------------------


def test_fork_with_edited_values(store: Path, serve: Serve, page: Watched) -> None:
    root = _tuples(store, "chat-1")
    parents = {_parent(t) for t in root}
    base = next(
        t
        for t in root
        if t.checkpoint["channel_values"].get("approved") == "yes" and _id(t) in parents
    )
    url = serve(store, allow_edit=True)
    page.page.goto(f"{url}/checkpoint?t=chat-1&c={_id(base)}")
    expect(page.page.locator(".mode")).to_have_text("editing allowed")
    page.page.click("a.fork-button")
    area = page.page.locator("textarea[name='v:approved']")
    expect(area).to_have_value('"yes"')
    assert page.page.locator("textarea[name='v:messages']").count() == 0  # not plain JSON
    area.fill('"no, edited"')
    page.page.click("button:text('Review the fork')")
    # The confirmation: what will change, nothing stored yet.
    expect(page.page.locator("h1")).to_have_text("Create the fork?")
    expect(page.page.locator(".change .path")).to_have_text(["approved"])
    assert len(_tuples(store, "chat-1")) == len(root)
    page.page.click("button.confirm")
    expect(page.page.locator("h1")).to_contain_text("Checkpoint")
    new_id = page.page.locator("h1 code").inner_text()
    expect(page.page.locator("a.parent-link")).to_have_text(_id(base))
    # Read back through the saver: a child of the base with the edit, the rest carried over.
    after = {_id(t): t for t in _tuples(store, "chat-1")}
    assert len(after) == len(root) + 1
    fork = after[new_id]
    assert _parent(fork) == _id(base)
    assert fork.metadata["source"] == "fork"
    assert fork.metadata["step"] == base.metadata["step"] + 1
    values, old = fork.checkpoint["channel_values"], base.checkpoint["channel_values"]
    assert values["approved"] == "no, edited"
    assert {k: v for k, v in values.items() if k != "approved"} == {
        k: v for k, v in old.items() if k != "approved"
    }
    versions, old_versions = (
        fork.checkpoint["channel_versions"],
        base.checkpoint["channel_versions"],
    )
    assert versions["approved"] > old_versions["approved"]
    assert {k for k in versions if versions[k] != old_versions.get(k)} == {"approved"}
    assert fork.checkpoint["versions_seen"] == base.checkpoint["versions_seen"]
    assert fork.pending_writes == []
    # LangGraph reads the fork as a state with the edit, due to run what the base would run.
    with tlg.SqliteSaver.from_conn_string(str(store)) as saver:
        graph = build(saver)
        conf = {"configurable": {"thread_id": "chat-1", "checkpoint_id": new_id}}
        state = graph.get_state(conf)
        assert state.values["approved"] == "no, edited"
        assert (
            state.next
            == graph.get_state(
                {"configurable": {"thread_id": "chat-1", "checkpoint_id": _id(base)}}
            ).next
        )
    # The tree shows it as a new branch of the base (which had one child before).
    page.page.goto(f"{url}/thread?t=chat-1")
    row = page.page.locator(f"tr[data-checkpoint='{new_id}']")
    expect(row.locator(".src")).to_have_text("fork")
    expect(page.page.locator(f"tr[data-checkpoint='{_id(base)}'] .badge.forked")).to_be_visible()


def test_fork_refuses_bad_json_and_no_change(store: Path, serve: Serve, page: Watched) -> None:
    base = next(t for t in _tuples(store, "chat-1") if "approved" in t.checkpoint["channel_values"])
    url = serve(store, allow_edit=True)
    page.page.goto(f"{url}/fork?t=chat-1&c={_id(base)}")
    page.page.locator("textarea[name='v:approved']").fill("{not json")
    page.page.click("button:text('Review the fork')")
    expect(page.page.locator(".error-message")).to_contain_text("'approved' is not JSON")
    page.page.goto(f"{url}/fork?t=chat-1&c={_id(base)}")
    page.page.click("button:text('Review the fork')")
    expect(page.page.locator(".error-message")).to_contain_text("no value was changed")


def test_copy_then_delete_a_thread(store: Path, serve: Serve, page: Watched) -> None:
    count = len(_tuples(store, "chat-2", None))
    url = serve(store, allow_edit=True)
    page.page.goto(f"{url}/thread?t=chat-2")
    page.page.fill("input[name=target]", "chat-2 copy")
    page.page.click("button:text('Copy thread')")
    expect(page.page.locator("h1")).to_have_text("Copy the thread?")
    assert _tuples(store, "chat-2 copy", None) == []
    page.page.click("button.confirm")
    expect(page.page.locator("h1 code")).to_have_text("chat-2 copy")
    copied = _tuples(store, "chat-2 copy", None)
    assert [_id(t) for t in copied] == [_id(t) for t in _tuples(store, "chat-2", None)]
    assert len(copied) == count
    page.page.click("button:text('Delete thread')")
    expect(page.page.locator(".confirm-message")).to_contain_text(f"{count} checkpoint(s)")
    page.page.click("a.cancel")
    assert len(_tuples(store, "chat-2 copy", None)) == count
    page.page.click("button:text('Delete thread')")
    page.page.click("button.confirm")
    expect(page.page.locator("h1")).to_have_text("Threads")
    assert _tuples(store, "chat-2 copy", None) == []
    expect(page.page.locator("a.thread-link", has_text="chat-2 copy")).to_have_count(0)
    # A copy onto an existing thread is refused before anything is asked.
    page.page.goto(f"{url}/thread?t=chat-2")
    page.page.fill("input[name=target]", "chat-1")
    page.page.click("button:text('Copy thread')")
    expect(page.page.locator(".error-message")).to_contain_text("already has")


def test_csrf_a_post_without_a_valid_token_is_refused(
    store: Path, serve: Serve, page: Watched
) -> None:
    url = serve(store, allow_edit=True)
    page.page.goto(f"{url}/thread?t=chat-2")
    real = page.page.locator("form[action='/delete'] input[name=csrf]").get_attribute("value")
    fork_token = page.page.locator("form[action='/copy'] input[name=csrf]").get_attribute("value")
    assert real
    assert fork_token
    forged = real[:-4] + ("0000" if not real.endswith("0000") else "1111")
    post = page.page.request.post
    for token in (None, "", "1.2.3", forged, fork_token):
        form = {"t": "chat-2", "confirm": "yes"}
        if token is not None:
            form["csrf"] = token
        response = post(f"{url}/delete", form=form)
        assert response.status == 403, token
        assert "CSRF token" in response.text()
    assert _tuples(store, "chat-2", None)
    # The page's own token works (asking first, as without confirm=yes).
    response = post(f"{url}/delete", form={"t": "chat-2", "csrf": real})
    assert response.status == 200
    assert "Delete the thread?" in response.text()
    assert _tuples(store, "chat-2", None)
    # The confirmation's token is spent by the change: sent again, it is refused.
    token = re.search(r'name="csrf" value="([^"]+)"', response.text())
    assert token is not None
    confirm = {"t": "chat-2", "csrf": token[1], "confirm": "yes"}
    assert post(f"{url}/delete", form=confirm).status == 200  # redirected to the threads
    assert _tuples(store, "chat-2", None) == []
    again = post(f"{url}/delete", form=confirm)
    assert again.status == 403
    assert "already used" in again.text()


def test_read_only_viewer_has_no_edit_controls_or_routes(
    store: Path, serve: Serve, page: Watched
) -> None:
    before = _tuples(store, "chat-1", None)
    url = serve(store)
    page.page.goto(f"{url}/thread?t=chat-1")
    assert page.page.locator("form[method=post]").count() == 0
    assert (
        page.page.locator("button:text('Delete thread'), button:text('Copy thread')").count() == 0
    )
    page.page.locator("tr.node a.cp-link").first.click()
    assert page.page.locator("a.fork-button").count() == 0
    assert page.page.locator("input[name=csrf]").count() == 0
    cid = _id(before[0])
    response = page.page.goto(f"{url}/fork?t=chat-1&c={cid}")
    assert response is not None
    assert response.status == 404
    for path in ("/fork", "/copy", "/delete"):
        answer = page.page.request.post(url + path, form={"t": "chat-1", "confirm": "yes"})
        assert answer.status in (404, 405), path
    assert _tuples(store, "chat-1", None) == before


# --- Postgres ------------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_postgres_store(pg_store: str, serve: Serve, page: Watched) -> None:
    url = serve(pg_store)
    page.page.goto(url + "/")
    expect(page.page.locator("table.threads tbody tr")).to_have_count(2)
    page.page.click("a.thread-link:text-is('chat-1')")
    nodes = page.page.locator("table.tree tr.node")
    expect(nodes.first).to_be_visible()
    assert nodes.count() > 5
    expect(page.page.locator(".badge.forked")).to_have_count(1)
    nodes.last.locator("a.cp-link").click()
    expect(page.page.locator(".channel[data-channel='messages'] .msg").first).to_be_visible()


@pytest.mark.postgres
def test_fork_on_a_postgres_store(pg_store: str, serve: Serve, page: Watched) -> None:
    url = serve(pg_store, allow_edit=True)
    page.page.goto(f"{url}/thread?t=chat-2")
    page.page.locator("tr.node a.cp-link").last.click()
    base = page.page.locator("h1 code").inner_text()
    page.page.click("a.fork-button")
    page.page.locator("textarea[name='v:parts']").fill('["edited"]')
    page.page.click("button:text('Review the fork')")
    page.page.click("button.confirm")
    expect(page.page.locator("a.parent-link")).to_have_text(base)
    new_id = page.page.locator("h1 code").inner_text()
    with tlg.PostgresSaver.from_conn_string(pg_store) as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "chat-2", "checkpoint_id": new_id}})
    assert tup is not None
    assert tup.metadata["source"] == "fork"
    assert tup.checkpoint["channel_values"]["parts"] == ["edited"]
    assert tup.parent_config is not None
    assert tup.parent_config["configurable"]["checkpoint_id"] == base


# --- a long thread -------------------------------------------------------------------------


def test_a_1000_checkpoint_thread_opens(
    tmp_path: Path, serve: Serve, page: Watched, capsys: pytest.CaptureFixture[str]
) -> None:
    """Logged, not asserted: how long the tree of a 1,000-checkpoint thread takes on SQLite."""
    path = tmp_path / "long.db"
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        long_thread(saver, 1000)
    url = serve(path)
    # Wall time depends on the machine's load; the CPU time of this process (the
    # server's threads, and Playwright's client) is the server's share of it.
    started, cpu = time.perf_counter(), time.process_time()
    response = page.page.goto(f"{url}/thread?t=long")
    expect(page.page.locator("table.tree tr.node")).to_have_count(1000)
    took, took_cpu = time.perf_counter() - started, time.process_time() - cpu
    assert response is not None
    size = len(response.body())
    started = time.perf_counter()
    page.page.locator("tr.node a.cp-link").last.click()
    chat = page.page.locator(".channel[data-channel='messages']")
    expect(chat.locator(".msg")).to_have_count(500)  # the last 500 of 1,000
    expect(chat.locator(".msg .text").last).to_have_text("turn 999")
    expect(chat.locator(".more")).to_contain_text("the first 500 messages are not shown")
    state_took = time.perf_counter() - started
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    line = (
        f"tether ui: the tree of a 1,000-checkpoint thread (SQLite, 1,000 messages) opened "
        f"in {took:.2f} s ({took_cpu:.2f} s CPU in the server's process, {size:,} bytes of "
        f"HTML); its latest state in {state_took:.2f} s; load average {load:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    with capsys.disabled():
        print("\n" + line)


def test_the_docs_screenshot(
    store: Path, serve: Serve, page: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The picture in docs/cli.md and the README: chat-1's fork tree.

    Written to test-artifacts/ui/; ``TETHER_UPDATE_DOCS_SCREENSHOT=1`` also
    replaces docs/ui.png.
    """
    page.page.set_viewport_size({"width": 1280, "height": 560})
    monkeypatch.chdir(store.parent)
    store.rename(store.with_name("chat.db"))
    page.page.goto(serve("chat.db") + "/thread?t=chat-1")
    expect(page.page.locator(".badge.forked")).to_be_visible()
    root = Path(__file__).resolve().parents[2]
    out = root / "test-artifacts" / "ui" / "docs-ui.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    page.page.screenshot(path=str(out))
    if os.environ.get("TETHER_UPDATE_DOCS_SCREENSHOT") == "1":
        (root / "docs" / "ui.png").write_bytes(out.read_bytes())

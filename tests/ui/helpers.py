"""What the ``tether ui`` tests share: the stores they view, the browser, a watched page."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

import tether.langgraph as tlg
from tether.checkpoint import empty_checkpoint

from ..cli.graphs import Order, build, config, order_graph, run_scenario

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
CHROMIUM = os.environ.get("TETHER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: A stored message that would run script if the viewer did not escape it.
XSS_TEXT = "<script>window.__xss = 1; alert('xss')</script><img src=x onerror=\"alert('img')\">"
XSS_THREAD = "<b>bold</b> & <i>thread</i>"


def build_store(path: Path) -> None:
    """The CLI tests' scenario (chat, subgraph interrupt, Send fan-out, fork, second
    thread), a thread whose message and id hold HTML, and one holding a user type."""
    with tlg.SqliteSaver.from_conn_string(str(path)) as saver:
        run_scenario(saver)
        build(saver).invoke(
            {"messages": [HumanMessage(content=XSS_TEXT, id="x1")], "parts": []},
            config(XSS_THREAD),
        )
    with tlg.SqliteSaver.from_conn_string(
        str(path), allowlist=[(Order.__module__, "Order")]
    ) as saver:
        order_graph(saver).invoke({"order": Order("tea", 1)}, config("orders"))


def long_thread(saver: Any, n: int) -> None:
    """A chat of ``n`` turns in thread ``long``, one checkpoint per turn, put as a graph's
    loop puts them (the whole message list is a new version every step)."""
    conf: dict[str, Any] = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    messages: list[Any] = []
    version = None
    for step in range(n):
        kind = HumanMessage if step % 2 == 0 else AIMessage
        messages = [*messages, kind(content=f"turn {step}", id=f"m{step}")]
        version = saver.get_next_version(version, None)
        checkpoint = {
            **empty_checkpoint(),
            "channel_values": {"messages": messages},
            "channel_versions": {"messages": version},
            "updated_channels": ["messages"],
        }
        conf = saver.put(conf, checkpoint, {"source": "loop", "step": step}, {"messages": version})


class Watched:
    """A page, with the dialogs it opened and the errors its scripts threw."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda err: self.errors.append(str(err)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

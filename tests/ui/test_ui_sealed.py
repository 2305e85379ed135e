"""`tether ui` on an encrypted store (#17): without its key, pages with placeholders.

Served through Starlette's test client (no browser needed: the pages are
plain HTML). Opened without the key, the threads list, a thread's tree, a
checkpoint and a diff still answer 200, each value a placeholder and the
metadata its clear keys; opened with the key, the values are shown.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tether.backends.sqlite import SqliteSaver
from tether.cli._stores import opened
from tether.ui import Viewer, create_app

from ..encryption.helpers import K1, fill, ring


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _pages(path: Path, cid: str) -> dict[str, str]:
    out = {}
    with opened(str(path), read_only=True) as st:
        app = create_app(Viewer(st, allow_edit=False))
        with TestClient(app, base_url="http://127.0.0.1:8700") as client:
            for name, url in (
                ("threads", "/"),
                ("thread", "/thread?t=t"),
                ("checkpoint", f"/checkpoint?t=t&c={cid}"),
                ("diff", f"/diff?t=t&b={cid}"),
            ):
                answer = client.get(url)
                assert answer.status_code == 200, (name, _text(answer.text)[:300])
                out[name] = _text(answer.text)
    return out


def test_an_encrypted_store_without_its_key_shows_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sealed.db"
    with SqliteSaver(str(path), encryption=ring("k1")) as saver:
        configs = fill(saver, "t", 3)
    cid = configs[-1]["configurable"]["checkpoint_id"]
    monkeypatch.delenv("TETHER_KEYS", raising=False)
    pages = _pages(path, cid)
    assert "3 checkpoint(s)" in pages["thread"]
    assert "not read" in pages["checkpoint"]
    assert "secret status" not in " ".join(pages.values())
    assert "__tether_sealed__" not in " ".join(pages.values())
    assert "step 2" in pages["diff"]  # clear metadata keys are shown
    monkeypatch.setenv("TETHER_KEYS", "k1:" + base64.b64encode(K1).decode())
    pages = _pages(path, cid)
    assert "secret status 2 of t" in pages["checkpoint"]
    assert "not read" not in pages["checkpoint"]

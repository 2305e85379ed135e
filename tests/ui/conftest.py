"""Fixtures for the ``tether ui`` tests: stores real graphs left, the viewer served, Chromium.

The viewer is served exactly as ``tether ui`` serves it (the store opened by
``_stores.opened``, :func:`tether.ui.create_app`, uvicorn) on a free loopback
port, in a thread of the test process. The browser is Debian's Chromium
driven by Playwright (``executable_path``; ``playwright install`` is never
run). When Chromium is missing or does not start, the browser tests skip --
or fail when ``TETHER_REQUIRE_CHROMIUM=1`` (CI sets it once it installed the
package). Each browser test leaves a full-page screenshot in
``test-artifacts/ui/`` (gitignored).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import tether.langgraph as tlg
from tether.cli._stores import opened
from tether.ui import Served, Viewer, create_app

from .helpers import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, Watched, build_store, run_scenario


def _no_browser(reason: str) -> None:
    if os.environ.get("TETHER_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"{reason} (TETHER_REQUIRE_CHROMIUM=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ui-template") / "tether.db"
    build_store(path)
    return path


@pytest.fixture
def store(template_store: Path, tmp_path: Path) -> Path:
    """A copy of the scenario store of this test alone (edits change it)."""
    path = tmp_path / "tether.db"
    for suffix in ("", "-wal", "-shm"):
        source = template_store.with_name(template_store.name + suffix)
        if source.exists():
            shutil.copyfile(source, path.with_name(path.name + suffix))
    return path


Serve = Callable[..., str]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(store, allow_edit=False, allow=())`` -> the URL of the viewer of ``store``."""
    with ExitStack() as stack:

        def start(
            name: str | Path, *, allow_edit: bool = False, allow: tuple[tuple[str, str], ...] = ()
        ) -> str:
            st = stack.enter_context(opened(str(name), allowlist=allow, read_only=not allow_edit))
            app = create_app(Viewer(st, allow_edit=allow_edit))
            return stack.enter_context(Served(app)).rstrip("/")

        yield start


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:
        _no_browser(f"playwright is not installed: {exc}")
    if not Path(CHROMIUM).exists():
        _no_browser(f"no Chromium at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as pw:
        try:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Error as exc:
            _no_browser(f"Chromium at {CHROMIUM} does not start: {exc}")
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Watched]:
    """A fresh browser context and page; a full-page screenshot of it when the test ends."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watched = Watched(context.new_page())
    try:
        yield watched
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
        if watched.page.url.startswith("http"):
            watched.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        context.close()


# --- Postgres ---------------------------------------------------------------------------

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def pg_store() -> Iterator[str]:
    """A tether store (the scenario) in a fresh schema of the test server, as a CLI URL."""
    import psycopg

    dsn = os.environ.get("TETHER_TEST_PG_DSN", DEFAULT_DSN)
    try:
        admin = psycopg.connect(dsn, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        msg = f"Postgres at {dsn!r} is not reachable: {exc}"
        if os.environ.get("TETHER_REQUIRE_PG") == "1":
            pytest.fail(msg + " (TETHER_REQUIRE_PG=1)", pytrace=False)
        pytest.skip(msg)
    schema = f"ui_{uuid.uuid4().hex[:12]}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    try:
        with tlg.PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            run_scenario(saver)
        yield url
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()

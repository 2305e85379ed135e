"""``tether ui STORE``: a local web viewer of a tether store (needs the ``ui`` extra).

A Starlette app served by uvicorn on 127.0.0.1: the threads, each thread's
checkpoints as a fork tree, the state at a checkpoint, the changes between
two, and with ``--allow-edit`` forks with edited values, copies and deletes.
The store is opened as the ``tether`` CLI opens it (read-only unless edits
are allowed). docs/cli.md describes the command; ``_app.py`` the routes and
the security measures.
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(f"tether ui needs the ui extra: pip install 'tether[ui]' ({exc})") from exc

from tether.ui._app import create_app
from tether.ui._reader import Viewer
from tether.ui._server import Served, is_loopback, serve

__all__ = ["Served", "Viewer", "create_app", "is_loopback", "serve"]

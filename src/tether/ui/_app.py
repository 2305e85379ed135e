"""The viewer's Starlette app: routes, templates, CSRF and security headers.

Pages (GET, every mode):

* ``/``: the threads, most recently updated first (``?q=`` filters by id,
  ``?page=`` pages);
* ``/thread?t=THREAD[&ns=NS][&before=ID]``: a thread's checkpoints as a fork
  tree, with a form to diff any two;
* ``/checkpoint?t=THREAD&c=ID[&ns=NS]``: one checkpoint's values, pending
  writes and metadata (the latest without ``c``);
* ``/diff?t=THREAD&b=ID[&a=ID][&ns=NS]``: what changed from ``a`` (default:
  ``b``'s parent) to ``b``.

Thread ids and namespaces are query parameters, not path segments: they are
arbitrary text (slashes included). With ``allow_edit`` the app also has
``GET /fork`` (the edit form) and ``POST /fork``, ``/copy``, ``/delete``;
without it those routes do not exist. Each POST checks a CSRF token
(:mod:`tether.ui._csrf`; a missing or wrong one is a 403) and, until the
form carries ``confirm=yes``, only answers with a page asking to confirm.

Every stored string reaches the page through Jinja2's autoescape (nothing
is marked safe), and the Content-Security-Policy allows no inline script, so
a stored ``<script>`` is text twice over. The Host header must name the
address served (TrustedHostMiddleware), which stops DNS rebinding from
turning another site into a same-origin reader of the viewer.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether import history
from tether.cli._common import ns_label, when
from tether.errors import CheckpointNotFound, ConfigError, DecodeError, TetherError, describe
from tether.ui._csrf import CsrfSigner
from tether.ui._reader import Viewer
from tether.ui._values import as_plain_json, to_node

__all__ = ["create_app"]

_HERE = Path(__file__).parent
#: A form body larger than this is refused (a fork's edited values included).
MAX_FORM_BYTES = 4 * 1024 * 1024
_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


class _SecurityHeaders:
    """Adds :data:`_HEADERS` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def href(path: str, **params: Any) -> str:
    """``path?query`` with ``params`` (``None`` left out) URL-encoded."""
    query = {k: v for k, v in params.items() if v is not None}
    return f"{path}?{urllib.parse.urlencode(query)}" if query else path


def _templates(signer: CsrfSigner, viewer: Viewer) -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every template is HTML: escape everything not marked safe
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        href=href,
        when=when,
        ns_label=ns_label,
        to_node=to_node,
        is_internal=history.is_internal,
        preview=history.preview,
        error_text=history.error_text,
        csrf=signer.token,
        store_name=viewer.name,
        allow_edit=viewer.allow_edit,
    )
    return Jinja2Templates(env=env)


def _param(request: Request, name: str, *, required: bool = True) -> str | None:
    value = request.query_params.get(name)
    if value is None and required:
        raise ConfigError(f"the page needs the query parameter {name!r}")
    return value


async def _form(request: Request) -> dict[str, str]:
    """The fields of an ``application/x-www-form-urlencoded`` POST (the last of a repeated name).

    Parsed with the standard library rather than python-multipart: the
    viewer's forms send no files, and this is the only format they use.
    """
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise HTTPException(415, "forms are posted as application/x-www-form-urlencoded")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, f"the form is larger than {MAX_FORM_BYTES:,} bytes")
    pairs = urllib.parse.parse_qsl(
        body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=10_000
    )
    return dict(pairs)


def create_app(
    viewer: Viewer,
    *,
    allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost", "[::1]", "::1"),
) -> Starlette:
    """The viewer of ``viewer``'s store as an ASGI app (edit routes only with ``allow_edit``).

    Args:
        allowed_hosts: the Host headers answered (``["*"]``: any; the CLI
            passes it for a non-loopback ``--host``).
    """
    signer = CsrfSigner()
    templates = _templates(signer, viewer)

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def threads(request: Request) -> Response:
        query = request.query_params.get("q", "")
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        rows, total, pages = viewer.threads(query, number)
        number = min(max(number, 1), pages)
        return page(
            request, "threads.html", rows=rows, total=total, pages=pages, page_no=number, q=query
        )

    def thread(request: Request) -> Response:
        tid = _param(request, "t")
        assert tid is not None
        ns = request.query_params.get("ns", "")
        info = viewer.thread(tid)
        rows, older = viewer.tree(tid, ns, request.query_params.get("before"))
        return page(
            request,
            "thread.html",
            info=info,
            ns=ns,
            namespaces=viewer.namespaces(tid),
            rows=rows,
            older=older,
            before=request.query_params.get("before"),
        )

    def checkpoint(request: Request) -> Response:
        tid = _param(request, "t")
        assert tid is not None
        ns = request.query_params.get("ns", "")
        point = viewer.point(tid, ns, request.query_params.get("c") or None)
        values = point.tup.checkpoint.get("channel_values") or {}
        return page(
            request,
            "checkpoint.html",
            thread_id=tid,
            point=point,
            values=values,
            versions=point.tup.checkpoint.get("channel_versions") or {},
            user=[c for c in sorted(values) if not history.is_internal(c)],
            internal=[c for c in sorted(values) if history.is_internal(c)],
        )

    def diff(request: Request) -> Response:
        tid = _param(request, "t")
        b = _param(request, "b")
        assert tid is not None
        assert b is not None
        ns = request.query_params.get("ns", "")
        old, new, changes = viewer.diff(tid, ns, request.query_params.get("a") or None, b)
        return page(request, "diff.html", thread_id=tid, ns=ns, old=old, new=new, changes=changes)

    # --- edits ---------------------------------------------------------------------------

    def fork_form(request: Request) -> Response:
        tid, cid = _param(request, "t"), _param(request, "c")
        assert tid is not None
        assert cid is not None
        point = viewer.point(tid, "", cid)
        editable = viewer.editable(point)
        values = point.tup.checkpoint.get("channel_values") or {}
        return page(
            request,
            "fork.html",
            thread_id=tid,
            point=point,
            editable={ch: as_plain_json(v) for ch, v in editable.items()},
            fixed=[c for c in sorted(values) if c not in editable and not history.is_internal(c)],
        )

    async def checked(request: Request) -> dict[str, str]:
        fields = await _form(request)
        spend = fields.get("confirm") == "yes"
        if not signer.check(request.url.path, fields.get("csrf"), once=spend):
            raise HTTPException(
                403,
                "the form's CSRF token is missing, wrong, expired or already used: reload the page",
            )
        return fields

    def confirm(
        request: Request, title: str, message: str, fields: Mapping[str, str], **extra: Any
    ) -> Response:
        hidden = [(k, v) for k, v in fields.items() if k not in ("csrf", "confirm")]
        return page(
            request,
            "confirm.html",
            title=title,
            message=message,
            action=request.url.path,
            hidden=hidden,
            changes=extra.pop("changes", None),
            cancel=extra.pop("cancel", "/"),
            button=extra.pop("button", title),
        )

    async def fork(request: Request) -> Response:
        fields = await checked(request)
        tid, cid = fields.get("t", ""), fields.get("c", "")
        given = {k[2:]: v for k, v in fields.items() if k.startswith("v:")}
        if fields.get("confirm") != "yes":
            changes = await run_in_threadpool(viewer.fork_changes, tid, cid, given)
            if not changes:
                raise ConfigError("no value was changed: edit at least one channel to fork")
            return confirm(
                request,
                "Create the fork",
                f"A new checkpoint of thread {tid!r}, child of {cid}, with these changes:",
                fields,
                changes=changes,
                cancel=href("/fork", t=tid, c=cid),
            )
        new = await run_in_threadpool(viewer.fork, tid, cid, given)
        return RedirectResponse(href("/checkpoint", t=tid, c=new), status_code=303)

    async def copy(request: Request) -> Response:
        fields = await checked(request)
        src, dst = fields.get("t", ""), fields.get("target", "").strip()
        if fields.get("confirm") != "yes":
            info = await run_in_threadpool(viewer.thread, src)
            if not dst:
                raise ConfigError("name the thread to copy to")
            await run_in_threadpool(viewer.check_copy_target, dst)
            return confirm(
                request,
                "Copy the thread",
                f"Copy thread {src!r} ({info.checkpoints} checkpoint(s), every namespace, "
                f"same checkpoint ids) to the new thread {dst!r}?",
                fields,
                cancel=href("/thread", t=src),
            )
        await run_in_threadpool(viewer.copy_thread, src, dst)
        return RedirectResponse(href("/thread", t=dst), status_code=303)

    async def delete(request: Request) -> Response:
        fields = await checked(request)
        tid = fields.get("t", "")
        if fields.get("confirm") != "yes":
            info = await run_in_threadpool(viewer.thread, tid)
            return confirm(
                request,
                "Delete the thread",
                f"Delete thread {tid!r}: {info.checkpoints} checkpoint(s) in "
                f"{info.namespaces} namespace(s), with their values and writes? "
                "This cannot be undone.",
                fields,
                cancel=href("/thread", t=tid),
            )
        await run_in_threadpool(viewer.delete_thread, tid)
        return RedirectResponse("/", status_code=303)

    # --- errors ------------------------------------------------------------------------------

    def error_page(request: Request, status: int, message: str) -> Response:
        return page(request, "error.html", status_code=status, status=status, message=message)

    async def on_tether_error(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, CheckpointNotFound) else 400
        if isinstance(exc, DecodeError):
            status = 422  # a value this viewer may not build: its message says how to allow it
        elif not isinstance(exc, ConfigError):
            status = 503  # the store failed (unreachable, damaged): not the request
        return error_page(request, status, describe(exc))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error_page(request, exc.status_code, str(exc.detail))

    async def on_bug(request: Request, exc: Exception) -> Response:
        text = " ".join(str(exc).split())[:500]
        return error_page(
            request,
            500,
            f"unexpected {type(exc).__name__}: {text} (a bug in tether: please report it)",
        )

    routes: list[Route | Mount] = [
        Route("/", threads),
        Route("/thread", thread),
        Route("/checkpoint", checkpoint),
        Route("/diff", diff),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    if viewer.allow_edit:
        routes += [
            Route("/fork", fork_form, methods=["GET"]),
            Route("/fork", fork, methods=["POST"]),
            Route("/copy", copy, methods=["POST"]),
            Route("/delete", delete, methods=["POST"]),
        ]
    handlers: dict[Any, Callable[..., Any]] = {
        TetherError: on_tether_error,
        HTTPException: on_http_error,
        Exception: on_bug,
    }
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
            Middleware(_SecurityHeaders),
        ],
        exception_handlers=handlers,
    )

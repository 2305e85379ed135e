"""Store names: the one grammar for naming a tether store by a string.

The CLI, the importer and exporter, and the savers' ``from_conn_string``
all read a store name here, so a name printed by one is accepted by all:

* a file path, ``sqlite:///relative.db`` or ``sqlite:////absolute/path.db``
  (SQLAlchemy's spelling) -- a SQLite store;
* ``postgresql://user@host:port/db`` (or ``postgres://``), with an optional
  ``?schema=NAME`` naming the Postgres schema of the tables (default
  ``public``); every other query parameter is libpq's.

Passwords are never shown: ``str(StoreURL)`` and :func:`redact_url` hide them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from tether.errors import ConfigError

__all__ = ["SCHEMA_PARAM", "StoreURL", "parse_store_url", "redact_url", "sqlite_path"]

#: The query parameter of a Postgres URL that names tether's schema (not libpq's).
SCHEMA_PARAM = "schema"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def redact_url(url: str) -> str:
    """A libpq URL without its password, for messages."""
    try:
        parts = urlsplit(url)
        password, port = parts.password, parts.port
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    if password:
        host = parts.hostname or ""
        user = parts.username or ""
        netloc = f"{user}:***@{host}" + (f":{port}" if port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


@dataclass(frozen=True, slots=True)
class StoreURL:
    """Where a store lives, as named on the command line or in ``from_conn_string``.

    ``kind`` is ``"sqlite"`` (``location`` is a file path) or ``"postgres"``
    (``location`` is a libpq URL without tether's ``schema`` parameter).
    """

    kind: Literal["sqlite", "postgres"]
    location: str
    schema: str = "public"
    original: str = ""

    def __str__(self) -> str:
        # Messages and summaries show the name without its password.
        text = self.original or self.location
        return redact_url(text) if self.kind == "postgres" else text


def _postgres(text: str) -> StoreURL:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 -- parsed lazily; a bad port raises here, not later
    except ValueError as exc:
        raise ConfigError(
            f"{redact_url(text)} is not a valid Postgres URL ({exc}); write it as "
            "postgresql://user@host:port/database (an IPv6 host in brackets: [::1])"
        ) from None
    schema = "public"
    kept = []
    # Only tether's ?schema= is taken out; the rest of the text goes to libpq as
    # written. Rebuilding it with urlunsplit would turn an empty host
    # (postgresql:///db?host=/run/postgresql) into postgresql:/db, which libpq
    # does not read as a URL (issue #20.1a).
    for item in parts.query.split("&") if parts.query else ():
        pairs = parse_qsl(item, keep_blank_values=True)
        if pairs and pairs[0][0] == SCHEMA_PARAM:
            schema = pairs[0][1]
        else:
            kept.append(item)
    if not schema:
        raise ConfigError(f"{redact_url(text)}: ?schema= needs a Postgres schema name")
    location = text
    if parts.query:
        head = text[: text.index("?")]
        tail = text[text.index("?") + 1 + len(parts.query) :]  # a #fragment, if any
        location = head + ("?" + "&".join(kept) if kept else "") + tail
    return StoreURL("postgres", location, schema, text)


def sqlite_path(text: str) -> str | None:
    """The file path of a ``sqlite:`` URL, or ``None`` when ``text`` is not one.

    Raises:
        ConfigError: ``sqlite://path`` (two slashes) or no path at all.
    """
    if not text.lower().startswith("sqlite:"):
        return None
    path = text[len("sqlite:") :]
    # sqlite:///rel.db and sqlite:////abs.db as SQLAlchemy writes them; sqlite:rel.db too.
    if path.startswith("///"):
        path = path[3:]
    elif path.startswith("//"):
        raise ConfigError(
            f"{text}: use sqlite:///relative.db or sqlite:////absolute/path.db "
            "(three slashes, then the path)"
        )
    if not path:
        raise ConfigError(f"{text}: no database file after sqlite:")
    return path


def parse_store_url(url: str) -> StoreURL:
    """Read a store name: a file path, ``sqlite:///path``, or ``postgresql://...``.

    A Postgres URL may carry ``?schema=name`` (the Postgres schema holding the
    tables; default ``public``); the other query parameters go to libpq.

    Raises:
        ConfigError: an empty name, an unknown scheme, a malformed URL, or
            ``sqlite://`` with no path.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("a store name is empty; give a file path or a postgresql:// URL")
    text = url.strip()
    if text.lower().startswith(("postgresql://", "postgres://")):
        return _postgres(text)
    path = sqlite_path(text)
    if path is not None:
        return StoreURL("sqlite", path, original=text)
    scheme = _SCHEME.match(text)
    if scheme and not Path(text).exists():
        raise ConfigError(
            f"{text}: unknown store scheme {scheme.group(1)!r}; use a file path, sqlite:///path "
            "or postgresql://user@host/db"
        )
    return StoreURL("sqlite", text, original=text)

"""Store names of a Postgres saver: the URL it was given, or one made from a connection.

``from_conn_string`` reads the URL forms the CLI prints (``postgresql://...``
with an optional ``?schema=NAME``, :func:`tether.stores.parse_store_url`), and
a saver built from a psycopg connection or pool can still name its store, for
messages and for ``tether import``: :func:`source_params` reads the
connection parameters and :func:`store_url` writes them back as a URL.
I/O-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from psycopg import AsyncConnection, Connection, pq
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tether.errors import ConfigError
from tether.stores import SCHEMA_PARAM, parse_store_url, redact_url

__all__ = ["read_conn_string", "source_params", "store_url", "with_schema"]

_URL_PREFIXES = ("postgresql://", "postgres://")
# Parameters a URL names in its user/host/port/path parts rather than its query.
_PARTS = ("user", "password", "host", "port", "dbname")


def read_conn_string(conn_string: str, schema: str | None) -> tuple[str, str]:
    """The libpq conninfo and the schema named by ``from_conn_string``'s arguments.

    A URL may carry ``?schema=NAME`` (as the CLI prints store names); a
    ``schema=`` argument that names another schema is a
    :class:`~tether.errors.ConfigError`. A key=value DSN goes to libpq as it is.
    """
    if not conn_string.lower().startswith(_URL_PREFIXES):
        return conn_string, schema or "public"
    url = parse_store_url(conn_string)  # ConfigError for a malformed URL
    named = any(key == SCHEMA_PARAM for key, _ in parse_qsl(urlsplit(conn_string).query))
    if named and schema is not None and schema != url.schema:
        raise ConfigError(
            f"{redact_url(conn_string)} names schema {url.schema!r} and the schema argument "
            f"names {schema!r}; give the schema once (in the URL or as schema=)"
        )
    return url.location, url.schema if named else (schema or "public")


def source_params(source: Any) -> dict[str, str]:
    """The libpq parameters a psycopg connection or pool connects with (password included)."""
    if isinstance(source, Connection | AsyncConnection):
        params = {k: str(v) for k, v in source.info.get_parameters().items()}
        if source.info.password:
            params["password"] = source.info.password
        port = source.info.port
        if port and port != 5432:
            params["port"] = str(port)
        return params
    if isinstance(source, ConnectionPool | AsyncConnectionPool):
        kwargs = source.kwargs if isinstance(source.kwargs, dict) else {}
        conninfo = source.conninfo if isinstance(source.conninfo, str) else ""
        known = {d.keyword.decode() for d in pq.Conninfo.get_defaults()}
        extra = {k: v for k, v in kwargs.items() if k in known and v is not None}
        return {k: str(v) for k, v in conninfo_to_dict(conninfo, **extra).items() if k in known}
    return {}


def _defaults() -> dict[str, str]:
    return {
        d.keyword.decode(): d.compiled.decode()
        for d in pq.Conninfo.get_defaults()
        if d.compiled is not None
    }


def store_url(params: Mapping[str, str], schema: str, *, password: bool) -> str:
    """A ``postgresql://`` URL with ``?schema=`` for these libpq parameters.

    ``password=False`` leaves the password out (messages show ``***``).
    """
    defaults = _defaults()
    user = params.get("user", "")
    secret = params.get("password", "")
    host = params.get("host", "")
    rest = {
        k: v
        for k, v in params.items()
        if k not in _PARTS and defaults.get(k) != v and not (k == "hostaddr" and v == host)
    }
    userinfo = quote(user, safe="")
    if secret:
        userinfo += ":" + (quote(secret, safe="") if password else "***")
    # A socket directory or a host list goes in the query, where libpq reads it as it is.
    if "/" in host or "," in host:
        rest = {"host": host, **rest}
        host = ""
    netloc = (userinfo + "@" if userinfo else "") + quote(host, safe=":[]")
    if params.get("port"):
        netloc += ":" + params["port"]
    query = urlencode({**rest, SCHEMA_PARAM: schema})
    return f"postgresql://{netloc}/{quote(params.get('dbname', ''), safe='')}?{query}"


def with_schema(location: str, schema: str, *, password: bool) -> str:
    """The store name of a libpq URL or DSN (``location``) and a schema, as the CLI reads it."""
    if location.lower().startswith(_URL_PREFIXES):
        sep = "&" if urlsplit(location).query else "?"
        text = location.rstrip("?") if password else redact_url(location).rstrip("?")
        return text + sep + urlencode({SCHEMA_PARAM: schema})
    params = {k: str(v) for k, v in conninfo_to_dict(location).items()}
    return store_url(params, schema, password=password)

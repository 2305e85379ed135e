"""Store names (tether.stores): one grammar for the CLI, the importer and from_conn_string."""

from __future__ import annotations

import pytest

from tether.errors import ConfigError
from tether.stores import parse_store_url, redact_url, sqlite_path


@pytest.mark.parametrize(
    "bad",
    ["postgresql://[::1", "postgresql://u:pw@[::1/db", "postgresql://h:notaport/db"],
)
def test_a_malformed_postgres_url_is_a_config_error_without_the_password(bad: str) -> None:
    with pytest.raises(ConfigError, match="not a valid Postgres URL") as info:
        parse_store_url(bad)
    assert "pw" not in str(info.value)


def test_sqlite_urls_read_as_sqlalchemy_writes_them() -> None:
    assert sqlite_path("sqlite:///rel.db") == "rel.db"
    assert sqlite_path("sqlite:////abs/x.db") == "/abs/x.db"
    assert sqlite_path("/abs/x.db") is None
    with pytest.raises(ConfigError, match="three slashes"):
        sqlite_path("sqlite://x.db")


def test_redact_url_hides_the_password_and_survives_garbage() -> None:
    assert redact_url("postgresql://u:secret@h:5/db") == "postgresql://u:***@h:5/db"
    assert "secret" not in redact_url("postgresql://u:secret@[::1/db")


def test_a_postgres_url_reaches_libpq_as_written_less_its_schema() -> None:
    # An empty host (the socket or host in the query) keeps its three slashes (#20.1a).
    empty_host = "postgresql:///test?host=127.0.0.1&user=postgres"
    assert parse_store_url(empty_host).location == empty_host
    url = parse_store_url("postgresql:///db?host=%2Frun%2Fpg&schema=s&sslmode=require")
    assert (url.location, url.schema) == ("postgresql:///db?host=%2Frun%2Fpg&sslmode=require", "s")
    assert parse_store_url("postgresql://u@h/db?schema=s").location == "postgresql://u@h/db"

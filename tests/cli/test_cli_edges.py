"""Edge cases of the ``tether`` command (issue #20): store names, unreachable servers.

Each failure is checked as a user sees it: exit code 1 and one line
``Error: ...`` on stderr, never a traceback; and what the command must not
do (create a file, migrate a schema) is checked on the real file or server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from click.testing import CliRunner, Result
from psycopg.conninfo import conninfo_to_dict

from tether.backends.postgres import PostgresSaver
from tether.checkpoint import empty_checkpoint, make_config
from tether.cli._app import cli


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def error(result: Result) -> str:
    """The one line ``Error: ...`` of a failed command (asserted to be one line)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    return lines[0]


# --- store names (#20.1a) -------------------------------------------------------------


def test_a_malformed_postgres_url_is_one_error_line() -> None:
    message = error(run("threads", "postgresql://[::1"))
    assert "not a valid Postgres URL" in message
    assert "[::1]" in message  # how to write an IPv6 host


def _empty_host_url(dsn: str, schema: str) -> str:
    """``postgresql:///db?host=H&port=P&user=U``: the host in the query, none before the path."""
    params = conninfo_to_dict(dsn)
    query = {
        "host": params.get("host", "127.0.0.1"),
        "port": params.get("port", "5432"),
        "user": params.get("user", "postgres"),
    }
    if params.get("password"):
        query["password"] = params["password"]
    text = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in query.items())
    return f"postgresql:///{params['dbname']}?{text}&schema={schema}"


@pytest.mark.postgres
def test_a_url_with_an_empty_host_is_kept_as_libpq_reads_it(pg_database: str) -> None:
    url = _empty_host_url(pg_database, "edge")
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        saver.put(make_config("t-1"), empty_checkpoint(), {"source": "input", "step": -1}, {})
        assert saver.get_tuple(make_config("t-1")) is not None
    result = run("threads", url, "--json")
    assert result.exit_code == 0, result.output
    assert '"thread_id": "t-1"' in result.stdout
    assert run("copy", url, "t-1", "t-2").exit_code == 0
    assert run("delete", url, "t-2", "--yes").exit_code == 0


# --- an unreachable server (#20.1c) ---------------------------------------------------------

UNREACHABLE = "postgresql://postgres:secret@127.0.0.1:1/test"


def _unreachable(message: str) -> None:
    assert "cannot connect to Postgres at host 127.0.0.1 port 1, database test" in message
    assert message.endswith("check the URL and that the server is running")
    assert "postgresql://postgres:***@127.0.0.1:1/test" in message
    assert "secret" not in message
    assert "retry" not in message


def _tether_store(path: Path) -> str:
    from tether.backends.sqlite import SqliteSaver

    with SqliteSaver(str(path)) as saver:
        saver.put(make_config("t-1"), empty_checkpoint(), {"source": "input", "step": -1}, {})
    return str(path)


def test_import_from_an_unreachable_server_creates_no_target(tmp_path: Path) -> None:
    target = tmp_path / "x.db"
    _unreachable(error(run("import", UNREACHABLE, str(target))))
    assert not target.exists()
    # the same for a source that is not there at all, or not an official store
    assert "no SQLite file" in error(run("import", str(tmp_path / "missing.db"), str(target)))
    tether = _tether_store(tmp_path / "s.db")
    assert "is a tether store" in error(run("import", tether, str(target)))
    assert not target.exists()


def test_import_into_an_unreachable_server(official_sqlite: tuple[Path, object]) -> None:
    source, _ = official_sqlite
    _unreachable(error(run("import", str(source), UNREACHABLE, "--no-progress")))


def test_export_to_an_unreachable_server(tmp_path: Path) -> None:
    store = _tether_store(tmp_path / "s.db")
    _unreachable(error(run("export", store, "--to-langgraph", UNREACHABLE)))


# --- ids past the length limit (#20.3) ---------------------------------------------------


def _official_store(path: Path, thread_id: str, metadata: dict[str, Any]) -> str:
    from langgraph.checkpoint.base import empty_checkpoint as official_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

    with OfficialSqliteSaver.from_conn_string(str(path)) as saver:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        saver.put(config, official_checkpoint(), metadata, {})
    return str(path)


def test_import_refuses_an_over_long_thread_id_or_run_id_in_one_short_line(
    tmp_path: Path,
) -> None:
    long_id = "t" * 3000
    source = _official_store(tmp_path / "long-thread.db", long_id, {"step": -1})
    target = tmp_path / "x.db"
    message = error(run("import", source, str(target), "--no-progress"))
    assert "3,000 bytes long" in message
    assert "at most 512 bytes" in message
    assert long_id not in message
    assert len(message) < 500
    assert not target.exists() or not _threads(target)  # nothing imported
    long_run = "r" * 2800
    source = _official_store(tmp_path / "long-run.db", "t-1", {"step": -1, "run_id": long_run})
    message = error(run("import", source, str(target), "--no-progress"))
    assert "run_id" in message
    assert "2,800 bytes long" in message
    assert long_run not in message
    assert len(message) < 500


def _threads(path: Path) -> list[Any]:
    result = run("threads", str(path), "--json")
    assert result.exit_code == 0, result.output
    return list(json.loads(result.stdout))

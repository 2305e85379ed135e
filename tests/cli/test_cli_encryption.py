"""Encryption with real LangGraph graphs (#17): the drop-ins sealing every value, and
``tether import``/``export`` of values LangGraph's ``EncryptedSerializer`` wrote.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.sqlite import SqliteSaver as OfficialSqliteSaver

import tether.langgraph as tlg
from tether.backends.sqlite import SqliteSaver
from tether.cli._app import cli
from tether.encryption import Encryption
from tether.errors import DecodeError
from tether.exporter import export_store
from tether.importer import import_store
from tether.langgraph import langgraph_serializer

from .graphs import as_url, histories, run_scenario

AES_KEY = b"0123456789abcdef0123456789abcdef"  # LangGraph's LANGGRAPH_AES_KEY is text


def _sealed_rows(path: Path) -> tuple[int, int]:
    """(sealed, all) value and write rows of a tether SQLite store."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT encoding FROM tether_blobs UNION ALL SELECT encoding FROM tether_writes"
        ).fetchall()
    return sum(1 for (e,) in rows if e & 8), len(rows)


def test_a_real_graph_on_an_encrypted_drop_in(tmp_path: Path) -> None:
    keys = Encryption({"k1": os.urandom(32)})
    path = tmp_path / "chat.db"
    with tlg.SqliteSaver.from_conn_string(str(path), encryption=keys) as saver:
        run_scenario(saver)  # interrupts, resumes, a fork, subgraphs, Send
        before = histories(saver)
    sealed, total = _sealed_rows(path)
    assert total > 0
    assert sealed == total
    assert b"hello" not in path.read_bytes()
    # Another process with the keys reads the same histories; without them, a DecodeError.
    with tlg.SqliteSaver.from_conn_string(str(path), encryption=keys) as saver:
        assert histories(saver) == before
    with (
        tlg.SqliteSaver.from_conn_string(str(path), encryption=False) as saver,
        pytest.raises(DecodeError, match="key 'k1'"),
    ):
        histories(saver)


@pytest.mark.postgres
def test_a_real_graph_on_an_encrypted_postgres_drop_in(pg_database: str) -> None:
    keys = Encryption({"k1": os.urandom(32)})
    url = as_url(pg_database)
    with tlg.PostgresSaver.from_conn_string(url, encryption=keys) as saver:
        saver.setup()
        run_scenario(saver)
        before = histories(saver)
    with tlg.PostgresSaver.from_conn_string(url, encryption=keys) as saver:
        assert histories(saver) == before


@pytest.fixture
def official_encrypted(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """An official SqliteSaver file written through LangGraph's EncryptedSerializer."""
    path = tmp_path / "langgraph-aes.db"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY)
    with OfficialSqliteSaver.from_conn_string(str(path)) as saver:
        saver.serde = serde
        run_scenario(saver)
        before = histories(saver)
    with sqlite3.connect(path) as conn:
        types = {t for (t,) in conn.execute("SELECT type FROM checkpoints")}
    assert types == {"msgpack+aes"}
    return path, before


def test_import_of_encryptedserializer_values_given_the_key(
    official_encrypted: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, before = official_encrypted
    keys = Encryption({"k1": os.urandom(32)})
    target = tmp_path / "tether.db"
    with SqliteSaver(target, serde=langgraph_serializer(), encryption=keys) as saver:
        with pytest.raises(DecodeError, match="LANGGRAPH_AES_KEY"):
            import_store(str(source), saver)
        with pytest.raises(DecodeError, match="does not authenticate"):
            import_store(str(source), saver, langgraph_aes_key=b"x" * 32)
        import_store(str(source), saver, langgraph_aes_key=AES_KEY)
    # The import is sealed again under tether's own key, and answers as the source did.
    sealed, total = _sealed_rows(target)
    assert sealed == total
    with tlg.SqliteSaver.from_conn_string(str(target), encryption=keys) as drop_in:
        assert histories(drop_in) == before
    # The CLI takes the key from LANGGRAPH_AES_KEY, as LangGraph does.
    result = CliRunner().invoke(
        cli,
        ["import", str(source), str(tmp_path / "cli.db"), "--json"],
        env={"LANGGRAPH_AES_KEY": AES_KEY.decode(), "TETHER_KEYS": ""},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["checkpoints"] == len(before["tuples"])


def test_export_writes_values_encryptedserializer_reads(
    official_encrypted: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    source, before = official_encrypted
    tether_path = tmp_path / "tether.db"
    with SqliteSaver(tether_path, serde=langgraph_serializer()) as saver:
        import_store(str(source), saver, langgraph_aes_key=AES_KEY)
    out = tmp_path / "back.db"
    result = CliRunner().invoke(
        cli,
        ["export", str(tether_path), "--to-langgraph", str(out), "--encrypt-langgraph"],
        env={"LANGGRAPH_AES_KEY": AES_KEY.decode()},
    )
    assert result.exit_code == 0, result.output
    with sqlite3.connect(out) as conn:
        types = {t for (t,) in conn.execute("SELECT type FROM checkpoints")}
    assert types == {"msgpack+aes"}
    with OfficialSqliteSaver.from_conn_string(str(out)) as official:
        official.serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY)
        assert histories(official) == before
    # The library call takes the key directly.
    again = tmp_path / "again.db"
    with SqliteSaver(tether_path, serde=langgraph_serializer()) as saver:
        export_store(saver, str(again), langgraph_aes_key=AES_KEY)
    with OfficialSqliteSaver.from_conn_string(str(again)) as official:
        official.serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY)
        assert histories(official) == before

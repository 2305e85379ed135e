"""SqliteSaver through the contract suite: on a file, on ``:memory:``, on a caller's connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import SqliteSaver
from tether.testing import SaverContract, contract_encryption


class TestSqliteFileContract(SaverContract):
    @pytest.fixture
    def saver(self, tmp_path: Path) -> Iterator[SqliteSaver]:
        with SqliteSaver(tmp_path / "contract.db") as saver:
            yield saver


class TestSqliteMemoryContract(SaverContract):
    @pytest.fixture
    def saver(self) -> Iterator[SqliteSaver]:
        with SqliteSaver(":memory:") as saver:
            yield saver


class TestSqliteConnectionContract(SaverContract):
    @pytest.fixture
    def saver(self, tmp_path: Path) -> Iterator[SqliteSaver]:
        conn = sqlite3.connect(tmp_path / "conn.db", check_same_thread=False, isolation_level=None)
        with SqliteSaver(conn) as saver:
            yield saver
        conn.close()


class TestSqliteEncryptedContract(SaverContract):
    """On a file, every value, write and metadata sealed (#17)."""

    @pytest.fixture
    def saver(self, tmp_path: Path) -> Iterator[SqliteSaver]:
        with SqliteSaver(tmp_path / "sealed.db", encryption=contract_encryption()) as saver:
            yield saver

"""InMemorySaver: the contract suite (S5.1).

It runs once: the in-memory saver stores the records SQLite stores, through
the same record layer (backends/_records.py), with no path of its own under
tether's serializer to guard (#14).
"""

from __future__ import annotations

import pytest

from tether import InMemorySaver
from tether.testing import SaverContract, contract_encryption


class TestInMemoryContract(SaverContract):
    @pytest.fixture
    def saver(self) -> InMemorySaver:
        return InMemorySaver()


class TestInMemoryEncryptedContract(SaverContract):
    """Every value, write and metadata sealed (#17)."""

    @pytest.fixture
    def saver(self) -> InMemorySaver:
        return InMemorySaver(encryption=contract_encryption())

"""InMemorySaver: the contract suite, plus what only the in-memory layout promises (S5.1)."""

from __future__ import annotations

import pytest

from tether import InMemorySaver
from tether.testing import SaverContract


class TestInMemoryContract(SaverContract):
    @pytest.fixture
    def saver(self) -> InMemorySaver:
        return InMemorySaver()

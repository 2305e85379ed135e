"""InMemorySaver: the contract suite, plus what only the in-memory layout promises (S5.1)."""

from __future__ import annotations

import pytest

from tether import InMemorySaver
from tether.serde import MsgpackSerializer
from tether.testing import SaverContract


class TestInMemoryContract(SaverContract):
    @pytest.fixture
    def saver(self) -> InMemorySaver:
        return InMemorySaver()


class _Serialized(MsgpackSerializer):
    """tether's serializer under another class: the saver takes none of its fast paths."""


class TestInMemoryContractSerialized(SaverContract):
    """The contract again with every value, write and head through the serializer.

    Under tether's own serializer the saver keeps scalars as they are and packs
    plain heads itself (see tests/test_memory_fast.py); this keeps the general
    path under the whole contract too.
    """

    @pytest.fixture
    def saver(self) -> InMemorySaver:
        return InMemorySaver(serde=_Serialized())

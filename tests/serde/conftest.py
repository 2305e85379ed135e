import pytest

from tether.serde import MsgpackSerializer

from . import models


@pytest.fixture
def serde() -> MsgpackSerializer:
    return MsgpackSerializer(allowlist=models.ALL)

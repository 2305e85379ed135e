import pytest
import serde_models

from tether.serde import MsgpackSerializer


@pytest.fixture
def serde() -> MsgpackSerializer:
    return MsgpackSerializer(allowlist=serde_models.ALL)

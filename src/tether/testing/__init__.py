"""The saver contract suite (SPEC S5.1): what every tether backend must pass.

:class:`SaverContract` is the executable form of the contract in
:mod:`tether.base`. It is a pytest test class; a backend runs it by
subclassing it in a test module and providing one fixture, ``saver``::

    import pytest
    from tether.testing import SaverContract

    class TestMySaverContract(SaverContract):
        @pytest.fixture
        def saver(self) -> Iterator[MySaver]:
            with MySaver(...) as saver:   # fresh and empty for every test
                yield saver

What ``saver`` must be:

* a fresh, empty :class:`~tether.base.BaseCheckpointSaver` for every test
  (nothing stored, no thread shared with another test);
* usable through both its sync and its async methods within one test: every
  test runs twice, with ``mode`` ``"sync"`` and ``"async"``; async tests run
  on a function-scoped event loop (``asyncio_mode=auto``), so the fixture
  may be an ``async`` generator that closes async resources;
* using tether's default serializer (:class:`~tether.serde.MsgpackSerializer`,
  strict) or one that round-trips the same types and has the same allowlist
  behaviour (``with_allowlist``).

A backend that serves only one kind of caller (e.g. a saver built on an
async-only connection) overrides the ``mode`` fixture::

    @pytest.fixture(params=["async"])
    def mode(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

Tests call the saver through :class:`Driver` (fixture ``driver``), which
sends each call to ``saver.put`` or ``await saver.aput`` (and so on)
depending on the mode, so every test body is written once; :class:`Line`
builds checkpoints the way a graph loop does. Both are public so a backend's
own tests can use them. One test runs random programs through the saver and a
plain reference model (Hypothesis) and compares them after every operation.
Requires pytest, pytest-asyncio and hypothesis (the ``dev`` extra).
"""

from __future__ import annotations

import pytest

# The suite's asserts live in an installed module; rewrite them so a failure
# shows the compared values, as it would in a test file.
pytest.register_assert_rewrite(
    "tether.testing._contract",
    "tether.testing._driver",
    "tether.testing._history",
    "tether.testing._lifecycle",
    "tether.testing._model",
)

from tether.testing._contract import SaverContract  # noqa: E402
from tether.testing._driver import (  # noqa: E402
    MODES,
    ContractRecord,
    Driver,
    Line,
    contract_encryption,
    new_checkpoint,
)

__all__ = [
    "MODES",
    "ContractRecord",
    "Driver",
    "Line",
    "SaverContract",
    "contract_encryption",
    "new_checkpoint",
]

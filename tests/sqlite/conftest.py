from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import SqliteSaver


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tether.db"


@pytest.fixture
def saver(db_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver(db_path) as s:
        yield s

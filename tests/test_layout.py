"""Test modules are imported by basename (pytest's prepend mode): basenames must be unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_test_module_basenames_are_unique() -> None:
    root = Path(__file__).parent
    names = Counter(
        p.name
        for p in root.rglob("*.py")
        if p.name not in ("conftest.py", "__init__.py") and not (p.parent / "__init__.py").exists()
    )
    assert [n for n, k in names.items() if k > 1] == []

"""Tests are imported as the ``tests`` package (``--import-mode=importlib``), helpers too.

Every test directory is a package, so a module's name is its path
(``tests.sqlite.helpers``) and basenames may repeat across directories; a
helper imported by a bare name (``from helpers import ...``, the prepend
mode's sys.path) would not be found, or would be a second copy of the module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent


def test_tests_are_packages_imported_by_their_path() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert [str(d) for d in {f.parent for f in files} if not (d / "__init__.py").exists()] == []
    local = {f.stem for f in files} - {"__init__"}
    bare = [
        f"{f.relative_to(ROOT)}:{node.lineno}"
        for f in files
        for node in ast.walk(ast.parse(f.read_text(), str(f)))
        if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in local)
        or (isinstance(node, ast.Import) and any(a.name in local for a in node.names))
    ]
    assert bare == []

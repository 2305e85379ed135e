"""tools/gen_sync.py: sync twins generated from async sources (#14.3).

The generated modules themselves are checked by `make check-sync`; these
tests pin the rules that make sync-only code real code in the async source.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gen_sync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sync", ROOT / "tools" / "gen_sync.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _gen_sync()


def _branches(source: str) -> str:
    lines = source.splitlines(keepends=True)
    return "".join(gen._keep_sync_branches(lines, "test.py"))


def test_the_else_branch_is_kept_dedented_and_the_async_one_dropped() -> None:
    source = (
        "async def f():\n"
        "    if True:  # ASYNC\n"
        "        await g()\n"
        "\n"
        "        await h()\n"
        "    else:\n"
        "        g()\n"
        "        if x:\n"
        "            h()\n"
        "    return 1\n"
    )
    assert _branches(source) == "async def f():\n    g()\n    if x:\n        h()\n    return 1\n"


def test_an_async_block_without_else_is_dropped() -> None:
    source = "if True:  # ASYNC\n    import asyncio\nimport time\n"
    assert _branches(source) == "import time\n"


def test_nested_blocks_in_an_else_branch() -> None:
    source = (
        "if True:  # ASYNC\n"
        "    a = 1\n"
        "else:\n"
        "    if True:  # ASYNC\n"
        "        b = 2\n"
        "    else:\n"
        "        b = 3\n"
    )
    assert _branches(source) == "b = 3\n"


def test_an_async_only_line_is_dropped() -> None:
    source = '    """Async :meth:`f`."""  # ASYNC\n    """The f."""\n'
    assert _branches(source) == '    """The f."""\n'


def test_only_a_literal_if_true_with_the_comment_is_a_directive() -> None:
    source = "if True:\n    a = 1\nelse:\n    a = 2\n"
    assert _branches(source) == source


def test_elif_after_a_directive_is_refused() -> None:
    with pytest.raises(SystemExit, match="not an elif"):
        _branches("if True:  # ASYNC\n    a = 1\nelif b:\n    a = 2\n")


@pytest.mark.parametrize("marker", ["# tether: begin async-only", "# tether: sync-only: x"])
def test_the_comment_markers_are_refused(marker: str) -> None:
    with pytest.raises(SystemExit, match="if True"):
        gen.transform(f"{marker}\n", "a_async.py", "a_sync.py")


def test_every_pair_is_current() -> None:
    for src, dst in gen.PAIRS:
        text = (ROOT / src).read_text()
        assert gen.transform(text, src, dst) == (ROOT / dst).read_text(), f"{dst} is stale"

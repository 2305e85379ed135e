"""The docs keep checking the code (#14.8): a file they name exists, a module they call shared is.

docs/architecture.md is the map of the code. A map that names a file no longer
there, or calls a module "shared" that one backend alone imports, misleads
the next reader; these tests fail instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "architecture.md", ROOT / "docs" / "cli.md", ROOT / "README.md"]
#: Paths the docs name that are not files of this repository, each with why.
ELSEWHERE = {
    "_internal/_replay.py": "LangGraph's replay code",
    "unasync.py": "psycopg's generator, which tools/gen_sync.py follows",
    "summary.json": "written by `make bench` into bench/results/<run>/",
    "summary.md": "written by `make bench` into bench/results/<run>/",
    "./myapp/models.py": "an example of a user's module (docs/cli.md)",
}
_PATH = re.compile(r"`([A-Za-z0-9_./-]+\.(?:py|md|toml|json|txt|cfg|yml))`")


def _files() -> list[str]:
    skip = {".venv", ".git", "node_modules", ".mypy_cache", ".ruff_cache", "dist"}
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if path.is_file() and not skip.intersection(rel.parts):
            out.append(rel.as_posix())
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_file_the_docs_name_exists(doc: Path) -> None:
    files = _files()
    missing = []
    for name in sorted(set(_PATH.findall(doc.read_text()))):
        if name in ELSEWHERE or name.startswith("../"):
            continue
        # a name may be given from the repo root, from src/, or by its tail
        if not any(f == name or f.endswith("/" + name) for f in files):
            missing.append(name)
    assert not missing, f"{doc.name} names files that do not exist: {missing}"


def _imports(module: str) -> set[str]:
    """The backend packages/modules under src/tether/backends that import ``module``."""
    users = set()
    backends = ROOT / "src" / "tether" / "backends"
    pattern = re.compile(
        rf"(?:from|import)\s+[\w.]*\b{module}\b|from \.+ import [^\n]*\b{module}\b"
    )
    for path in backends.rglob("*.py"):
        if path.stem == module:
            continue
        if pattern.search(path.read_text()):
            rel = path.relative_to(backends)
            users.add(rel.parts[0] if len(rel.parts) > 1 else rel.stem)
    return users


@pytest.mark.parametrize("module", ["contract", "_records", "_sqlbase", "_delta", "_payload"])
def test_a_module_the_docs_call_shared_is_imported_by_more_than_one_backend(module: str) -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert module in text
    users = _imports(module) & {"memory", "sqlite", "postgres"}
    assert len(users) > 1, f"{module} is described as shared but only {users} import it"


def test_every_requirement_id_cited_is_explained_in_the_repo() -> None:
    """Code and docs cite "S2.4"; docs/requirements.md says what each number means."""
    explained = set(
        re.findall(r"\*\*(S\d\.\d+)\*\*", (ROOT / "docs" / "requirements.md").read_text())
    )
    cited: dict[str, str] = {}
    for top in ("src", "tests", "docs", "bench"):
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".md") and path.is_file():
                for rid in re.findall(r"\bS([1-7]\.\d+)\b", path.read_text(errors="replace")):
                    cited.setdefault("S" + rid, str(path.relative_to(ROOT)))
    unknown = {rid: where for rid, where in cited.items() if rid not in explained}
    assert not unknown, f"requirement ids cited but not in docs/requirements.md: {unknown}"


def test_a_module_over_700_lines_says_why_at_its_top() -> None:
    """#14: a long module either splits by concept or its docstring gives the reason."""
    import ast

    unexplained = []
    for path in (ROOT / "src" / "tether").rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 700:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Why one long module" not in doc:
                unexplained.append(str(path.relative_to(ROOT)))
    assert not unexplained, f"modules over 700 lines without a reason at the top: {unexplained}"

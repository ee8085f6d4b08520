"""Every Python snippet of the docs and the README, read from its page: it compiles, and
each name it imports exists (``yourapp`` is the reader's own app). The framework snippets
also run (test_frameworks.py), and the minimal integration (test_getting_started.py)."""

from __future__ import annotations

import ast
import importlib
import importlib.util

import pytest
from support.markdown import DOCS, code_blocks
from support.paths import ROOT

#: The reader's own modules in the snippets.
READERS_OWN = ("yourapp",)
PAGES = sorted([*DOCS.rglob("*.md"), ROOT / "README.md"])


def snippets() -> list[tuple[str, int, str]]:
    found = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        for number, block in enumerate(code_blocks(text, "python"), start=1):
            found.append((str(path.relative_to(ROOT)), number, block.text))
    return found


@pytest.mark.parametrize(("page", "number", "source"), snippets())
def test_each_python_snippet_compiles_and_imports_what_exists(
    page: str, number: int, source: str
) -> None:
    tree = ast.parse(source, filename=f"{page} (python block {number})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith(READERS_OWN):
                    importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(READERS_OWN):
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(
                    f"{node.module}.{alias.name}"
                ), f"{page} block {number}: {node.module} has no {alias.name}"


def test_the_docs_have_python_snippets() -> None:
    pages = {page for page, _number, _source in snippets()}
    assert {"docs/integration/frameworks.md", "docs/integration/index.md", "README.md"} <= pages

"""docs/ARCHITECTURE.md is the design of record only: short, naming every module of the
package, and holding no history or measured figures (those live in CHANGELOG.md and in
bench/README.md, beside the command that makes them).

A module is named in "The parts", a table whose first cell names a top-level module
(`` `errors.py` ``) or a package by its path (`` `flush/` ``, `` `migrations/versions/` ``;
one cell may name several). A top-level module is named when a row's first cell holds it in
backticks; a module of a package when a row whose first cell holds the package's path holds
the module's file name in backticks anywhere; a package's ``__init__.py`` when a row's first
cell holds the package's path. Every module so named must exist, too."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pytest
from support.paths import ROOT

ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE = ROOT / "sheetsync"
MAX_LINES = 500

#: Figures belong in bench/README.md and history in CHANGELOG.md, not in the design.
FORBIDDEN = {
    "runs per append": re.compile(r"\d(?:\.\d+)?\s*(?:[\u2013-]\s*[\d.]+\s*)?runs per append"),
    "a share of a limit or window": re.compile(
        r"\d+(?:\.\d+)?\s*(?:[\u2013-]\s*\d+(?:\.\d+)?\s*)?%\s*"
        r"(?:of (?:the|its|a) (?:[\w-]+ ){0,3}(?:limit|window|quota)|used|now)",
        re.IGNORECASE,
    ),
    "a ratio range": re.compile(r"\d+(?:\.\d+)?\s*[\u2013-]\s*\d+(?:\.\d+)?\s*(?:\u00d7|x\b)"),
    "a before/after figure": re.compile(r"\d(?:\.\d+)?\s*\S*\s*(?:->|→)\s*\d"),
    "a timing comparison": re.compile(
        r"\d+(?:\.\d+)?\s*(?:ms|s)?\s+against\s+\d+(?:\.\d+)?\s*(?:ms|s)\b"
    ),
    "'used to'": re.compile(r"\bused to\b", re.IGNORECASE),
    "a version's history": re.compile(
        r"\b(?:up to|until|since|before|as of)\s+(?:v(?:ersion)?\s*)?\d+\.\d+(?:\.\d+|\.x)",
        re.IGNORECASE,
    ),
    "'as before'": re.compile(r"\bas before\b", re.IGNORECASE),
    "a round or a session": re.compile(
        r"\b(?:since|in|after) (?:the|this) (?:\w+ )?(?:round|session)\b", re.IGNORECASE
    ),
}

BACKTICKED = re.compile(r"`([^`]+)`")


def text() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def parts_rows() -> list[tuple[set[str], set[str]]]:
    """Each row of "The parts": the names in backticks in its first cell, and in the row."""
    section = text().split("\n## The parts\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split("|")
        if not line.startswith("|") or len(cells) < 3 or set(cells[1].strip()) <= {"-"}:
            continue
        rows.append((set(BACKTICKED.findall(cells[1])), set(BACKTICKED.findall(line))))
    return rows


def modules() -> list[PurePosixPath]:
    return sorted(
        PurePosixPath(path.relative_to(PACKAGE).as_posix())
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def named(module: PurePosixPath, rows: list[tuple[set[str], set[str]]]) -> bool:
    if module.parent == PurePosixPath("."):
        return any(module.name in first for first, _ in rows)
    package = f"{module.parent}/"
    if module.name == "__init__.py":
        return any(package in first for first, _ in rows)
    return any(package in first and module.name in row for first, row in rows)


def test_the_design_is_at_most_500_lines() -> None:
    assert len(text().splitlines()) <= MAX_LINES


def test_the_parts_name_every_module_of_the_package() -> None:
    rows = parts_rows()
    assert rows, 'docs/ARCHITECTURE.md has no table under "## The parts"'
    missing = [str(module) for module in modules() if not named(module, rows)]
    assert missing == [], f'add these to "The parts" of docs/ARCHITECTURE.md: {missing}'


def test_every_module_the_parts_name_exists() -> None:
    """A file name in a package's row (or a top-level one) that no module has is stale."""
    existing = {str(module) for module in modules()}
    stale = []
    for first, row in parts_rows():
        packages = [name for name in first if name.endswith("/")]
        for name in row:
            if not re.fullmatch(r"[\w]+\.py", name):
                continue
            if name in first and "/" not in name:
                if name not in existing:
                    stale.append(name)
            elif packages and not any(f"{package}{name}" in existing for package in packages):
                stale.append(f"{packages[0]}{name}")
    assert stale == [], f'"The parts" of docs/ARCHITECTURE.md name modules that are gone: {stale}'


@pytest.mark.parametrize("kind", sorted(FORBIDDEN))
def test_no_line_holds_figures_or_history(kind: str) -> None:
    found = [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(text().splitlines(), start=1)
        if FORBIDDEN[kind].search(line)
    ]
    assert found == [], f"{kind} in the design: move it to bench/README.md or CHANGELOG.md"


@pytest.mark.parametrize(
    "line",
    [
        "30 buffers take 1.20\u20131.28 runs per append on their first flushes",
        "a pace counted from the last request used 62 % of the limit",
        "holding slots for them left 74\u201386 % of the limit used in test_limits, 95 % now",
        "the emit adds 0.22\u20130.29\u00d7 the app's PostgreSQL transaction",
        "bench_emit PostgreSQL 1 sheet: 0.67-0.74x -> 0.54-0.58x",
        "the statement object cost more than the statement (0.77 against 0.45 ms)",
        "The clock used to be lowered to the head of the line's turn",
        "which bounded reads and writes together up to 0.1.0",
        "the buffer fails as before",
        "since the layers round, every module has a layer",
    ],
)
def test_the_patterns_catch_what_they_are_for(line: str) -> None:
    assert any(pattern.search(line) for pattern in FORBIDDEN.values()), line

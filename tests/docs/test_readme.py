"""The README is a landing page that renders on a package index as on GitHub: at most 300
lines, every link and picture absolute, each one into this repository naming a file that
exists, and a page of the docs for every page of the site's nav."""

from __future__ import annotations

import re

import yaml
from support.paths import ROOT

REPOSITORY = "https://github.com/sheetsync/sheetsync"
RAW = "https://raw.githubusercontent.com/sheetsync/sheetsync/main/"
#: Inline links and pictures, ](target), and reference definitions, [name]: target.
LINK = re.compile(r"\]\(([^)\s]+)\)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
#: The reference pages: written by `make docs`, so not files of the repository.
GENERATED = {"reference/settings.md", "reference/cli.md", "reference/metrics.md"}


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def targets(text: str) -> list[str]:
    return [inline or defined for inline, defined in LINK.findall(text)]


def repository_path(url: str) -> str | None:
    """The path inside this repository a link or picture names, if it names one."""
    for prefix in (f"{REPOSITORY}/blob/main/", f"{REPOSITORY}/tree/main/", RAW):
        if url.startswith(prefix):
            return url.removeprefix(prefix).split("#", 1)[0]
    return None


def test_the_readme_is_a_landing_page_of_at_most_300_lines() -> None:
    assert len(readme().splitlines()) <= 300


def test_every_link_and_picture_is_absolute_and_names_a_file_that_exists() -> None:
    found = targets(readme())
    assert len(found) >= 20
    for target in found:
        assert target.startswith("https://"), f"a relative link breaks on a package index: {target}"
        path = repository_path(target)
        if path is not None:
            assert (ROOT / path).exists(), target


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml's YAML: its ``!!python/name:...`` values read as plain text."""


_MkdocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix
)


def test_the_readme_links_every_page_of_the_docs() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = yaml.load(text, Loader=_MkdocsLoader)["nav"]  # a SafeLoader

    def pages(entries: list[object]) -> set[str]:
        found: set[str] = set()
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                found |= pages(value) if isinstance(value, list) else {str(value)}
        return found

    linked = {repository_path(target) for target in targets(readme())}
    for page in pages(nav) - GENERATED - {"index.md"}:
        assert f"docs/{page}" in linked, page

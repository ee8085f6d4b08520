"""What a package index shows and what ``pip install`` gets: one version, and a long
description (README.md) whose links and images work away from the repository.
``.ci/install_test.py`` builds the wheel and the sdist and checks what they ship."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from support.paths import ROOT

import sheetsync

SCRIPT = Path(sys.executable).with_name("sheetsync")
#: An HTML tag's link or image target (README.md may use <img src=...> for a width).
HTML_TARGET = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""")


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_has_one_source() -> None:
    pyproject = _pyproject()
    project = pyproject["project"]
    assert isinstance(project, dict)
    assert "version" not in project
    assert "version" in project["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {  # type: ignore[index]
        "attr": "sheetsync.__version__"
    }


def test_sheetsync_version_prints_the_version() -> None:
    result = subprocess.run(
        [str(SCRIPT), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"sheetsync {sheetsync.__version__}\n",
        "",
    )


def _targets(markdown: str) -> list[str]:
    """Every link's and image's target in ``markdown`` (code blocks hold none)."""
    targets = []
    pending = list(MarkdownIt("commonmark").parse(markdown))
    while pending:
        token = pending.pop(0)
        pending[:0] = token.children or []
        if token.type == "link_open":
            targets.append(str(token.attrs["href"]))
        elif token.type == "image":
            targets.append(str(token.attrs["src"]))
        elif token.type in ("html_block", "html_inline"):
            targets.extend(HTML_TARGET.findall(token.content))
    return targets


def test_the_readme_links_absolutely_as_a_package_index_shows_it() -> None:
    # PyPI renders README.md on its own page: a relative link or image, or a link to a
    # heading, points nowhere there.
    targets = _targets((ROOT / "README.md").read_text())
    assert targets, "README.md has no links at all"
    relative = [t for t in targets if urlsplit(t).scheme not in ("https", "mailto")]
    assert relative == []


def test_the_link_check_sees_relative_links_images_and_anchors() -> None:
    text = "See [a](docs/A.md), [b](#b), ![c](docs/c.png) and [d](https://example.org/d).\n"
    text += '\n<p><img src="docs/e.png" width="50%"></p>\n'
    text += "\n```sh\necho [not](a-link)\n```\n"
    assert _targets(text) == [
        "docs/A.md",
        "#b",
        "docs/c.png",
        "https://example.org/d",
        "docs/e.png",
    ]


def test_the_readme_names_the_pythons_the_classifiers_name() -> None:
    # The install test (.ci/install_test.py) checks that the wheel is tested on each.
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    prefix = "Programming Language :: Python :: 3."
    minors = sorted(
        (int(c.removeprefix(prefix)) for c in project["classifiers"] if c.startswith(prefix)),
    )
    assert minors and minors[0] == 11
    assert project["requires-python"] == f">=3.{minors[0]}"
    names = [f"3.{minor}" for minor in minors]
    phrase = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    assert f"supports CPython {phrase}" in (ROOT / "README.md").read_text()

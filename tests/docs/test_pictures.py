"""The docs' pictures are the screenshots the browser tests take (``docs=True``), so a run
with SHEETSYNC_TEST_DOCS_IMAGES=1 renews every one: each picture a page of the docs or the
README shows is taken by a test, and each one a test takes is shown."""

from __future__ import annotations

import re

from support.browser import DOCS_IMAGES
from support.markdown import DOCS
from support.paths import ROOT

TAKEN = re.compile(r'screenshot\(\s*browser,\s*"([a-z0-9-]+)",\s*docs=True\s*\)')
#: A picture in a page of docs/: ![...](images/NAME.png) or ](../images/NAME.png).
SHOWN = re.compile(r"\]\((?:\.\./)*images/([a-z0-9-]+)\.png\)")
#: A picture in the README: its absolute address, so it shows on a package index too.
README_IMAGE = re.compile(
    r"\]\(https://raw\.githubusercontent\.com/sheetsync/sheetsync/main/docs/images/"
    r"([a-z0-9-]+)\.png\)"
)


def taken_by_tests() -> set[str]:
    return {
        name
        for path in (ROOT / "tests").rglob("test_*.py")
        for name in TAKEN.findall(path.read_text(encoding="utf-8"))
    }


def shown_in_docs() -> set[str]:
    return {
        name
        for path in DOCS.rglob("*.md")
        for name in SHOWN.findall(path.read_text(encoding="utf-8"))
    }


def test_every_picture_shown_is_taken_by_a_test_and_every_one_taken_is_shown():
    readme = set(README_IMAGE.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    assert readme, "the README shows a picture"
    taken = taken_by_tests()
    assert {"console-overview", "demo-form", "demo-sheet"} <= taken
    assert shown_in_docs() | readme == taken
    for name in taken:
        assert (DOCS_IMAGES / f"{name}.png").stat().st_size > 10_000, name

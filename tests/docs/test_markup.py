"""The docs' Markdown holds no raw HTML: a ``<title>`` outside a code span is an HTML tag
to mkdocs (it swallowed the rest of a page once), though GitHub shows it as text."""

from __future__ import annotations

import re

import pytest
from support.markdown import DOCS

FENCED = re.compile(r"^```.*?^```\s*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`]+`")
TAG = re.compile(r"</?[A-Za-z][^>]*>")


@pytest.mark.parametrize("path", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_no_raw_html_outside_code(path) -> None:
    text = CODE_SPAN.sub("", FENCED.sub("", path.read_text(encoding="utf-8")))
    assert TAG.findall(text) == []

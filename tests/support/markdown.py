"""Reading the docs as a reader does: a page of ``docs/``, one section of it, and its fenced
code blocks, exactly as written (tests of the docs run or check that text, never a copy)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from support.paths import ROOT

DOCS = ROOT / "docs"
#: A fenced block: ```lang attributes, then its text, then ``` alone on a line.
_FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_TITLE = re.compile(r'title="([^"]+)"')


@dataclass(frozen=True)
class CodeBlock:
    language: str
    title: str | None
    text: str


def page(path: str) -> str:
    """The Markdown of ``docs/<path>``."""
    return (DOCS / path).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """From the heading line (``## A minimal integration to run``) to the next heading of
    the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(f"\n{heading}\n") + 1
    following = re.compile(rf"^#{{1,{level}}} ", re.MULTILINE)
    found = following.search(text, start + len(heading))
    return text[start : found.start() if found else len(text)]


def code_blocks(text: str, language: str | None = None) -> list[CodeBlock]:
    """The fenced blocks in ``text`` (of ``language`` only, when given), in order."""
    blocks = []
    for found in _FENCE.finditer(text):
        title = _TITLE.search(found.group(2))
        block = CodeBlock(found.group(1), title.group(1) if title else None, found.group(3))
        if language is None or block.language == language:
            blocks.append(block)
    return blocks


def titled_block(text: str, title: str) -> str:
    """The text of the one block whose ``title="..."`` is ``title``."""
    [block] = [block for block in code_blocks(text) if block.title == title]
    return block.text

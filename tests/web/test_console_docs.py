"""The README's console section, read as written: its pictures exist and are the ones
the browser tests take (so a run with SHEETSYNC_TEST_DOCS_IMAGES=1 renews every one), and the
options it shows are those of ``sheetsync web``."""

from __future__ import annotations

import re
import subprocess

from support.browser import DOCS_IMAGES
from support.console import SHEETSYNC
from support.paths import ROOT

SECTION = re.compile(r"^### The web console\n(.*?)^### ", re.MULTILINE | re.DOTALL)
TAKEN = re.compile(r'screenshot\(\s*browser,\s*"([a-z0-9-]+)",\s*readme=True\s*\)')


def _section() -> str:
    found = SECTION.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert found, "the README has a section '### The web console'"
    return found.group(1)


def test_the_console_pictures_are_the_ones_the_tests_take():
    # Absolute URLs (the README is also a package index's page), ending in docs/images/.
    shown = re.findall(r"\]\(https://\S+/docs/images/([a-z0-9-]+)\.png\)", _section())
    taken = {
        name
        for path in (ROOT / "tests" / "web").glob("test_*.py")
        for name in TAKEN.findall(path.read_text(encoding="utf-8"))
    }
    assert len(shown) >= 4
    assert sorted(shown) == sorted(taken)
    for name in shown:
        assert (DOCS_IMAGES / f"{name}.png").stat().st_size > 10_000, name


def test_the_options_shown_are_those_of_sheetsync_web():
    [usage] = re.findall(r"^sheetsync web .*$", _section(), re.MULTILINE)
    options = re.findall(r"--[a-z-]+", usage)
    assert "--refresh-interval" in options
    helped = subprocess.run(
        [SHEETSYNC, "web", "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    for option in options:
        assert option in helped, option

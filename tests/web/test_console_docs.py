"""The console's page of the docs (docs/operating/console.md), read as written: the options
it shows are those of ``sheetsync web``. Its pictures are checked with every other picture
of the docs (tests/docs/test_pictures.py)."""

from __future__ import annotations

import re
import subprocess

from support.console import SHEETSYNC
from support.markdown import code_blocks, page

PAGE = "operating/console.md"


def test_the_options_shown_are_those_of_sheetsync_web():
    [block] = code_blocks(page(PAGE), "sh")
    [usage] = re.findall(r"^sheetsync web .*$", block.text, re.MULTILINE)
    options = re.findall(r"--[a-z-]+", usage)
    assert "--refresh-interval" in options
    helped = subprocess.run(
        [SHEETSYNC, "web", "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    for option in options:
        assert option in helped, option

"""The README's snippets, as written: the admin API, google-api-python-client and
gspread against a live emulator (its URL in place of the README's port 8085)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sheets_emulator import EmulatorAdmin, EmulatorServer

README = Path(__file__).resolve().parent.parent / "README.md"
README_URL = "http://127.0.0.1:8085"


def python_block(heading: str) -> str:
    """The first ```python block after the line ``heading`` of the README."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index(f"\n{heading}\n") :]
    found = re.search(r"```python\n(.*?)```", after, re.DOTALL)
    assert found is not None, f"no python block after {heading!r}"
    return found.group(1)


def test_the_readmes_clients_write_and_read_the_same_sheet(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    namespace: dict[str, Any] = {}
    for heading in ("### The admin API", "### google-api-python-client", "### gspread"):
        code = python_block(heading)
        assert README_URL in code, heading
        exec(code.replace(README_URL, emulator_server.url), namespace)

    spreadsheet_id = namespace["spreadsheet_id"]
    assert emulator_admin.sheet_values(spreadsheet_id, 0) == [["hello"], ["world"]]
    assert namespace["worksheet"].get_all_values() == [["hello"], ["world"]]


def test_the_readmes_cloud_projects_snippet_runs(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin
) -> None:
    code = python_block("### Cloud projects")
    assert README_URL in code

    exec(code.replace(README_URL, emulator_server.url), {})

    assert emulator_admin.projects() == {"customer.apps.googleusercontent.com": "555000111222"}

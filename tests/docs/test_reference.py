"""The reference pages of the docs, as docs/gen_reference.py writes them at every build,
cover everything the code defines: every setting (with its default, type, description
and the processes it takes effect in), every command of the Typer app (with its options)
and every metric the exporter serves. Each side is read from the code here, not from the
generator."""

from __future__ import annotations

import re
import runpy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.markdown import DOCS, section
from typer.main import get_command

from sheetsync.cli import app
from sheetsync.metrics import names
from sheetsync.settings import Settings, setting_of


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    """Each generated page's Markdown, by its path in the site."""
    generator = runpy.run_path(str(DOCS / "gen_reference.py"), run_name="gen_reference")
    rendered: dict[str, tuple[Callable[[], str], str]] = generator["PAGES"]
    return {path: render() for path, (render, _source) in rendered.items()}


def flat(text: str) -> str:
    """Markdown and docstring text with the line breaks and code quotes taken out."""
    return " ".join(text.replace("`", "").replace("**", "").split())


def test_the_settings_page_covers_every_setting(pages: dict[str, str]) -> None:
    text = pages["reference/settings.md"]
    for name, field in Settings.model_fields.items():
        variable = f"SHEETSYNC_{name.upper()}"
        assert f"| [`{variable}`](#{variable.lower()})" in text, variable  # the summary
        entry = flat(section(text, f"## `{variable}`")).replace("&lt;", "<")
        assert field.description, f"{name} has no docstring"
        described = re.sub(r":[a-z]+:~?", "", flat(field.description))
        assert described in entry, variable
        default = field.default
        shown = "(none)" if default in (None, ()) else str(default)
        if isinstance(default, bool):
            shown = shown.lower()
        elif isinstance(default, float) and default.is_integer():
            shown = str(int(default))
        assert f"default: {shown}" in entry, variable
        for process, note in setting_of(field).readers.items():
            assert str(process) in entry and note in entry, (variable, process)


def commands(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(command path, command) for every command that runs something."""
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    for name, sub in subcommands.items():
        if not sub.hidden:
            yield from commands(sub, f"{path} {name}")


def test_the_cli_page_covers_every_command_and_option(pages: dict[str, str]) -> None:
    text = pages["reference/cli.md"]
    found = dict(commands(get_command(app), "sheetsync"))
    assert {"sheetsync dlq replay", "sheetsync db upgrade", "sheetsync web"} <= set(found)
    for path, command in found.items():
        entry = section(text, f"## `{path}`")
        assert f"Usage: {path} " in entry, path
        first_paragraph = (command.help or "").strip().split("\n\n")[0]
        assert first_paragraph and flat(first_paragraph) in flat(entry), path
        for param in command.params:
            for option in param.opts if param.param_type_name == "option" else ():
                assert option in entry, (path, option)


def test_the_metrics_page_covers_every_metric(pages: dict[str, str]) -> None:
    text = pages["reference/metrics.md"]
    defined = {
        value
        for key, value in vars(names).items()
        if key.isupper() and isinstance(value, str) and value.startswith("sheetsync_")
    }
    assert defined == set(names.BY_NAME), "a metric name without its definition"
    for definition in names.DEFINITIONS:
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}
        for suffix in suffixes.get(definition.kind, [""]):
            served = f"`{definition.name}{suffix}`"
            [row] = [
                line
                for line in text.splitlines()
                if line.startswith(f"| {served}")
                or (line.startswith("|") and f"<br>{served}" in line)
            ]
            assert f"| {definition.kind} |" in row, definition.name
            assert definition.help in row, definition.name
            for label in definition.labels:
                assert f"`{label}`" in row, (definition.name, label)

"""What every command shares: the consoles, one-line errors, JSON, and formatting.

People get rich tables on stdout; scripts get ``--json`` (one JSON document on stdout).
Errors, hints and progress go to stderr, so ``--json`` output always parses.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NoReturn, TextIO

import click
import typer
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.style import StyleType
from rich.table import Table
from rich.text import Text

from sheetsync.text import iso, printable

#: Exit codes: 0 ok, 1 error, 2 usage, 3 not done yet (an erasure still pending).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PENDING = 3

#: Width of output going to a pipe or a file: wide enough that no table cell is ever cut
#: or wrapped. A terminal gets its own width; COLUMNS, when set, wins over both.
PIPED_WIDTH = 10_000
#: Ids named in one message before "and N more".
SHOWN_IDS = 20

# Typer now ships its own copy of click (``typer._click``); the click package itself is
# still installed (Celery uses it). Errors of either are handled alike.
try:
    from typer import _click as _typer_click

    _CLICK_MODULES: tuple[Any, ...] = (_typer_click.exceptions, click.exceptions)
except ImportError:  # pragma: no cover (older typer: click itself)
    _CLICK_MODULES = (click.exceptions,)


def _click_classes(name: str) -> tuple[type[Exception], ...]:
    return tuple(getattr(m, name) for m in _CLICK_MODULES if hasattr(m, name))


NO_ARGS_ERRORS = _click_classes("NoArgsIsHelpError")
USAGE_ERRORS = _click_classes("UsageError")
CLICK_ERRORS = _click_classes("ClickException")
ABORTS: tuple[type[Exception], ...] = (typer.Abort, *_click_classes("Abort"))


def console_width(stream: TextIO) -> int | None:
    """The width for a console on ``stream``; None lets rich ask the terminal or COLUMNS."""
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    try:
        is_terminal = stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        is_terminal = False
    return None if is_terminal else PIPED_WIDTH


def new_console(*, stderr: bool = False) -> Console:
    """A console as the command line sets one up, for what ``sys.stdout`` (or
    ``sys.stderr``) and the environment are now."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=console_width(stream))


#: Tables and summaries.
out = new_console()
#: Errors, hints and progress bars.
err = new_console(stderr=True)


def error_line(message: str) -> None:
    """Write ``error: <message>`` as one line on stderr (newlines are folded)."""
    text = printable(" ".join(str(message).split()))
    sys.stderr.write(f"error: {text}\n")
    sys.stderr.flush()


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print one error line and end the command with ``code``."""
    error_line(message)
    raise typer.Exit(code)


def usage_error(ctx: typer.Context, message: str) -> NoReturn:
    """End the command as a usage error (exit 2, one line naming its ``--help``)."""
    error_class: Any = USAGE_ERRORS[0]
    raise error_class(message, ctx=ctx)


def hint(message: str) -> None:
    """A line for people, on stderr (never mixed into ``--json`` output)."""
    err.print(printable(message), markup=False)


def print_json(payload: Any) -> None:
    """One JSON document on stdout: UTF-8 as is, datetimes in ISO 8601."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=_json_default))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def heading(text: str) -> None:
    """A section title above a table (a table's own title would wrap to its width)."""
    out.print()
    out.print(text, style="bold", markup=False)


class PlainTable(Table):
    """A table whose text cells are shown as they are, never read as rich markup (an
    error message such as ``HttpError 403 [forbidden]`` must not lose its brackets, and
    ``[/]`` must not crash the command), with terminal control characters shown as
    escapes (``ESC[2J`` in a stored error must not clear the screen)."""

    def add_row(
        self,
        *renderables: RenderableType | None,
        style: StyleType | None = None,
        end_section: bool = False,
    ) -> None:
        cells = [Text(printable(cell)) if isinstance(cell, str) else cell for cell in renderables]
        super().add_row(*cells, style=style, end_section=end_section)


def table(*columns: str, right: Iterable[str] = ()) -> Table:
    """A table with ``columns``; the ones named in ``right`` are right-aligned numbers."""
    numeric = set(right)
    result = PlainTable(header_style="bold")
    for name in columns:
        # fold: an id too long for a narrow terminal wraps whole, never ends in "…".
        result.add_column(name, justify="right" if name in numeric else "left", overflow="fold")
    return result


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``1 dead letter``, ``3 dead letters``, ``0 dead letters``."""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def id_note(ids: Sequence[int]) -> str:
    """``(id 7)``, ``(ids 7, 8, 9)``, ``(ids 1, 2, ... and 5 more)``."""
    shown = ", ".join(map(str, ids[:SHOWN_IDS]))
    if len(ids) > SHOWN_IDS:
        shown += f" and {len(ids) - SHOWN_IDS} more"
    return f"({'id' if len(ids) == 1 else 'ids'} {shown})"


def with_ids(ids: Sequence[int], singular: str, plural: str | None = None) -> str:
    """``1 dead letter (id 7)``, ``3 dead letters (ids 7, 8, 9)``, ``0 dead letters``."""
    text = counted(len(ids), singular, plural)
    return f"{text} {id_note(ids)}" if ids else text


def progress_bar() -> Progress:
    """The bar of long work (replays, backfills) on stderr: what, how far, how long."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
    )

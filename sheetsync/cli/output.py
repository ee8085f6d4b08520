"""What every command shares: the consoles, one-line errors, JSON, and formatting.

People get rich tables on stdout; scripts get ``--json`` (one JSON document on stdout).
Errors, hints and progress go to stderr, so ``--json`` output always parses.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import click
import typer
from rich.console import Console
from rich.table import Table

#: Exit codes (SPEC 4.2): 0 ok, 1 error, 2 usage.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

#: Widest a free-text cell (an error message) gets in a table before it is cut.
DEFAULT_TEXT_CELL_CHARS = 60
#: What a masked secret looks like.
MASK = "***"

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

#: Tables and summaries.
out = Console(highlight=False, soft_wrap=True)
#: Errors, hints and progress bars.
err = Console(stderr=True, highlight=False, soft_wrap=True)


def error_line(message: str) -> None:
    """Write ``error: <message>`` as one line on stderr (newlines are folded)."""
    text = " ".join(str(message).split())
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
    err.print(message, markup=False)


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


def table(*columns: str, right: Iterable[str] = ()) -> Table:
    """A table with ``columns``; the ones named in ``right`` are right-aligned numbers."""
    numeric = set(right)
    result = Table(header_style="bold")
    for name in columns:
        result.add_column(name, justify="right" if name in numeric else "left")
    return result


def mask_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``; safe to print."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    userinfo = f"{parts.username or ''}:{MASK}"
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{userinfo}@{host}" + (f":{port}" if port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


def iso(moment: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 in UTC (``...Z``); None stays None."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def short_time(moment: datetime | None) -> str:
    """``2024-05-01 09:30:00Z`` for tables."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    """A compact length of time: ``45s``, ``3m 20s``, ``6d 23h``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def relative(moment: datetime | None, now: datetime | None = None) -> str:
    """``in 6d 23h``, ``3m 20s ago`` or ``now``."""
    if moment is None:
        return "-"
    delta = (moment - (now or datetime.now(UTC))).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def now_ms() -> int:
    return int(time.time() * 1000)


def clip(text: str | None, limit: int = DEFAULT_TEXT_CELL_CHARS) -> str:
    """One line of at most ``limit`` characters, with an ellipsis when cut."""
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

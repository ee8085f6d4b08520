"""The ``sheetsync`` command line, with the ``[worker]`` extra (Typer and Rich).

Exit codes: 0 ok, 1 error, 2 usage. Every failure is one line on stderr
(``error: ...``) with secrets masked, never a traceback; set
``SHEETSYNC_CLI_TRACEBACK=1`` to see the traceback of an unexpected error (one this
module has no explanation for; a known failure never suggests it).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import traceback
from collections.abc import Sequence

import typer
from typer.main import get_command

from sheetsync import __version__, logs
from sheetsync.cli import (
    backfill,
    credentials,
    db,
    demo,
    dlq,
    emulator,
    erase,
    forms,
    health,
    links,
    metrics,
    pii,
    pii_keys,
    resend,
    web,
)
from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import (
    ABORTS,
    CLICK_ERRORS,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    NO_ARGS_ERRORS,
    USAGE_ERRORS,
    error_line,
)
from sheetsync.cli.runtime import TRACEBACK_VARIABLE
from sheetsync.cli.status import status
from sheetsync.ops.explain import describe, first_line

__all__ = ["app", "main"]

#: What Typer returns after Ctrl-C (128 + SIGINT), as shells do.
EXIT_INTERRUPTED = 130

app = new_app("Stream form answers into Google Sheets: operate buffers, dead letters and tools.")
app.command("status", cls=HelpCommand)(status)
app.command("health", cls=HelpCommand)(health.health)
app.command("resend", cls=HelpCommand)(resend.resend)
app.command("erase", cls=HelpCommand)(erase.erase)
app.command("backfill", cls=HelpCommand)(backfill.backfill)
app.add_typer(dlq.app, name="dlq")
app.add_typer(links.app, name="links")
app.add_typer(forms.app, name="forms")
app.add_typer(db.app, name="db")
app.add_typer(credentials.app, name="credentials")
app.add_typer(pii_keys.app, name="keys")
app.add_typer(pii.app, name="pii")
app.command("metrics", cls=HelpCommand)(metrics.metrics)
app.command("emulator", cls=emulator.EmulatorCommand, context_settings=emulator.CONTEXT_SETTINGS)(
    emulator.emulator
)
app.command("demo", cls=HelpCommand)(demo.demo)
app.command("web", cls=HelpCommand)(web.web)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"sheetsync {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log the library's progress."),
    _version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        expose_value=False,
        help="Print the version and exit.",
    ),
) -> None:
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)


class _StderrHandler(logging.Handler):
    """Log lines on whatever ``sys.stderr`` is now (so they print above progress bars)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # logging must never end the command
            self.handleError(record)


def _setup_logging() -> None:
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        # Reading the format reads the settings, which may warn (an unknown variable):
        # that warning is held, then goes out once in the format it asked for.
        held = logging.handlers.BufferingHandler(capacity=1000)
        root.addHandler(held)
        try:
            log_format = logs.configured_format()
        finally:
            root.removeHandler(held)
        handler = _StderrHandler()
        handler.setFormatter(logs.formatter(log_format, "%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        for record in held.buffer:
            handler.handle(record)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    _setup_logging()
    command = get_command(app)
    try:
        result = command.main(
            args=list(argv) if argv is not None else None,
            prog_name="sheetsync",
            standalone_mode=False,
        )
    except NO_ARGS_ERRORS as exc:
        # `sheetsync dlq` alone: the help is the answer, but it was not a success.
        # (Typer's rich help has already printed itself; plain click's is the message.)
        if exc.format_message().strip():  # type: ignore[attr-defined]
            exc.show()  # type: ignore[attr-defined]
        return EXIT_USAGE
    except USAGE_ERRORS as exc:
        ctx = getattr(exc, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        message = exc.format_message().rstrip().rstrip(".")  # type: ignore[attr-defined]
        error_line(message + where)
        return EXIT_USAGE
    except CLICK_ERRORS as exc:
        error_line(exc.format_message())  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", EXIT_ERROR))
    except ABORTS:
        error_line("aborted")
        return EXIT_ERROR
    except Exception as exc:  # every failure becomes one line
        return report(exc)
    if result == EXIT_INTERRUPTED:
        error_line("interrupted")
    return result if isinstance(result, int) else EXIT_OK


def report(exc: Exception) -> int:
    """Print the one line for ``exc``; returns the exit code."""
    message = describe(exc)
    if message is None:
        if os.environ.get(TRACEBACK_VARIABLE):
            traceback.print_exception(exc)
        else:
            # The first line only: a message may quote data further down.
            message = f"unexpected {type(exc).__name__}: {first_line(exc)}"
            message += f" (set {TRACEBACK_VARIABLE}=1 for the traceback)"
    if message is not None:
        error_line(message)
    return EXIT_ERROR

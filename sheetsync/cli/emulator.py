"""``sheetsync emulator``: the Sheets API emulator, served in the foreground.

The command hands its arguments to the emulator's own command line, ``sheets-emulator``
(:mod:`sheets_emulator.cli`): its parser declares, checks and describes the options, so
each of them works here as it does there and ``sheetsync emulator --help`` lists them.
What sheetsync adds is its own manner: one-line errors (a usage error exits 2, a failure
to serve exits 1), and, once the port is bound, the settings that point sheetsync at the
emulator.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from sheetsync import extras
from sheetsync.cli.helpformat import HelpCommand
from sheetsync.cli.output import hint, out, usage_error
from sheetsync.errors import SheetSyncError

if TYPE_CHECKING:
    from collections.abc import Iterator

#: `sheetsync emulator` and `sheetsync demo` without the emulator package.
EMULATOR_MISSING = f"the Sheets API emulator is not installed: {extras.EMULATOR_INSTALL}"
#: Every argument goes to the emulator's parser. Help (``--help``, and ``-h`` as for
#: ``sheets-emulator``) is sheetsync's, listing the emulator's options (EmulatorCommand).
CONTEXT_SETTINGS: dict[str, Any] = {
    "allow_extra_args": True,
    "ignore_unknown_options": True,
    "help_option_names": ["--help", "-h"],
}


def emulator(ctx: typer.Context) -> None:
    """Run the Sheets API emulator (in memory) until interrupted.

    The emulator is a distribution of its own, sheetsync-emulator (`make install` installs it).

    Its options are those of sheets-emulator, the emulator's own command.
    """
    with needs_emulator():
        from sheets_emulator import EmulatorError, serve
        from sheets_emulator.cli import is_loopback, remote_refusal

    parsing = emulator_parser(ctx)
    try:
        options = vars(parsing.parse_args(ctx.args))
    except SystemExit as done:  # --version, printed already
        raise typer.Exit(done.code if isinstance(done.code, int) else 0) from None
    # The parser's options are serve()'s keywords, as sheets-emulator passes them.
    host, port = options.pop("host"), options.pop("port")
    if not options.pop("allow_remote") and not is_loopback(host):
        raise typer.BadParameter(remote_refusal(host), param_hint="--host")
    try:
        serve(host, port, announce=_Announcer(), **options)
    except EmulatorError as error:
        raise SheetSyncError(str(error)) from error


def emulator_parser(ctx: typer.Context) -> argparse.ArgumentParser:
    """``sheets-emulator``'s own parser, named as the command; its usage errors are
    ``sheetsync``'s (one line naming ``sheetsync emulator --help``, exit 2)."""
    with needs_emulator():
        from sheets_emulator.cli import parser

    parsing = parser()
    parsing.prog = ctx.command_path

    def refuse(message: str) -> NoReturn:
        usage_error(ctx, message)

    parsing.error = refuse  # type: ignore[method-assign]  # argparse's hook for errors
    return parsing


class EmulatorCommand(HelpCommand):
    """Help that lists the emulator's options, read from its parser (only ``--help`` when
    the emulator is not installed)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        try:
            parsing = emulator_parser(ctx)
        except SheetSyncError:
            super().format_options(ctx, formatter)
            return
        rows = [
            (_label(action), _help(action))
            for action in parsing._actions
            if action.help != argparse.SUPPRESS and "--help" not in action.option_strings
        ]
        help_option = self.get_help_option(ctx)
        record = help_option.get_help_record(ctx) if help_option is not None else None
        if record is not None:
            rows.append(record)
        with formatter.section("Options"):
            formatter.write_dl(rows)


def _label(action: argparse.Action) -> str:
    """``--port PORT``, ``--read-per-account N``, ``--allow-remote``: as typed."""
    label = ", ".join(sorted(action.option_strings, key=lambda opt: opt.startswith("--")))
    if action.nargs != 0:
        label += f" {action.metavar or action.dest.upper()}"
    return label


def _help(action: argparse.Action) -> str:
    """The option's help, and its default when it takes a value and the help does not
    name it already (the quotas' say Google's, which is the default)."""
    text, default = action.help or "", action.default
    if action.nargs == 0 or default in (None, argparse.SUPPRESS):
        return text
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    return text if shown in text else f"{text}  [default: {shown}]"


@contextlib.contextmanager
def needs_emulator() -> Iterator[None]:
    """Imports of the emulator package: its absence becomes one line naming the install."""
    try:
        yield
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != "sheets_emulator":
            raise
        raise SheetSyncError(EMULATOR_MISSING) from None


class _Announcer:
    """Prints the emulator's start-up lines, then the settings that point sheetsync at it
    (once the port is bound, so ``--port 0`` shows the real one)."""

    def __init__(self) -> None:
        self.told = False

    def __call__(self, line: str) -> None:
        out.print(line, markup=False)
        found = re.search(r"https?://\S+", line)
        if found and not self.told:
            self.told = True
            url = found.group(0).rstrip("/")
            hint(
                f"point sheetsync at it: SHEETSYNC_GOOGLE_API_ENDPOINT={url} "
                f"SHEETSYNC_GOOGLE_TOKEN_URI={url}/token"
            )
        sys.stdout.flush()

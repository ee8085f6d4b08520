"""``sheetsync emulator``: the Sheets API emulator, served in the foreground."""

from __future__ import annotations

import contextlib
import re
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sheetsync import extras
from sheetsync.cli.output import hint, out
from sheetsync.errors import SheetSyncError

if TYPE_CHECKING:
    from collections.abc import Iterator

#: Where the emulator listens unless told otherwise.
DEFAULT_EMULATOR_HOST = "127.0.0.1"
DEFAULT_EMULATOR_PORT = 8085
#: `sheetsync emulator` and `sheetsync demo` without the emulator package.
EMULATOR_MISSING = f"the Sheets API emulator is not installed: {extras.EMULATOR_INSTALL}"


def emulator(
    *,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")
    ] = DEFAULT_EMULATOR_HOST,
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port (0: any free one)."),
    ] = DEFAULT_EMULATOR_PORT,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Listen on a HOST that is not loopback. Anyone who reaches it can mint "
            "tokens and read every sheet: a development tool only.",
        ),
    ] = False,
    read_per_account: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Reads per window per account (Google: 60)."),
    ] = None,
    write_per_account: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Writes per window per account (Google: 60)."),
    ] = None,
    read_per_project: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Reads per window per project (Google: 300)."),
    ] = None,
    write_per_project: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Writes per window per project (Google: 300)."),
    ] = None,
    window_s: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", min=0.001, help="Quota window in seconds (Google: 60)."),
    ] = None,
) -> None:
    """Run the Sheets API emulator (in memory) until interrupted.

    The emulator is a distribution of its own, sheetsync-emulator (`make install` installs it).
    """
    with needs_emulator():
        from sheets_emulator import EmulatorError, serve
        from sheets_emulator.cli import is_loopback, remote_refusal

    if not allow_remote and not is_loopback(host):
        raise typer.BadParameter(remote_refusal(host), param_hint="--host")

    quotas: dict[str, Any] = {
        name: value
        for name, value in (
            ("read_per_account", read_per_account),
            ("write_per_account", write_per_account),
            ("read_per_project", read_per_project),
            ("write_per_project", write_per_project),
            ("window_s", window_s),
        )
        if value is not None
    }
    try:
        serve(host, port, announce=_Announcer(), **quotas)
    except EmulatorError as error:
        raise SheetSyncError(str(error)) from error


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

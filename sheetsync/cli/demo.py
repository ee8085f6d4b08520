"""``sheetsync demo``: the end-to-end demo against the emulator."""

from __future__ import annotations

from typing import Annotated

import typer

from sheetsync.cli.emulator import needs_emulator


def demo(
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep everything running until Ctrl-C to browse the sheets."),
    ] = False,
) -> None:
    """Run the end-to-end demo against the emulator."""
    with needs_emulator():
        from sheetsync.dev.demo import run_demo

    code = run_demo(keep=keep)
    if code:
        raise typer.Exit(int(code))

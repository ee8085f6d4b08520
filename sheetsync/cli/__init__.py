"""The ``sheetsync`` command line: the whole of it (:mod:`sheetsync.cli.commands`) with the
``[worker]`` extra, else the few commands a web app's slim install needs
(:mod:`sheetsync.cli.slim`). Nothing here imports Typer or Rich before it knows they
are there.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sheetsync import extras

if TYPE_CHECKING:
    from sheetsync.cli.commands import app, report

__all__ = ["app", "main", "report"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    if extras.missing_modules("worker"):
        from sheetsync.cli import slim

        return slim.main(argv)
    from sheetsync.cli import commands

    return commands.main(argv)


def __getattr__(name: str) -> Any:
    if name in ("app", "report"):
        return getattr(importlib.import_module("sheetsync.cli.commands"), name)
    raise AttributeError(f"module 'sheetsync.cli' has no attribute {name!r}")

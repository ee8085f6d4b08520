"""The ``sheetsync`` command on the slim install (no ``[worker]`` extra): what a web app's
deploy runs, ``sheetsync db upgrade`` and ``sheetsync --version``, the same as the whole
command line's, in plain Python; every other command says in one line which extra it
needs.

Why a second front end: the whole command line is built on Typer and Rich, which the slim
install leaves out, and a web app still migrates sheetsync's tables as part of its
deploy. What the commands do lives once, in :mod:`sheetsync.cli.runtime`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sheetsync import __version__, extras
from sheetsync.cli.runtime import TRACEBACK_VARIABLE, upgrade_database
from sheetsync.text import printable

#: Commands whose extra is not [worker] (each brings [worker] with it).
EXTRA_OF: dict[str, extras.Extra] = {"web": "web", "metrics": "metrics"}
USAGE = "usage: sheetsync db upgrade | sheetsync --version (the slim install)"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        print(f"sheetsync {__version__}")
        return 0
    if args in (["--help"], ["-h"], []):
        print(USAGE)
        print(f"every other command: {extras.install_command('worker')}")
        return 0 if args else 2
    if args == ["db", "upgrade"]:
        try:
            print(upgrade_database())
        except Exception as exc:
            return _report(exc)
        return 0
    command = next((arg for arg in args if not arg.startswith("-")), args[0])
    extra: extras.Extra = EXTRA_OF.get(command, "worker")
    _error(extras.missing_message(f"sheetsync {command}", extra))
    return 1


def _report(exc: Exception) -> int:
    """The one line the whole command line prints for ``exc``."""
    import os
    import traceback

    from sheetsync.ops.explain import describe, first_line

    message = describe(exc)
    if message is None:
        if os.environ.get(TRACEBACK_VARIABLE):
            traceback.print_exception(exc)
        message = f"unexpected {type(exc).__name__}: {first_line(exc)}"
        message += f" (set {TRACEBACK_VARIABLE}=1 for the traceback)"
    _error(message)
    return 1


def _error(message: str) -> None:
    """``error: <message>`` as one line on stderr, as the whole command line writes it."""
    sys.stderr.write(f"error: {printable(' '.join(str(message).split()))}\n")

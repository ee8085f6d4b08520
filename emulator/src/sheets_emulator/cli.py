"""``sheets-emulator``: serve the emulator in the foreground until Ctrl-C or SIGTERM.

The options are those of :func:`~sheets_emulator.server.serve`. A host that is not
loopback needs ``--allow-remote``: whoever reaches the emulator can mint tokens and read
every sheet.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence

from sheets_emulator import __version__
from sheets_emulator.errors import EmulatorError
from sheets_emulator.quotas import (
    DEFAULT_READS_PER_ACCOUNT,
    DEFAULT_READS_PER_PROJECT,
    DEFAULT_WINDOW_S,
    DEFAULT_WRITES_PER_ACCOUNT,
    DEFAULT_WRITES_PER_PROJECT,
)
from sheets_emulator.server import DEFAULT_HOST, DEFAULT_PORT, serve

#: The quota options: (option, what it limits, Google's default).
QUOTA_OPTIONS = (
    ("read-per-account", "Reads per window per account", DEFAULT_READS_PER_ACCOUNT),
    ("write-per-account", "Writes per window per account", DEFAULT_WRITES_PER_ACCOUNT),
    ("read-per-project", "Reads per window per project", DEFAULT_READS_PER_PROJECT),
    ("write-per-project", "Writes per window per project", DEFAULT_WRITES_PER_PROJECT),
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (IPv4 or IPv6)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def remote_refusal(host: str) -> str:
    """Why a host that is not loopback is refused without ``--allow-remote``."""
    return (
        f"{host} is not a loopback address: the emulator has no auth, so anyone who "
        "reaches it can mint tokens and read every sheet (add --allow-remote if you "
        "really mean it)"
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    parsing = argparse.ArgumentParser(
        prog="sheets-emulator",
        description="Serve a local, in-memory Google Sheets API v4 until interrupted.",
    )
    parsing.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parsing.add_argument("--host", default=DEFAULT_HOST, help="Interface to listen on.")
    parsing.add_argument("--port", type=_port, default=DEFAULT_PORT, help="Port (0: any free one).")
    parsing.add_argument(
        "--allow-remote",
        action="store_true",
        help="Listen on a HOST that is not loopback. Anyone who reaches it can mint "
        "tokens and read every sheet: a development tool only.",
    )
    for option, limits, default in QUOTA_OPTIONS:
        parsing.add_argument(
            f"--{option}",
            type=_positive_int,
            default=default,
            metavar="N",
            help=f"{limits} (Google: {default}).",
        )
    parsing.add_argument(
        "--window-s",
        type=_positive_float,
        default=DEFAULT_WINDOW_S,
        metavar="SECONDS",
        help=f"Quota window in seconds (Google: {DEFAULT_WINDOW_S:g}).",
    )
    return parsing


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sheets-emulator``; returns the exit code (0 once stopped, 1 on an error)."""
    parsing = parser()
    options = parsing.parse_args(argv)
    if not options.allow_remote and not is_loopback(options.host):
        parsing.error(remote_refusal(options.host))
    try:
        serve(
            options.host,
            options.port,
            read_per_account=options.read_per_account,
            write_per_account=options.write_per_account,
            read_per_project=options.read_per_project,
            write_per_project=options.write_per_project,
            window_s=options.window_s,
        )
    except EmulatorError as error:
        print(f"sheets-emulator: {error}", file=sys.stderr)
        return 1
    return 0

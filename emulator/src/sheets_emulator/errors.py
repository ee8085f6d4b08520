"""Every error the emulator's Python API raises, under one root: :class:`EmulatorError`.

These are the errors of the Python side (starting a server, the admin client, bad
settings). What the emulated Sheets API answers over HTTP is Google's JSON error body
(:mod:`sheets_emulator.api_errors`), never one of these.
"""

from __future__ import annotations


class EmulatorError(Exception):
    """Root of every error the emulator raises."""


class EmulatorConfigError(EmulatorError, ValueError):
    """A setting is out of range or unknown (a quota, a limit); the message names it."""


class EmulatorStartError(EmulatorError):
    """The emulator could not start (for example, the port is taken)."""


class EmulatorAdminError(EmulatorError):
    """An admin call failed; ``status`` is the HTTP status, None when unreachable."""

    def __init__(self, message: str, *, status: int | None) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_admin_error, (str(self), self.status))


def _rebuild_admin_error(message: str, status: int | None) -> EmulatorAdminError:
    return EmulatorAdminError(message, status=status)

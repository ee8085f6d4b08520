"""Every error sheetsync raises, under one root: :class:`SheetSyncError`.

Messages never carry personal info: they name answers, questions and sheets by id.
Every error pickles (Celery ships exceptions between processes), so subclasses keep
their extra fields as keyword arguments that :meth:`SheetSyncError.__reduce__` restores.
"""

from __future__ import annotations

from typing import Any


class SheetSyncError(Exception):
    """Root of every sheetsync error."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.fields))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[SheetSyncError], message: str, fields: dict[str, Any]) -> SheetSyncError:
    return cls(message, **fields)


class ConfigError(SheetSyncError):
    """A setting is missing or malformed. The message names the variable."""


class ValidationError(SheetSyncError):
    """Bad input: a malformed id, an unknown question, a broken link."""


class CryptoError(SheetSyncError):
    """A personal-info token could not be encrypted or decrypted."""


class NotFoundError(SheetSyncError):
    """A row the caller named does not exist."""


class SheetsError(SheetSyncError):
    """A Google Sheets call failed. ``status`` is the HTTP status when there was one."""

    status: int | None


class TransientError(SheetsError):
    """429, 5xx, a timeout or a dropped connection: retrying may succeed.

    ``ambiguous`` is true when the request may have been applied anyway (a timeout or a
    dropped connection on a write), so the caller must check before writing again.
    """

    ambiguous: bool


class CredentialError(SheetsError):
    """The owner's Google credential no longer works (invalid_grant, 401 after refresh)."""


class PermanentError(SheetsError):
    """The target is gone or forbidden (404, 403, unparsable range): retrying will not help."""


class RateLimited(SheetSyncError):  # noqa: N818 (reads as the condition it is)
    """No rate-limit slot is free; ``retry_after_s`` says when one frees."""

    retry_after_s: float


class StaleRunError(SheetSyncError):
    """A flush run lost its lease or token to a newer run and must stop."""

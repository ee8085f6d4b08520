"""Every error sheetsync raises, under one root: :class:`SheetSyncError`; and, apart
from the errors, the signals a flush run raises to say "come back later"
(:class:`ComeBackLater`): a full quota, a batch still filling, an append that may still
land. A broad ``except SheetSyncError`` never takes one of those for a failure.

Messages never carry personal info: they name answers, questions and sheets by id, and
never quote Google's error text (see :func:`sheetsync.sheets.google_errors.translate_error`).
Every error pickles (Celery ships exceptions between processes), so subclasses keep
their extra fields as keyword arguments that :meth:`SheetSyncError.__reduce__` restores.
"""

from __future__ import annotations

from typing import Any


class _WithFields(Exception):  # noqa: N818 (the base of errors and signals alike)
    """A message and keyword fields that survive pickling (see the module)."""

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


def _rebuild(cls: type[_WithFields], message: str, fields: dict[str, Any]) -> _WithFields:
    return cls(message, **fields)


class SheetSyncError(_WithFields):
    """Root of every sheetsync error."""


class ComeBackLater(_WithFields):
    """Not an error: the run stops here and its task runs again in ``retry_after_s``."""

    retry_after_s: float


class ConfigError(SheetSyncError):
    """A setting is missing or malformed. The message names the variable."""


class ValidationError(SheetSyncError):
    """Bad input: a malformed id, an unknown question, a broken link."""


class AnswerError(ValidationError):
    """One answer cannot become a row: it is recorded FAILED on its own, the rest of its
    batch lands. The message names the answer, the question and the error class, never
    the value (``answer_id``, ``question_id`` are fields)."""


class CryptoError(SheetSyncError):
    """A personal-info token could not be encrypted or decrypted."""


class PiiKeysError(ConfigError, CryptoError):
    """``SHEETSYNC_PII_KEYS`` cannot serve: it is empty, holds a malformed key, or lacks
    the key a token names. The data is fine, the configuration is not: a flush retries,
    then parks a CONFIGURATION dead letter with an operator alert, and a replay delivers
    once the key is back. Never a credential's or an answer's failure (it is a
    :class:`CryptoError` too, so whoever sorts crypto failures must ask this first)."""


class MissingKeyError(PiiKeysError):
    """A token names a key that is not in ``SHEETSYNC_PII_KEYS`` (dropped too early, or
    this process has other keys than the web app)."""


class VersionOneTokenError(CryptoError):
    """A version 1 token (bound to no row) while ``SHEETSYNC_PII_ACCEPT_V1_TOKENS`` is
    off. Being bound to nothing, it may have been pasted here from anywhere: it fails
    where it is found (that answer, that credential), like a moved token. An upgrade
    from version 1 cannot meet it by surprise: a worker refuses to start while version 1
    refresh tokens are stored and the setting is off (:mod:`sheetsync.startup`)."""


class NotFoundError(SheetSyncError):
    """A row the caller named does not exist."""


class SheetsError(SheetSyncError):
    """A Google Sheets call failed. ``status`` is the HTTP status when there was one,
    ``google_code`` Google's status and reason codes as the message shows them
    (``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED (rateLimitExceeded)``, ``invalid_grant``).
    The message never holds Google's own text: it can quote the request's values."""

    status: int | None
    google_code: str | None = None


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


class ContentRefusedError(PermanentError):
    """Google refused the values of a write (a 400 caused by what the rows hold, or a
    request too large): the sheet is fine, some row is not. The flush finds the refused
    rows and fails them."""


class UnexplainedRefusalError(ContentRefusedError):
    """Google refused a write with a 4xx that names neither the credential, the access,
    the spreadsheet, the range nor the cell limit: most likely a row, possibly the
    request itself. The flush looks for the rows as for a content refusal, and stops
    looking (the whole buffer fails as a :class:`PermanentError`) when the first two
    rows it sends alone are both refused."""


class RateLimited(ComeBackLater):
    """No rate-limit slot is free; ``retry_after_s`` says when one frees."""


class HoldForBatch(ComeBackLater):
    """A burst is still arriving and the batch is far from full: look again in
    ``retry_after_s`` instead of appending a fraction of a batch now."""


class WaitForIntent(ComeBackLater):
    """An earlier run's append may still land: run again in ``retry_after_s``, once it
    can no longer land."""


class StaleRunError(SheetSyncError):
    """A flush run lost its lease or token to a newer run and must stop."""


class BackfillStalled(SheetSyncError):  # noqa: N818 (reads as the condition it is)
    """A backfill waited too long for the workers to drain a buffer. What it recorded is
    safe (ENQUEUED, delivered later); running it again resumes."""


class SheetFullError(PermanentError):
    """Google refused a write because the spreadsheet reached its cell limit. Not the
    rows' fault and not final: the flush rolls the link over to a new tab."""

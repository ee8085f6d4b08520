"""Errors as Google's APIs return them: ``{"error": {"code", "message", "status"}}``."""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any, Self

from sheets_emulator.errors import EmulatorError

#: Google's canonical status names by HTTP status.
CANONICAL_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

#: The messages Google sends with each status when nothing more specific applies.
DEFAULT_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: (
        "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        "login cookie or other valid authentication credential. "
        "See https://developers.google.com/identity/sign-in/web/devconsole-project."
    ),
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    500: "Internal error encountered.",
    502: "Bad Gateway",
    503: "The service is currently unavailable.",
    504: "The request timed out. Please try again.",
}


BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
_PAYLOAD_ERROR_PREFIXES = ("Invalid JSON payload received", "Invalid value at '")
_FIELD_IN_MESSAGE = re.compile(r"at '([^']+)'")


class ApiError(EmulatorError):
    """An answer other than 2xx, with the exact JSON body to send."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body

    @classmethod
    def google(cls, status: int, message: str | None = None, **extra: Any) -> Self:
        """The standard body for ``status``, with Google's default message unless given."""
        if message is None:
            message = DEFAULT_MESSAGES.get(status) or _reason_phrase(status)
        error: dict[str, Any] = {
            "code": status,
            "message": message,
            "status": CANONICAL_STATUS.get(status, "UNKNOWN"),
        }
        error.update(extra)
        return cls(status, {"error": error})

    @classmethod
    def invalid_argument(cls, message: str) -> ApiError:
        """A 400. A request Google could not parse (``Invalid JSON payload received...``,
        ``Invalid value at 'field'...``) carries a ``google.rpc.BadRequest`` in
        ``error.details``, as Google's front end sends it; Sheets' own checks do not."""
        if not message.startswith(_PAYLOAD_ERROR_PREFIXES):
            return cls.google(400, message)
        violation = {"description": message}
        field = _FIELD_IN_MESSAGE.search(message)
        if field is not None:
            violation = {"field": field.group(1), **violation}
        details = [{"@type": BAD_REQUEST_TYPE, "fieldViolations": [violation]}]
        return cls.google(400, message, details=details)

    @classmethod
    def unparsable_range(cls, range_text: str) -> ApiError:
        return cls.google(400, f"Unable to parse range: {range_text}")

    @classmethod
    def not_found(cls) -> ApiError:
        return cls.google(404)

    @classmethod
    def permission_denied(cls) -> ApiError:
        return cls.google(403)

    @classmethod
    def unauthenticated(cls) -> ApiError:
        return cls.google(401)


class OAuthError(EmulatorError):
    """A token-endpoint error: ``{"error": "invalid_grant", "error_description": ...}``."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.status = status
        self.body = {"error": error, "error_description": description}


def _reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"

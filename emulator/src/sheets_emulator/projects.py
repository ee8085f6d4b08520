"""Which Google Cloud project each OAuth client belongs to.

On Google, quotas belong to the Cloud project that owns the OAuth client an access token
was minted for. Every client is in the default project
(:data:`~sheets_emulator.quotas.PROJECT_NUMBER`) until the admin API puts it in another.
A token counts against the project its client is in when the request arrives.
"""

from __future__ import annotations

import re
from typing import Any

from sheets_emulator.errors import EmulatorConfigError
from sheets_emulator.quotas import PROJECT_NUMBER

_DIGITS = re.compile(r"[0-9]+")


class ProjectBook:
    """OAuth client id -> project number, for the clients not in the default project."""

    def __init__(self) -> None:
        self._project_of_client: dict[str, str] = {}

    def project_of(self, client_id: str) -> str:
        return self._project_of_client.get(client_id, PROJECT_NUMBER)

    def assignments(self) -> dict[str, str]:
        """Every client put in a project, ``{client_id: project_number}``."""
        return dict(sorted(self._project_of_client.items()))

    def numbers(self) -> set[str]:
        """The projects clients were put in."""
        return set(self._project_of_client.values())

    def update(self, changes: dict[str, Any]) -> None:
        """Put each client in its project (``None``: back in the default one); the others
        stay. All or nothing: a bad entry raises :class:`EmulatorConfigError`."""
        for client_id, number in changes.items():
            _check(client_id, number)
        for client_id, number in changes.items():
            if number is None:
                self._project_of_client.pop(client_id, None)
            else:
                self._project_of_client[client_id] = number


def _check(client_id: Any, number: Any) -> None:
    if not isinstance(client_id, str) or not client_id.strip():
        raise EmulatorConfigError(
            f"an OAuth client id must be a non-empty string, got {client_id!r}"
        )
    if number is not None and (not isinstance(number, str) or not _DIGITS.fullmatch(number)):
        raise EmulatorConfigError(
            f"the project number of client {client_id!r} must be a string of digits "
            f"(or null for the default project), got {number!r}"
        )

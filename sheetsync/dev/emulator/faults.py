"""Injected faults: the next N matching requests fail, hang, or are dropped.

A fault's ``kind`` is an endpoint name (``values.append``, ``spreadsheets.get``, ...),
``token`` (the OAuth token endpoint), ``read`` or ``write`` (every endpoint of that
class) or ``any`` (every Sheets API request, not the token endpoint). ``account``
limits it to one account's requests. Faults are used first in, first out.

Actions:

- ``error``: answer ``status`` with a Google-style body (429 gets the real quota body).
  The request does not reach the quota or the data.
- ``hang``: wait ``seconds``, then serve the request normally (so a client that timed
  out may find its write applied, like a slow Google).
- ``drop``: serve the request (quota, data: a write is committed), then close the
  connection without sending any response.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Every endpoint the emulator serves, with its quota class.
ENDPOINTS: dict[str, str] = {
    "spreadsheets.create": "write",
    "spreadsheets.get": "read",
    "spreadsheets.batchUpdate": "write",
    "values.get": "read",
    "values.append": "write",
    "values.update": "write",
}
FAULT_KINDS = (*ENDPOINTS, "token", "read", "write", "any")
FAULT_ACTIONS = ("error", "hang", "drop")
#: How long a ``hang`` lasts unless ``seconds`` is given.
DEFAULT_HANG_S = 30.0
#: The status of an ``error`` fault unless ``status`` is given.
DEFAULT_ERROR_STATUS = 503


@dataclass
class Fault:
    kind: str
    action: str
    count: int
    status: int = DEFAULT_ERROR_STATUS
    seconds: float = DEFAULT_HANG_S
    account: str | None = None

    def matches(self, endpoint: str, account: str | None) -> bool:
        if self.account is not None and self.account != account:
            return False
        if self.kind == endpoint:
            return True
        if endpoint == "token":
            return False
        return self.kind == "any" or self.kind == ENDPOINTS.get(endpoint)


def parse_fault(spec: Any) -> Fault:
    """Validate the JSON of ``POST /_emulator/faults``; raises ValueError naming the field."""
    if not isinstance(spec, dict):
        raise ValueError("a fault must be a JSON object")
    unknown = sorted(set(spec) - {"kind", "count", "action", "status", "seconds", "account"})
    if unknown:
        raise ValueError(f"unknown fault field(s): {', '.join(unknown)}")
    kind = spec.get("kind")
    if kind not in FAULT_KINDS:
        raise ValueError(f"kind must be one of {', '.join(FAULT_KINDS)}")
    action = spec.get("action", "error")
    if action not in FAULT_ACTIONS:
        raise ValueError(f"action must be one of {', '.join(FAULT_ACTIONS)}")
    count = spec.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError("count must be a positive integer")
    status = spec.get("status", DEFAULT_ERROR_STATUS)
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError("status must be an HTTP error status (400-599)")
    seconds = spec.get("seconds", DEFAULT_HANG_S)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ValueError("seconds must be a number >= 0")
    account = spec.get("account")
    if account is not None and not isinstance(account, str):
        raise ValueError("account must be a string")
    return Fault(kind, action, count, status, float(seconds), account)


class FaultBook:
    """Pending faults, used in the order they were added."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        self._faults.append(fault)

    def clear(self) -> None:
        self._faults.clear()

    def take(self, endpoint: str, account: str | None) -> Fault | None:
        """The first fault matching this request, used once (gone when its count is 0)."""
        for fault in self._faults:
            if fault.matches(endpoint, account):
                fault.count -= 1
                if fault.count == 0:
                    self._faults.remove(fault)
                return fault
        return None

    def pending(self) -> list[dict[str, Any]]:
        return [asdict(fault) for fault in self._faults]

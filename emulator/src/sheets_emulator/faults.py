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
- ``refuse`` (``values.append`` / ``values.update`` with ``match``): past the quota, answer
  Google's 400 for the first cell whose text contains ``match``; nothing is written.
- ``garble`` (``values.append`` / ``values.update``): serve the request (a write is
  committed) and answer 200 with ``updatedRange`` (``updates.updatedRange`` for append)
  replaced by ``range``, by default text with no rows a client could parse.

``match`` (those two endpoints only) makes a fault fire only on requests with a cell
whose text contains it; other requests pass and do not use up its count. ``refuse``
requires it. ``refuse`` and ``garble`` are used only by requests that got past the quota
(and, for ``garble``, were served), so a 429 never uses them up.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from sheets_emulator.api_errors import ApiError

#: Every endpoint the emulator serves, with its quota class.
ENDPOINTS: dict[str, str] = {
    "spreadsheets.create": "write",
    "spreadsheets.get": "read",
    # A POST that changes nothing: Google counts it with the reads.
    "spreadsheets.getByDataFilter": "read",
    "spreadsheets.batchUpdate": "write",
    "values.get": "read",
    "values.batchGet": "read",
    "values.batchUpdate": "write",
    "values.batchClear": "write",
    "values.clear": "write",
    "values.append": "write",
    "values.update": "write",
}
FAULT_KINDS = (*ENDPOINTS, "token", "read", "write", "any")
FAULT_ACTIONS = ("error", "hang", "drop", "refuse", "garble")
#: Actions taken when a request arrives, before the quota; the others come later.
ARRIVAL_ACTIONS = ("error", "hang", "drop")
#: The endpoints whose requests carry cell values (``match``, ``refuse``, ``garble``).
VALUE_ENDPOINTS = ("values.append", "values.update")
#: What a ``garble`` fault answers as ``updatedRange`` unless ``range`` is given: a sheet
#: name without cells, so no row numbers.
DEFAULT_GARBLED_RANGE = "'Sheet1'"
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
    match: str | None = None
    garbled_range: str | None = None

    def matches(self, endpoint: str, account: str | None, body: Any = None) -> bool:
        """Whether this fault applies to a request (``body``: its JSON, None if none)."""
        if self.account is not None and self.account != account:
            return False
        if not self._covers(endpoint):
            return False
        return self.match is None or matching_cell(body, self.match) is not None

    def _covers(self, endpoint: str) -> bool:
        if self.kind == endpoint:
            return True
        if endpoint == "token":
            return False
        return self.kind == "any" or self.kind == ENDPOINTS.get(endpoint)

    def as_json(self) -> dict[str, Any]:
        """The fault as ``GET /_emulator/faults`` lists it (``range`` as in the request)."""
        spec = asdict(self)
        spec["range"] = spec.pop("garbled_range")
        return spec


def matching_cell(body: Any, needle: str) -> tuple[int, int, str] | None:
    """The first cell (row, column, text) of the body's ``values`` containing ``needle``.

    Positions are those of the request's ``values`` as sent. Only text cells match.
    """
    values = body.get("values") if isinstance(body, dict) else None
    if not isinstance(values, list):
        return None
    for row_index, row in enumerate(values):
        if not isinstance(row, list):
            continue
        for col_index, cell in enumerate(row):
            if isinstance(cell, str) and needle in cell:
                return row_index, col_index, cell
    return None


def refusal(fault: Fault, body: Any) -> ApiError:
    """Google's 400 for the cell ``fault`` matched: the value in protobuf text format."""
    assert fault.match is not None
    found = matching_cell(body, fault.match)
    assert found is not None
    row, col, text = found
    return ApiError.invalid_argument(
        f"Invalid values[{row}][{col}]: string_value: {_text_format_string(text)}\n"
    )


def garble(fault: Fault, endpoint: str, result: dict[str, Any]) -> None:
    """Replace the ``updatedRange`` of a served ``values.append`` / ``values.update``."""
    target = result.get("updates") if endpoint == "values.append" else result
    if isinstance(target, dict):
        garbled = fault.garbled_range
        target["updatedRange"] = DEFAULT_GARBLED_RANGE if garbled is None else garbled


_C_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "'": "\\'", "\\": "\\\\"}


def _text_format_string(text: str) -> str:
    """A string as protobuf's text format prints it in Google's error messages: C escapes,
    and every byte of a non-ASCII character's UTF-8 as a 3-digit octal escape."""
    parts = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in _C_ESCAPES:
            parts.append(_C_ESCAPES[char])
        elif 0x20 <= byte < 0x7F:
            parts.append(char)
        else:
            parts.append(f"\\{byte:03o}")
    return '"' + "".join(parts) + '"'


def parse_fault(spec: Any) -> Fault:
    """Validate the JSON of ``POST /_emulator/faults``; raises ValueError naming the field."""
    if not isinstance(spec, dict):
        raise ValueError("a fault must be a JSON object")
    known = {"kind", "count", "action", "status", "seconds", "account", "match", "range"}
    unknown = sorted(set(spec) - known)
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
    match, garbled_range = _content_fields(spec, kind, action)
    return Fault(kind, action, count, status, float(seconds), account, match, garbled_range)


def _content_fields(spec: dict[str, Any], kind: str, action: str) -> tuple[str | None, str | None]:
    match = spec.get("match")
    garbled_range = spec.get("range", DEFAULT_GARBLED_RANGE if action == "garble" else None)
    needs_values = action in ("refuse", "garble") or match is not None
    if needs_values and kind not in VALUE_ENDPOINTS:
        raise ValueError(
            f"refuse, garble and match apply to kind {' or '.join(VALUE_ENDPOINTS)} only"
        )
    if match is not None and (not isinstance(match, str) or not match):
        raise ValueError("match must be a non-empty string")
    if action == "refuse" and match is None:
        raise ValueError("a refuse fault needs match: the text of the cell to refuse")
    if "range" in spec and action != "garble":
        raise ValueError("range applies to a garble fault only")
    if garbled_range is not None and not isinstance(garbled_range, str):
        raise ValueError("range must be a string")
    return match, garbled_range


class FaultBook:
    """Pending faults, used in the order they were added."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        self._faults.append(fault)

    def clear(self) -> None:
        self._faults.clear()

    def take(
        self,
        endpoint: str,
        account: str | None,
        body: Any = None,
        actions: Collection[str] = ARRIVAL_ACTIONS,
    ) -> Fault | None:
        """The first fault with one of ``actions`` matching this request, used once (gone
        when its count is 0). ``body`` is the request's JSON, for ``match``."""
        for fault in self._faults:
            if fault.action in actions and fault.matches(endpoint, account, body):
                fault.count -= 1
                if fault.count == 0:
                    self._faults.remove(fault)
                return fault
        return None

    def pending(self) -> list[dict[str, Any]]:
        return [fault.as_json() for fault in self._faults]

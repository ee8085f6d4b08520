"""Everything the emulator holds in memory. It lives on the server's event loop thread:
handlers change it between awaits, so no lock is needed and no other thread touches it.
"""

from __future__ import annotations

import time
import zoneinfo
from collections.abc import Callable
from typing import Any

from sheets_emulator.accounts import AccountBook
from sheets_emulator.api_errors import ApiError
from sheets_emulator.faults import FaultBook
from sheets_emulator.projects import ProjectBook
from sheets_emulator.quotas import QuotaBook, QuotaLimits
from sheets_emulator.sheets import (
    DEFAULT_COLUMN_COUNT,
    DEFAULT_ROW_COUNT,
    DEFAULT_TIME_ZONE,
    MAX_CELLS,
    MAX_REQUEST_BYTES,
    SheetLimits,
    Spreadsheet,
    new_spreadsheet_id,
)
from sheets_emulator.stats import Stats

#: Title of a spreadsheet created without one, as Google names it.
DEFAULT_SPREADSHEET_TITLE = "Untitled spreadsheet"


class EmulatorState:
    """Spreadsheets, accounts, projects, quotas, stats and faults of one emulator."""

    def __init__(
        self, limits: QuotaLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.initial_limits = limits or QuotaLimits()
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget everything, and go back to the quotas the emulator started with (and
        every OAuth client in the default project)."""
        self.spreadsheets: dict[str, Spreadsheet] = {}
        self.accounts = AccountBook()
        self.projects = ProjectBook()
        self.quotas = QuotaBook(self.initial_limits)
        self.stats = Stats()
        self.faults = FaultBook()
        self.sheet_limits = SheetLimits(MAX_CELLS)
        self.default_time_zone = DEFAULT_TIME_ZONE
        self.max_request_bytes = MAX_REQUEST_BYTES

    def settings(self) -> dict[str, Any]:
        """What ``/_emulator/settings`` shows and sets; :meth:`reset` restores them."""
        return {
            "max_cells": self.sheet_limits.max_cells,
            "time_zone": self.default_time_zone,
            "max_request_bytes": self.max_request_bytes,
        }

    def update_settings(self, changes: dict[str, Any]) -> None:
        """Change the cell limit (every spreadsheet), new spreadsheets' time zone or the
        largest request body the Sheets API takes."""
        unknown = set(changes) - {"max_cells", "time_zone", "max_request_bytes"}
        if unknown:
            raise ApiError.invalid_argument(f"Unknown settings: {', '.join(sorted(unknown))}")
        if "max_cells" in changes:
            max_cells = changes["max_cells"]
            if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
                raise ApiError.invalid_argument("'max_cells' must be a positive integer")
            self.sheet_limits.max_cells = max_cells
        if "time_zone" in changes:
            self.default_time_zone = check_time_zone(changes["time_zone"])
        if "max_request_bytes" in changes:
            size = changes["max_request_bytes"]
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ApiError.invalid_argument("'max_request_bytes' must be a positive integer")
            self.max_request_bytes = size

    def create_spreadsheet(
        self, owner: str, title: str | None, sheets: list[dict[str, Any]] | None
    ) -> Spreadsheet:
        """Create a spreadsheet from ``sheets`` (``properties`` dicts, as in the API).

        With no sheets it gets one ``Sheet1`` with gid 0, as Google does.
        """
        spreadsheet = Spreadsheet(
            new_spreadsheet_id(),
            title or DEFAULT_SPREADSHEET_TITLE,
            owner,
            sheets=[],
            time_zone=self.default_time_zone,
            limits=self.sheet_limits,
        )
        for properties in sheets or [{}]:
            grid = properties.get("gridProperties") or {}
            spreadsheet.add_sheet(
                title=properties.get("title"),
                sheet_id=_int_or_none(properties.get("sheetId")),
                index=_int_or_none(properties.get("index")),
                row_count=_int_or_none(grid.get("rowCount")) or DEFAULT_ROW_COUNT,
                column_count=_int_or_none(grid.get("columnCount")) or DEFAULT_COLUMN_COUNT,
            )
        self.spreadsheets[spreadsheet.spreadsheet_id] = spreadsheet
        return spreadsheet

    def spreadsheet_for(self, spreadsheet_id: str, account: str) -> Spreadsheet:
        """The spreadsheet, if ``account`` may use it: 404 when gone, 403 when not theirs."""
        spreadsheet = self.spreadsheets.get(spreadsheet_id)
        if spreadsheet is None:
            raise ApiError.not_found()
        if spreadsheet.owner != account:
            raise ApiError.permission_denied()
        return spreadsheet


def check_time_zone(value: Any) -> str:
    """An IANA time zone name, as Google accepts for ``timeZone``; 400 otherwise."""
    if isinstance(value, str) and value:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
        else:
            return value
    raise ApiError.invalid_argument(f"Invalid timeZone: {value!r}")


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ApiError.invalid_argument(f"Invalid value: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise ApiError.invalid_argument(f"Invalid value: {value!r}") from error

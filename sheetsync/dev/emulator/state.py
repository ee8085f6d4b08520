"""Everything the emulator holds in memory. It lives on the server's event loop thread:
handlers change it between awaits, so no lock is needed and no other thread touches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sheetsync.dev.emulator.accounts import AccountBook
from sheetsync.dev.emulator.api_errors import ApiError
from sheetsync.dev.emulator.faults import FaultBook
from sheetsync.dev.emulator.quotas import QuotaBook, QuotaLimits
from sheetsync.dev.emulator.sheets import (
    DEFAULT_COLUMN_COUNT,
    DEFAULT_ROW_COUNT,
    Spreadsheet,
    new_spreadsheet_id,
)
from sheetsync.dev.emulator.stats import Stats

#: Title of a spreadsheet created without one, as Google names it.
DEFAULT_SPREADSHEET_TITLE = "Untitled spreadsheet"


class EmulatorState:
    """Spreadsheets, accounts, quotas, stats and faults of one emulator."""

    def __init__(
        self, limits: QuotaLimits | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.initial_limits = limits or QuotaLimits()
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget everything, and go back to the quotas the emulator started with."""
        self.spreadsheets: dict[str, Spreadsheet] = {}
        self.accounts = AccountBook()
        self.quotas = QuotaBook(self.initial_limits)
        self.stats = Stats()
        self.faults = FaultBook()

    def create_spreadsheet(
        self, owner: str, title: str | None, sheets: list[dict[str, Any]] | None
    ) -> Spreadsheet:
        """Create a spreadsheet from ``sheets`` (``properties`` dicts, as in the API).

        With no sheets it gets one ``Sheet1`` with gid 0, as Google does.
        """
        spreadsheet = Spreadsheet(
            new_spreadsheet_id(), title or DEFAULT_SPREADSHEET_TITLE, owner, sheets=[]
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


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ApiError.invalid_argument(f"Invalid value: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise ApiError.invalid_argument(f"Invalid value: {value!r}") from error

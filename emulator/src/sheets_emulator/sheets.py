"""Spreadsheets and their sheets, in memory.

A sheet keeps only the rows that hold data (``rows``), trimmed of trailing empty cells
and rows after every write, so ``len(rows)`` is the row after the last non-empty one.
Its grid size (``row_count`` x ``column_count``) is separate, as in Sheets: it counts
toward the 10,000,000-cell limit even when empty.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from sheets_emulator.a1 import A1Range, RangeParseError, parse_a1
from sheets_emulator.api_errors import ApiError
from sheets_emulator.cells import KEEP, CellInput, CellValue, Formula, Scalar
from sheets_emulator.formats import FormatBook
from sheets_emulator.formulas import SheetView, evaluate
from sheets_emulator.numfmt import NumberFormat

#: Grid size of a new sheet, as Google makes it.
DEFAULT_ROW_COUNT = 1000
DEFAULT_COLUMN_COUNT = 26
#: Google's limit on the cells (grid size, not data) of one spreadsheet.
MAX_CELLS = 10_000_000
#: The largest request body Google's front end takes: above it, a 400 INVALID_ARGUMENT
#: "Request payload size exceeds the limit: 10485760 bytes." (Google APIs' documented
#: 10 MiB), and nothing is written.
MAX_REQUEST_BYTES = 10 * 1024 * 1024
#: The time zone of a new spreadsheet (Google's for the recorded accounts).
DEFAULT_TIME_ZONE = "Etc/GMT"


def cell_limit_message(max_cells: int) -> str:
    """Google's words when a change would pass the cell limit."""
    return (
        f"This action would increase the number of cells in the workbook above the limit "
        f"of {max_cells} cells."
    )


@dataclass
class SheetLimits:
    """Settings every spreadsheet of one emulator shares (tests may lower ``max_cells``)."""

    max_cells: int = MAX_CELLS


Row = list[CellValue | None]


@dataclass
class Sheet:
    sheet_id: int
    title: str
    row_count: int = DEFAULT_ROW_COUNT
    column_count: int = DEFAULT_COLUMN_COUNT
    rows: list[Row] = field(default_factory=list)
    formats: FormatBook = field(default_factory=FormatBook)
    hidden: bool = False
    frozen: dict[str, int] = field(default_factory=dict)

    def properties(self, index: int) -> dict[str, Any]:
        properties: dict[str, Any] = {
            "sheetId": self.sheet_id,
            "title": self.title,
            "index": index,
            "sheetType": "GRID",
            "gridProperties": {"rowCount": self.row_count, "columnCount": self.column_count},
        }
        for name, count in self.frozen.items():
            if count:
                properties["gridProperties"][name] = count
        if self.hidden:
            properties["hidden"] = True
        return properties

    def number_format(self, row: int, col: int) -> NumberFormat | None:
        return self.formats.at(row, col)

    def cell(self, row: int, col: int) -> CellValue | None:
        if row >= len(self.rows):
            return None
        cells = self.rows[row]
        return cells[col] if col < len(cells) else None

    @property
    def data_columns(self) -> int:
        """One past the rightmost column holding data."""
        return max((len(row) for row in self.rows), default=0)

    def view(self) -> SheetView:
        return SheetView(self.cell, len(self.rows), self.data_columns)

    def evaluate(self, formula: Formula) -> Scalar:
        return evaluate(formula, self.view())

    def block(self, start_row: int, start_col: int, end_row: int, end_col: int) -> list[Row]:
        """The stored cells of a rectangle, trailing empty cells and rows trimmed."""
        block: list[Row] = []
        for cells in self.rows[start_row:end_row]:
            block.append(_trimmed(cells[start_col:end_col]))
        while block and not block[-1]:
            block.pop()
        return block

    def write(
        self,
        start_row: int,
        start_col: int,
        values: list[list[CellInput]],
        typed_formats: dict[tuple[int, int], NumberFormat] | None = None,
    ) -> None:
        """Write a block of values; the caller has grown the grid to fit it.

        ``typed_formats`` (offsets in the block) are the formats of dates typed as
        USER_ENTERED; a cell already formatted as a date keeps its own.
        """
        for (row_offset, col_offset), number_format in (typed_formats or {}).items():
            row, col = start_row + row_offset, start_col + col_offset
            current = self.formats.at(row, col)
            if current is None or not current.is_date:
                self.formats.set_cell(row, col, number_format)
        for offset, new_cells in enumerate(values):
            row_index = start_row + offset
            while len(self.rows) <= row_index:
                self.rows.append([])
            cells = self.rows[row_index]
            for col_offset, value in enumerate(new_cells):
                if value is KEEP:
                    continue
                col = start_col + col_offset
                if col >= len(cells):
                    if value is None:
                        continue
                    cells.extend([None] * (col + 1 - len(cells)))
                cells[col] = value
            self.rows[row_index] = _trimmed(cells)
        self._drop_trailing_empty_rows()

    def insert_rows(self, at: int, count: int) -> None:
        """Insert ``count`` empty rows before row ``at``, as Sheets' INSERT_ROWS does."""
        if at < len(self.rows):
            self.rows[at:at] = [[] for _ in range(count)]
        self.formats.insert("ROWS", at, count)
        self.row_count += count

    def insert_columns(self, at: int, count: int) -> None:
        """Insert ``count`` empty columns before column ``at``; cells right of it move right."""
        for index, cells in enumerate(self.rows):
            if at < len(cells):
                self.rows[index] = [*cells[:at], *([None] * count), *cells[at:]]
        self.formats.insert("COLUMNS", at, count)
        self.column_count += count

    def delete_rows(self, start: int, end: int) -> None:
        """Delete rows ``start`` to ``end - 1``: the rows below move up and the grid shrinks."""
        del self.rows[start:end]
        self.formats.delete("ROWS", start, end)
        self.row_count -= end - start
        self._drop_trailing_empty_rows()

    def delete_columns(self, start: int, end: int) -> None:
        """Delete columns ``start`` to ``end - 1``: cells right of them move left."""
        for index, cells in enumerate(self.rows):
            self.rows[index] = _trimmed([*cells[:start], *cells[end:]])
        self.formats.delete("COLUMNS", start, end)
        self.column_count -= end - start
        self._drop_trailing_empty_rows()

    def move_rows(self, start: int, end: int, destination: int) -> None:
        """Move rows ``start..end-1`` before row ``destination`` (counted before the move)."""
        height = max(len(self.rows), destination)
        rows = self.rows + [[] for _ in range(height - len(self.rows))]
        block = rows[start:end]
        del rows[start:end]
        at = destination if destination <= start else destination - (end - start)
        rows[at:at] = block
        self.rows = rows
        self.formats.move("ROWS", start, end, destination)
        self._drop_trailing_empty_rows()

    def move_columns(self, start: int, end: int, destination: int) -> None:
        """Move columns ``start..end-1`` before ``destination`` (counted before the move)."""
        at = destination if destination <= start else destination - (end - start)
        for index, cells in enumerate(self.rows):
            padded = cells + [None] * (max(end, destination) - len(cells))
            block = padded[start:end]
            del padded[start:end]
            padded[at:at] = block
            self.rows[index] = _trimmed(padded)
        self.formats.move("COLUMNS", start, end, destination)
        self._drop_trailing_empty_rows()

    def resize(self, row_count: int, column_count: int) -> None:
        """Set the grid size; cells and formats beyond a smaller grid are gone."""
        if row_count < self.row_count:
            del self.rows[row_count:]
            self.formats.truncate("ROWS", row_count)
        if column_count < self.column_count:
            self.rows = [_trimmed(cells[:column_count]) for cells in self.rows]
            self.formats.truncate("COLUMNS", column_count)
        self.formats.grow("ROWS", self.row_count, row_count)
        self.formats.grow("COLUMNS", self.column_count, column_count)
        self.row_count, self.column_count = row_count, column_count
        self._drop_trailing_empty_rows()

    def _drop_trailing_empty_rows(self) -> None:
        while self.rows and not self.rows[-1]:
            self.rows.pop()


def _trimmed(cells: Row) -> Row:
    end = len(cells)
    while end and cells[end - 1] is None:
        end -= 1
    return cells if end == len(cells) else cells[:end]


@dataclass
class Spreadsheet:
    spreadsheet_id: str
    title: str
    owner: str
    sheets: list[Sheet]
    locale: str = "en_US"
    time_zone: str = DEFAULT_TIME_ZONE
    limits: SheetLimits = field(default_factory=SheetLimits)

    def resource(self, base_url: str) -> dict[str, Any]:
        """The spreadsheet as spreadsheets.get returns it (no grid data)."""
        return {
            "spreadsheetId": self.spreadsheet_id,
            "properties": {
                "title": self.title,
                "locale": self.locale,
                "autoRecalc": "ON_CHANGE",
                "timeZone": self.time_zone,
            },
            "sheets": [
                {"properties": sheet.properties(index)} for index, sheet in enumerate(self.sheets)
            ],
            "spreadsheetUrl": f"{base_url}/_emulator/spreadsheets/{self.spreadsheet_id}",
        }

    def sheet_by_id(self, sheet_id: int) -> Sheet | None:
        return next((sheet for sheet in self.sheets if sheet.sheet_id == sheet_id), None)

    def sheet_by_title(self, title: str) -> Sheet | None:
        folded = title.casefold()
        return next((sheet for sheet in self.sheets if sheet.title.casefold() == folded), None)

    def total_cells(self) -> int:
        return sum(sheet.row_count * sheet.column_count for sheet in self.sheets)

    def resolve(self, range_text: str) -> tuple[Sheet, A1Range]:
        """The sheet and bounds ``range_text`` names; 400 "Unable to parse range" if none."""
        try:
            parsed = parse_a1(range_text, [sheet.title for sheet in self.sheets])
        except RangeParseError as error:
            raise ApiError.unparsable_range(range_text) from error
        if parsed.sheet_title is None:
            return self.sheets[0], parsed
        sheet = self.sheet_by_title(parsed.sheet_title)
        if sheet is None:
            raise ApiError.unparsable_range(range_text)
        return sheet, parsed

    def grow(self, sheet: Sheet, rows: int, columns: int) -> None:
        """Enlarge ``sheet``'s grid to at least ``rows`` x ``columns`` within the cell limit."""
        new_rows = max(sheet.row_count, rows)
        new_columns = max(sheet.column_count, columns)
        added = new_rows * new_columns - sheet.row_count * sheet.column_count
        self.check_cell_limit(added)
        sheet.resize(new_rows, new_columns)

    def check_cell_limit(self, added_cells: int) -> None:
        max_cells = self.limits.max_cells
        if added_cells > 0 and self.total_cells() + added_cells > max_cells:
            raise ApiError.invalid_argument(cell_limit_message(max_cells))

    def add_sheet(
        self,
        title: str | None = None,
        sheet_id: int | None = None,
        index: int | None = None,
        row_count: int = DEFAULT_ROW_COUNT,
        column_count: int = DEFAULT_COLUMN_COUNT,
    ) -> Sheet:
        """Add a sheet (Google's checks and messages); raises 400 :class:`ApiError`."""
        if title is None:
            number = len(self.sheets) + 1
            while self.sheet_by_title(f"Sheet{number}") is not None:
                number += 1
            title = f"Sheet{number}"
        if not title.strip():
            raise ApiError.invalid_argument("The sheet name cannot be empty.")
        if self.sheet_by_title(title) is not None:
            raise ApiError.invalid_argument(
                f'A sheet with the name "{title}" already exists. Please enter another name.'
            )
        if sheet_id is None:
            sheet_id = 0 if not self.sheets else _new_sheet_id(self)
        elif sheet_id < 0 or self.sheet_by_id(sheet_id) is not None:
            raise ApiError.invalid_argument(
                f"A sheet with the id {sheet_id} already exists or the id is invalid."
            )
        if row_count < 1 or column_count < 1:
            raise ApiError.invalid_argument("The grid must have at least one row and column.")
        self.check_cell_limit(row_count * column_count)
        sheet = Sheet(sheet_id, title, row_count, column_count)
        position = len(self.sheets) if index is None else max(0, min(index, len(self.sheets)))
        self.sheets.insert(position, sheet)
        return sheet

    def delete_sheet(self, sheet_id: int) -> Sheet:
        sheet = self.sheet_by_id(sheet_id)
        if sheet is None:
            raise ApiError.invalid_argument(f"No grid with id: {sheet_id}")
        if len(self.sheets) == 1:
            raise ApiError.invalid_argument("You can't remove all the sheets in a document.")
        self.sheets.remove(sheet)
        return sheet


def _new_sheet_id(spreadsheet: Spreadsheet) -> int:
    while True:
        candidate = secrets.randbelow(2**31 - 1) + 1
        if spreadsheet.sheet_by_id(candidate) is None:
            return candidate


def new_spreadsheet_id() -> str:
    """A 44-character id shaped like Google's."""
    return secrets.token_urlsafe(33)

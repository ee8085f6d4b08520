"""How values.append finds the "table" it appends below.

Google documents only that the range "is used to search for existing data and find a
table within that range" and that values go "to the next row of the table, starting with
the first column of the table". The emulator's model of it:

1. The anchor is the last non-empty cell inside the range: its bottom row with data, and
   the rightmost cell of that row. The recording ``WorksheetTest.test_append_row_with_
   empty_value`` shows it: with A1 and C1 filled and B1 blank, an append to ``'Sheet1'``
   got ``tableRange: Sheet1!C1`` and landed at ``C2:E2``. When the range holds no data,
   there is no table and the values go to the range's first cell: in gspread's recording
   ``WorksheetTest.test_insert_row`` (its ``insert_row``: insertDimension, then an append
   to the new blank row), appends to a blank A2 and a blank A1, with data right above
   and below, got no ``tableRange`` and landed on A2 and A1.
2. The table is the region of data around the anchor, grown a row or a column at a time
   while the row or column next to it (corners included) has a non-empty cell, like a
   spreadsheet's "current region". A blank row or column therefore ends a table, so an
   append to ``A1`` lands in the first blank row below A1's table, not below later data.
3. Values go to the row after the table, from the table's first column.

Step 2's growth order and the corner rule are approximations: no recording shows tables
that touch only at a corner.
"""

from __future__ import annotations

from dataclasses import dataclass

from sheets_emulator.a1 import A1Range, format_range
from sheets_emulator.sheets import Sheet


@dataclass(frozen=True)
class Table:
    """A block of data: rows ``top`` to ``bottom - 1``, columns ``left`` to ``right - 1``."""

    top: int
    left: int
    bottom: int
    right: int

    def a1(self, sheet_title: str) -> str:
        return format_range(sheet_title, self.top, self.left, self.bottom, self.right)


def find_table(sheet: Sheet, parsed: A1Range) -> Table | None:
    """The table an append to ``parsed`` writes below, or None when there is no data."""
    anchor = _last_cell_inside(sheet, parsed)
    if anchor is None:
        return None
    return _region_around(sheet, *anchor)


def _last_cell_inside(sheet: Sheet, parsed: A1Range) -> tuple[int, int] | None:
    end_row = min(_end(parsed.end_row), len(sheet.rows))
    for row in range(end_row - 1, parsed.start_row - 1, -1):
        cells = sheet.rows[row]
        for col in range(min(_end(parsed.end_col), len(cells)) - 1, parsed.start_col - 1, -1):
            if cells[col] is not None:
                return row, col
    return None


def _region_around(sheet: Sheet, row: int, col: int) -> Table:
    top, left, bottom, right = row, col, row + 1, col + 1
    grown = True
    while grown:
        grown = False
        while top > 0 and _row_has_data(sheet, top - 1, left - 1, right + 1):
            top, grown = top - 1, True
        while _row_has_data(sheet, bottom, left - 1, right + 1):
            bottom, grown = bottom + 1, True
        while left > 0 and _column_has_data(sheet, left - 1, top - 1, bottom + 1):
            left, grown = left - 1, True
        while _column_has_data(sheet, right, top - 1, bottom + 1):
            right, grown = right + 1, True
    return Table(top, left, bottom, right)


def _row_has_data(sheet: Sheet, row: int, start_col: int, end_col: int) -> bool:
    if row >= len(sheet.rows):
        return False
    return any(cell is not None for cell in sheet.rows[row][max(start_col, 0) : end_col])


def _column_has_data(sheet: Sheet, col: int, start_row: int, end_row: int) -> bool:
    return any(
        sheet.cell(row, col) is not None
        for row in range(max(start_row, 0), min(end_row, len(sheet.rows)))
    )


def _end(bound: int | None) -> int:
    """An open end ("to the edge of the grid") as a number no index reaches."""
    return bound if bound is not None else 2**62

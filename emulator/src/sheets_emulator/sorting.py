"""sortRange: reorder the rows of a block by the values in some of its columns.

As Google sorts: only the block's cells move (cells left and right of it stay), equal
rows keep their order, and blank cells go last in both orders. Ascending puts numbers
first, then text, then booleans (FALSE before TRUE); descending is the exact reverse,
blanks still last.

Approximated: Google compares text with the spreadsheet locale's collation (ICU); here
text is compared by code point after case folding, so accented letters and punctuation
can order differently. Formulas sort by their value, but their references are not
rewritten when rows move (Google rewrites them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sheets_emulator.cells import CellInput, CellValue, Formula
from sheets_emulator.sheets import Sheet

#: How a value orders: (kind rank, comparable value).
SortKey = tuple[int, float | str]

_NUMBER, _TEXT, _BOOLEAN = 0, 1, 2


@dataclass(frozen=True)
class SortSpec:
    column: int
    descending: bool = False


def sort_rows(
    sheet: Sheet, top: int, left: int, bottom: int, right: int, specs: Sequence[SortSpec]
) -> None:
    """Sort rows ``top..bottom-1`` of columns ``left..right-1`` by ``specs`` (first wins)."""
    # Rows and columns past the data are blank: they sort last and stay where they are.
    bottom = min(bottom, len(sheet.rows))
    right = min(right, sheet.data_columns)
    if bottom - top < 2 or right <= left:
        return
    width = right - left
    blocks: list[list[CellValue | None]] = []
    for cells in sheet.rows[top:bottom]:
        block = cells[left:right]
        blocks.append(block + [None] * (width - len(block)))
    order = list(range(len(blocks)))
    for spec in reversed(specs):  # stable sorts, least significant spec first
        if not left <= spec.column < right:
            continue  # a column past the data is blank in every row
        keys = [_sort_key(sheet, block[spec.column - left]) for block in blocks]
        filled = [(key, index) for index in order if (key := keys[index]) is not None]
        filled.sort(key=lambda pair: pair[0], reverse=spec.descending)
        order = [index for _, index in filled] + [i for i in order if keys[i] is None]
    rows: list[list[CellInput]] = [list(blocks[index]) for index in order]
    sheet.write(top, left, rows)


def _sort_key(sheet: Sheet, cell: CellValue | None) -> SortKey | None:
    value = sheet.evaluate(cell) if isinstance(cell, Formula) else cell
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return (_BOOLEAN, float(value))
    if isinstance(value, int | float):
        return (_NUMBER, value)
    return (_TEXT, value.casefold())

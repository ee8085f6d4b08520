"""A1 notation: parse ranges the way the Sheets API accepts them, and format them back.

Supported forms: ``Sheet1``, ``Sheet1!A1``, ``Sheet1!A1:C3``, ``Sheet1!A:A``,
``Sheet1!A5:A``, ``Sheet1!1:1``, ``'It''s here'!A1`` and ``A1:B2`` (no sheet: the
first sheet). Rows and columns are 0-based and end-exclusive inside this module; an
end of ``None`` means "to the edge of the grid".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from sheets_emulator.errors import EmulatorError

#: The last column Google Sheets allows (ZZZ).
MAX_COLUMNS = 18_278
#: Rows beyond this cannot exist: 10,000,000 cells in one column.
MAX_ROWS = 10_000_000

_REF = re.compile(r"^([A-Za-z]{0,3})([0-9]{0,8})$")
_PLAIN_TITLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOOKS_LIKE_REF = re.compile(r"^([A-Za-z]{1,3}[0-9]+|[Rr][0-9]+[Cc][0-9]+)$")


class RangeParseError(EmulatorError, ValueError):
    """The text is not a range the Sheets API would accept."""


@dataclass(frozen=True)
class A1Range:
    """A parsed range, not yet checked against a spreadsheet.

    ``sheet_title`` is ``None`` when the text named only cells (the first sheet), and
    ``cells_given`` is false when it named only a sheet (the whole grid). ``single_cell``
    is true for one cell without a colon (``A1``): writes treat it as where to start.
    """

    sheet_title: str | None
    start_row: int = 0
    start_col: int = 0
    end_row: int | None = None
    end_col: int | None = None
    cells_given: bool = False
    single_cell: bool = False


def column_letters(index: int) -> str:
    """0 -> ``A``, 25 -> ``Z``, 26 -> ``AA``."""
    if index < 0:
        raise ValueError(f"negative column index {index}")
    letters = ""
    number = index + 1
    while number:
        number, remainder = divmod(number - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters


def column_index(letters: str) -> int:
    """``A`` -> 0, ``AA`` -> 26 (case-insensitive)."""
    number = 0
    for char in letters.upper():
        number = number * 26 + (ord(char) - ord("A") + 1)
    return number - 1


def quote_sheet_title(title: str) -> str:
    """The title as it appears in a range: quoted (``'My Sheet'``) when it must be."""
    if _PLAIN_TITLE.match(title) and not _LOOKS_LIKE_REF.match(title):
        return title
    return "'" + title.replace("'", "''") + "'"


def format_range(title: str, start_row: int, start_col: int, end_row: int, end_col: int) -> str:
    """``Sheet1!A11:F20`` for 0-based, end-exclusive bounds; a single cell as ``Sheet1!A1``."""
    start = f"{column_letters(start_col)}{start_row + 1}"
    prefix = f"{quote_sheet_title(title)}!"
    if end_row - start_row <= 1 and end_col - start_col <= 1:
        return prefix + start
    return f"{prefix}{start}:{column_letters(end_col - 1)}{end_row}"


def split_sheet_part(text: str) -> tuple[str | None, str | None]:
    """Split ``'It''s'!A1`` into (``It's``, ``A1``); a bare part comes back as (None, part).

    A bare part is ambiguous (a title or cells); :func:`parse_a1` resolves it.
    """
    if text.startswith("'"):
        title, position = _read_quoted(text)
        rest = text[position:]
        if rest == "":
            return title, None
        if not rest.startswith("!"):
            raise RangeParseError(text)
        return title, rest[1:]
    title, bang, cells = text.rpartition("!")
    if not bang:
        return None, text
    if not title:
        raise RangeParseError(text)
    return title, cells


def _read_quoted(text: str) -> tuple[str, int]:
    """Read a quoted title starting at ``text[0] == "'"``; return it and the index after it."""
    chars: list[str] = []
    position = 1
    while position < len(text):
        char = text[position]
        if char == "'":
            if text[position + 1 : position + 2] == "'":
                chars.append("'")
                position += 2
                continue
            if not chars:
                raise RangeParseError(text)
            return "".join(chars), position + 1
        chars.append(char)
        position += 1
    raise RangeParseError(text)


def parse_cells(cells: str) -> A1Range:
    """Parse the part after ``!``: ``A1``, ``A1:C3``, ``A:A``, ``A5:A`` or ``1:1``."""
    start_text, colon, end_text = cells.partition(":")
    start_col, start_row = _parse_ref(start_text, cells)
    if not colon:
        if start_col is None or start_row is None:
            raise RangeParseError(cells)
        return A1Range(None, start_row, start_col, start_row + 1, start_col + 1, True, True)
    end_col, end_row = _parse_ref(end_text, cells)
    start_kind = _ref_kind(start_col, start_row)
    end_kind = _ref_kind(end_col, end_row)
    if {start_kind, end_kind} == {"column", "row"}:
        raise RangeParseError(cells)  # "A:5" mixes a whole column with a whole row
    first_row = start_row if start_row is not None else 0
    first_col = start_col if start_col is not None else 0
    last_row = None if end_row is None else end_row + 1
    last_col = None if end_col is None else end_col + 1
    if last_row is not None and last_row <= first_row:
        first_row, last_row = last_row - 1, first_row + 1
    if last_col is not None and last_col <= first_col:
        first_col, last_col = last_col - 1, first_col + 1
    return A1Range(None, first_row, first_col, last_row, last_col, True)


def _ref_kind(column: int | None, row: int | None) -> str:
    if column is None:
        return "row"
    return "column" if row is None else "cell"


def _parse_ref(text: str, whole: str) -> tuple[int | None, int | None]:
    """``B7`` -> (1, 6); ``B`` -> (1, None); ``7`` -> (None, 6). Empty is an error."""
    match = _REF.match(text)
    if not text or match is None:
        raise RangeParseError(whole)
    letters, digits = match.groups()
    column = column_index(letters) if letters else None
    row = int(digits) - 1 if digits else None
    if row is not None and not 0 <= row < MAX_ROWS:
        raise RangeParseError(whole)
    if column is not None and column >= MAX_COLUMNS:
        raise RangeParseError(whole)
    return column, row


def parse_a1(text: str, sheet_titles: list[str]) -> A1Range:
    """Parse ``text`` given the spreadsheet's sheet titles (a bare title names a sheet).

    Raises :class:`RangeParseError` for garbage; the caller checks that the title exists.
    """
    if not text:
        raise RangeParseError(text)
    title, cells = split_sheet_part(text)
    if title is None:
        assert cells is not None
        if cells.casefold() in {title.casefold() for title in sheet_titles}:
            return A1Range(cells)
        return parse_cells(cells)
    if cells is None:
        return A1Range(title)
    return dataclasses.replace(parse_cells(cells), sheet_title=title)

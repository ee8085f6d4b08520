"""Unit tests of the emulator's pure parts: A1 notation, cell input, formulas, windows."""

from __future__ import annotations

import pytest

from sheets_emulator import EmulatorConfigError, EmulatorError
from sheets_emulator.a1 import (
    A1Range,
    RangeParseError,
    column_index,
    column_letters,
    format_range,
    parse_a1,
    quote_sheet_title,
)
from sheets_emulator.cells import KEEP, Formula, format_number, parse_input, utf16_length
from sheets_emulator.formulas import SheetView, evaluate
from sheets_emulator.quotas import QuotaLimits
from sheets_emulator.sheets import Sheet
from sheets_emulator.stats import max_in_window
from sheets_emulator.tables import Table, find_table

TITLES = ["Sheet1", "It's here", "My Sheet"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sheet1", A1Range("Sheet1")),
        ("sheet1", A1Range("sheet1")),
        ("Sheet1!A1", A1Range("Sheet1", 0, 0, 1, 1, True, True)),
        ("Sheet1!A1:C3", A1Range("Sheet1", 0, 0, 3, 3, True)),
        ("Sheet1!A:A", A1Range("Sheet1", 0, 0, None, 1, True)),
        ("Sheet1!A5:A", A1Range("Sheet1", 4, 0, None, 1, True)),
        ("Sheet1!1:1", A1Range("Sheet1", 0, 0, 1, None, True)),
        ("'It''s here'!A1", A1Range("It's here", 0, 0, 1, 1, True, True)),
        ("'My Sheet'", A1Range("My Sheet")),
        ("A1:B2", A1Range(None, 0, 0, 2, 2, True)),
        ("c3:a1", A1Range(None, 0, 0, 3, 3, True)),
        ("AA10:AB11", A1Range(None, 9, 26, 11, 28, True)),
    ],
)
def test_parse_a1(text: str, expected: A1Range) -> None:
    assert parse_a1(text, TITLES) == expected


@pytest.mark.parametrize(
    "text", ["", "!A1", "Sheet1!", "Sheet1!A1:", "Sheet1!A:5", "'open!A1", "''!A1", "A0", "??"]
)
def test_parse_a1_refuses_garbage(text: str) -> None:
    with pytest.raises(RangeParseError):
        parse_a1(text, TITLES)


def test_columns_and_formatting() -> None:
    assert [column_letters(i) for i in (0, 25, 26, 701, 702)] == ["A", "Z", "AA", "ZZ", "AAA"]
    assert all(column_index(column_letters(i)) == i for i in range(2000))
    assert format_range("Sheet1", 10, 0, 20, 6) == "Sheet1!A11:F20"
    assert format_range("Sheet1", 0, 0, 1, 1) == "Sheet1!A1"
    assert format_range("My Sheet", 0, 0, 2, 2) == "'My Sheet'!A1:B2"
    assert quote_sheet_title("It's") == "'It''s'"
    assert quote_sheet_title("A1") == "'A1'"  # would read as a cell
    assert quote_sheet_title("시트") == "'시트'"


def test_raw_and_user_entered_input() -> None:
    assert parse_input("=1+1", "RAW") == "=1+1"
    assert parse_input("=1+1", "USER_ENTERED") == Formula("=1+1")
    assert parse_input("0012", "USER_ENTERED") == 12
    assert parse_input("-2.5", "USER_ENTERED") == -2.5
    assert parse_input("true", "USER_ENTERED") is True
    assert parse_input("'0012", "USER_ENTERED") == "0012"
    assert parse_input("+1 555 0100", "USER_ENTERED") == "+1 555 0100"
    assert parse_input("", "RAW") is None
    assert parse_input(None, "RAW") is KEEP
    assert [format_number(n) for n in (12, 12.0, 0.5, 1 / 3, 1e20)] == [
        "12",
        "12",
        "0.5",
        "0.3333333333",
        "1E+20",
    ]


def _sheet(rows: list[list[object]]) -> SheetView:
    def cell(row: int, col: int) -> object:
        try:
            return rows[row][col]
        except IndexError:
            return None

    return SheetView(cell, len(rows), max(len(r) for r in rows))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("formula", "value"),
    [
        ("=1+2*3", 7),
        ("=(1+2)*3", 9),
        ("=2^10", 1024),
        ("=-A1", -2),
        ('="a"&"b"&1', "ab1"),
        ("=SUM(A1:A3)", 6),
        ("=SUM(A:A, 10)", 16),
        ("=AVERAGE(A1:A3)", 2),
        ("=MAX(A1:B3)", 4),
        ('=HYPERLINK("http://x","y")', "y"),
        ("=LEN(B1)", 5),
        ("=B2", 4),
        ("=1/0", "#DIV/0!"),
        ("=NOPE(1)", "#NAME?"),
        ("=1+", "#ERROR!"),
        ("=B1*2", "#VALUE!"),
        ("=Other!A1", "#REF!"),
        ("=C1", "#REF!"),
    ],
)
def test_formulas(formula: str, value: object) -> None:
    rows: list[list[object]] = [
        [2, "hello", Formula("=C1")],
        [1, Formula("=A1*2")],
        [3],
    ]
    assert evaluate(Formula(formula), _sheet(rows)) == value


def test_max_in_window_is_exact() -> None:
    assert max_in_window([], 60) == 0
    assert max_in_window([0, 59.9, 60, 119.9], 60) == 2
    assert max_in_window([0, 1, 2, 3, 60, 61], 60) == 4
    assert max_in_window([5, 1, 3, 2], 2) == 2
    assert max_in_window([0, 0, 0], 1) == 3


def test_quota_limits_validate() -> None:
    assert QuotaLimits().updated({"window_s": 1}).window_s == 1.0
    with pytest.raises(EmulatorConfigError, match="write_per_account"):
        QuotaLimits(write_per_account=0)
    with pytest.raises(EmulatorConfigError, match="unknown"):
        QuotaLimits().updated({"reads": 5})
    with pytest.raises(EmulatorError):
        QuotaLimits().updated({"read_per_project": 2.5})


def _sheet_with(cells: dict[str, str]) -> Sheet:
    sheet = Sheet(0, "Sheet1")
    for ref, value in cells.items():
        parsed = parse_a1(ref, ["Sheet1"])
        sheet.write(parsed.start_row, parsed.start_col, [[value]])
    return sheet


@pytest.mark.parametrize(
    ("cells", "range_", "table"),
    [
        ({}, "Sheet1!A1", None),
        ({"A1": "h", "B1": "h", "A2": "x", "B3": "y"}, "Sheet1!A1", Table(0, 0, 3, 2)),
        # A blank row ends a table: from A1 the first, from the whole sheet the last.
        ({"A1": "h", "A2": "x", "A4": "y", "B5": "z"}, "Sheet1!A1", Table(0, 0, 2, 1)),
        ({"A1": "h", "A2": "x", "A4": "y", "B5": "z"}, "Sheet1", Table(3, 0, 5, 2)),
        ({"A1": "h", "A2": "x", "A4": "y", "B5": "z"}, "Sheet1!A:A", Table(3, 0, 5, 2)),
        # A blank column ends one too (the recorded case: A1 and C1 with B1 blank).
        ({"A1": "a", "C1": "c"}, "Sheet1", Table(0, 2, 1, 3)),
        ({"A1": "a", "C1": "c"}, "Sheet1!A1", Table(0, 0, 1, 1)),
        # No data in the range: no table, even with data right below (as Google answered
        # appends to a blank A1 and A2 in gspread's recording WorksheetTest.test_insert_row).
        ({"B3": "b", "C4": "c"}, "Sheet1!A1", None),
        ({"A2": "a", "B2": "b"}, "Sheet1!A1", None),
        ({"C3": "c", "A6": "a"}, "Sheet1!A1:B2", None),
        ({"A1": "a", "B2": "b"}, "Sheet1!A1", Table(0, 0, 2, 2)),  # corners touch
    ],
)
def test_find_table(cells: dict[str, str], range_: str, table: Table | None) -> None:
    sheet = _sheet_with(cells)
    assert find_table(sheet, parse_a1(range_, ["Sheet1"])) == table


def test_utf16_length_counts_surrogate_pairs() -> None:
    assert [utf16_length(text) for text in ("", "abc", "한글", "🎉", "👍🏽")] == [0, 3, 2, 2, 4]

"""Number formats, typed dates and where formats go when rows and columns move."""

from __future__ import annotations

import pytest

from sheets_emulator.formats import FormatBook
from sheets_emulator.numfmt import NumberFormat, format_with, parse_date_entry

DATE = NumberFormat("DATE", "yyyy-mm-dd")


@pytest.mark.parametrize(
    ("number", "number_format", "shown"),
    [
        (43831, NumberFormat("DATE", "yyyy-mm-dd"), "2020-01-01"),
        (43831.75, NumberFormat("DATE_TIME", "yyyy-mm-dd hh:mm:ss"), "2020-01-01 18:00:00"),
        (43831.75, NumberFormat("DATE_TIME", "m/d/yyyy h:mm am/pm"), "1/1/2020 6:00 pm"),
        (43831.75, NumberFormat("DATE_TIME", "M/d/yyyy H:mm:ss AM/PM"), "1/1/2020 6:00:00 PM"),
        (43831, NumberFormat("DATE", "dddd d mmmm yy"), "Wednesday 1 January 20"),
        (43831.5 + 0.4 / 86400, NumberFormat("TIME", "hh:mm:ss"), "12:00:00"),
        (43831, NumberFormat("DATE"), "1/1/2020"),
        (1234.5, NumberFormat("NUMBER"), "1,234.50"),
        (-1234.5, NumberFormat("NUMBER", "0"), "-1235"),
        (0.125, NumberFormat("PERCENT"), "12.50%"),
        (0.5, NumberFormat("NUMBER", "#.##"), ".5"),
        (12, NumberFormat("TEXT"), "12"),
        (1e300, DATE, "1E+300"),
        (1e300, NumberFormat("NUMBER", "0.00"), "1E+300"),
    ],
)
def test_a_number_shows_as_its_format_says(
    number: float, number_format: NumberFormat, shown: str
) -> None:
    assert format_with(number, number_format) == shown


@pytest.mark.parametrize(
    ("typed", "parsed"),
    [
        ("2020-01-01", (43831, NumberFormat("DATE", "yyyy-mm-dd"))),
        ("1999-01-02", (36162, NumberFormat("DATE", "yyyy-mm-dd"))),
        ("3/1/2024", (45352, NumberFormat("DATE", "m/d/yyyy"))),
        (
            "2024/03/01 13:45",
            (45352 + 0.5729166666666666, NumberFormat("DATE_TIME", "yyyy/mm/dd hh:mm")),
        ),
        ("2020-02-30", None),
        ("2020-01-01T10:00:00", None),
        ("12", None),
    ],
)
def test_typed_dates(typed: str, parsed: tuple[float, NumberFormat] | None) -> None:
    assert parse_date_entry(typed) == parsed


def test_formats_follow_inserted_and_deleted_rows() -> None:
    book = FormatBook()
    book.set_area(1, 2, 1000, 3, DATE)  # C2:C1000
    book.set_cell(5, 0, DATE)  # A6

    book.insert("ROWS", 0, 2)  # above the area: it moves down
    assert (book.at(2, 2), book.at(3, 2), book.at(7, 0), book.at(5, 0)) == (None, DATE, DATE, None)
    book.insert("ROWS", 500, 10)  # inside: it grows
    assert book.at(1010, 2) == DATE and book.at(1012, 2) is None
    book.delete("ROWS", 0, 5)  # takes A8's row up to A3 and the area's first rows
    assert (book.at(0, 2), book.at(2, 0), book.at(1006, 2), book.at(1007, 2)) == (
        DATE,
        DATE,
        DATE,
        None,
    )
    book.delete("COLUMNS", 2, 3)
    assert book.at(0, 2) is None and book.areas == []


def test_a_later_format_wins_and_a_cleared_one_is_none() -> None:
    book = FormatBook()
    book.set_cell(0, 0, DATE)
    book.set_area(0, 0, 10, 10, NumberFormat("NUMBER"))
    assert book.at(0, 0) == NumberFormat("NUMBER")
    book.set_area(0, 0, 10, 1, None)
    assert book.at(0, 0) is None and book.at(0, 1) == NumberFormat("NUMBER")


def test_a_move_through_an_area_splits_it() -> None:
    book = FormatBook()
    book.set_area(0, 0, 5, 1, DATE)  # A1:A5

    book.move("ROWS", 2, 3, 8)  # row 3 goes before row 9: A3's format follows it
    assert [book.at(row, 0) for row in range(9)] == [DATE] * 4 + [None] * 3 + [DATE, None]
    book.move("ROWS", 7, 8, 0)  # and back to the top
    assert [book.at(row, 0) for row in range(6)] == [DATE] * 5 + [None]

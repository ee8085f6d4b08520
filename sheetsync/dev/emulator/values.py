"""spreadsheets.values: get, update and append, with Google's responses and limits."""

from __future__ import annotations

from typing import Any

from sheetsync.dev.emulator.a1 import A1Range, column_letters, format_range
from sheetsync.dev.emulator.api_errors import ApiError
from sheetsync.dev.emulator.cells import (
    VALUE_INPUT_OPTIONS,
    VALUE_RENDER_OPTIONS,
    CellInput,
    CellInputError,
    parse_input,
    render,
)
from sheetsync.dev.emulator.sheets import Sheet, Spreadsheet
from sheetsync.dev.emulator.tables import find_table

MAJOR_DIMENSIONS = ("ROWS", "COLUMNS")
INSERT_DATA_OPTIONS = ("INSERT_ROWS", "OVERWRITE")

Rendered = str | int | float | bool


def get_values(
    spreadsheet: Spreadsheet,
    range_text: str,
    render_option: str = "FORMATTED_VALUE",
    major_dimension: str = "ROWS",
) -> dict[str, Any]:
    """values.get: an empty range has no ``values`` key; trailing blanks are trimmed."""
    _check_choice("valueRenderOption", render_option, VALUE_RENDER_OPTIONS)
    _check_choice("majorDimension", major_dimension, MAJOR_DIMENSIONS)
    sheet, parsed = spreadsheet.resolve(range_text)
    if parsed.start_row >= sheet.row_count or parsed.start_col >= sheet.column_count:
        raise ApiError.invalid_argument(
            f"Range ({range_text}) exceeds grid limits. Max rows: {sheet.row_count}, "
            f"max columns: {sheet.column_count}"
        )
    end_row = min(parsed.end_row or sheet.row_count, sheet.row_count)
    end_col = min(parsed.end_col or sheet.column_count, sheet.column_count)
    block = sheet.block(parsed.start_row, parsed.start_col, end_row, end_col)
    rows = [[render(cell, render_option, sheet.evaluate) for cell in cells] for cells in block]
    if major_dimension == "COLUMNS":
        rows = _transpose(rows)
    result: dict[str, Any] = {
        "range": format_range(sheet.title, parsed.start_row, parsed.start_col, end_row, end_col),
        "majorDimension": major_dimension,
    }
    rows = _trim_rendered(rows)
    if rows:
        result["values"] = rows
    return result


def update_values(
    spreadsheet: Spreadsheet,
    range_text: str,
    body: dict[str, Any],
    input_option: str | None,
) -> dict[str, Any]:
    """values.update: write the block at the range's top-left cell, within its bounds."""
    _check_input_option(input_option)
    assert input_option is not None
    sheet, parsed = spreadsheet.resolve(range_text)
    values = _parse_values(body, input_option)
    height, width = len(values), max((len(row) for row in values), default=0)
    if not parsed.single_cell:  # one cell is only where the block starts, as for Google
        _check_fits(range_text, parsed, height, width)
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    if height == 0 or width == 0:
        return result
    spreadsheet.grow(sheet, parsed.start_row + height, parsed.start_col + width)
    sheet.write(parsed.start_row, parsed.start_col, values)
    result.update(_update_counts(sheet, parsed.start_row, parsed.start_col, values))
    if body.get("includeValuesInResponse"):
        result["updatedData"] = _updated_data(sheet, parsed.start_row, parsed.start_col, values)
    return result


def _check_fits(range_text: str, parsed: A1Range, height: int, width: int) -> None:
    if parsed.end_row is not None and parsed.start_row + height > parsed.end_row:
        raise ApiError.invalid_argument(
            f"Requested writing within range [{range_text}], but tried writing to row "
            f"[{parsed.start_row + height}]"
        )
    if parsed.end_col is not None and parsed.start_col + width > parsed.end_col:
        raise ApiError.invalid_argument(
            f"Requested writing within range [{range_text}], but tried writing to column "
            f"[{column_letters(parsed.start_col + width - 1)}]"
        )


def append_values(
    spreadsheet: Spreadsheet,
    range_text: str,
    body: dict[str, Any],
    input_option: str | None,
    *,
    insert_data_option: str = "OVERWRITE",
    include_values: bool = False,
) -> dict[str, Any]:
    """values.append: write after the last row of the table found in the range
    (:mod:`sheetsync.dev.emulator.tables`), from the table's first column."""
    _check_input_option(input_option)
    assert input_option is not None
    _check_choice("insertDataOption", insert_data_option, INSERT_DATA_OPTIONS)
    sheet, parsed = spreadsheet.resolve(range_text)
    values = _parse_values(body, input_option)
    table = find_table(sheet, parsed)
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    if table is None:
        start_row, start_col = parsed.start_row, parsed.start_col
    else:
        result["tableRange"] = table.a1(sheet.title)
        start_row, start_col = table.bottom, table.left
    height, width = len(values), max((len(row) for row in values), default=0)
    updates: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    result["updates"] = updates
    if height == 0 or width == 0:
        return result
    if insert_data_option == "INSERT_ROWS":
        spreadsheet.check_cell_limit(height * max(sheet.column_count, start_col + width))
        sheet.insert_rows(start_row, height)
    spreadsheet.grow(sheet, start_row + height, start_col + width)
    sheet.write(start_row, start_col, values)
    updates.update(_update_counts(sheet, start_row, start_col, values))
    if include_values:
        updates["updatedData"] = _updated_data(sheet, start_row, start_col, values)
    return result


def _update_counts(
    sheet: Sheet, start_row: int, start_col: int, values: list[list[CellInput]]
) -> dict[str, Any]:
    height, width = len(values), max(len(row) for row in values)
    return {
        "updatedRange": format_range(
            sheet.title, start_row, start_col, start_row + height, start_col + width
        ),
        "updatedRows": sum(1 for row in values if row),
        "updatedColumns": width,
        "updatedCells": sum(len(row) for row in values),
    }


def _updated_data(
    sheet: Sheet, start_row: int, start_col: int, values: list[list[CellInput]]
) -> dict[str, Any]:
    end_row = start_row + len(values)
    end_col = start_col + max(len(row) for row in values)
    block = sheet.block(start_row, start_col, end_row, end_col)
    rendered = [
        [render(cell, "FORMATTED_VALUE", sheet.evaluate) for cell in cells] for cells in block
    ]
    data: dict[str, Any] = {
        "range": format_range(sheet.title, start_row, start_col, end_row, end_col),
        "majorDimension": "ROWS",
    }
    if rendered:
        data["values"] = rendered
    return data


def _parse_values(body: dict[str, Any], input_option: str) -> list[list[CellInput]]:
    raw = body.get("values", [])
    major_dimension = body.get("majorDimension", "ROWS")
    _check_choice("majorDimension", major_dimension, MAJOR_DIMENSIONS)
    if not isinstance(raw, list) or not all(isinstance(row, list) for row in raw):
        raise ApiError.invalid_argument(
            "Invalid value at 'data.values': values must be a list of lists."
        )
    try:
        rows = [[parse_input(value, input_option) for value in row] for row in raw]
    except CellInputError as error:
        raise ApiError.invalid_argument(str(error)) from error
    if major_dimension == "COLUMNS":
        width = max((len(column) for column in rows), default=0)
        return [[column[i] if i < len(column) else None for column in rows] for i in range(width)]
    return rows


def _transpose(rows: list[list[Rendered]]) -> list[list[Rendered]]:
    width = max((len(row) for row in rows), default=0)
    return [[row[i] if i < len(row) else "" for row in rows] for i in range(width)]


def _trim_rendered(rows: list[list[Rendered]]) -> list[list[Rendered]]:
    trimmed = []
    for row in rows:
        end = len(row)
        while end and row[end - 1] == "":
            end -= 1
        trimmed.append(row[:end])
    while trimmed and not trimmed[-1]:
        trimmed.pop()
    return trimmed


def _check_input_option(input_option: str | None) -> None:
    if input_option not in VALUE_INPUT_OPTIONS:
        raise ApiError.invalid_argument(
            f"Invalid valueInputOption: {input_option or 'INPUT_VALUE_OPTION_UNSPECIFIED'}"
        )


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ApiError.invalid_argument(
            f"Invalid value at '{name}': \"{value}\" (expected one of {', '.join(choices)})"
        )


def formatted_rows(sheet: Sheet) -> list[list[str]]:
    """Every cell of the sheet as shown (FORMATTED_VALUE), blanks trimmed as values.get does."""
    block = sheet.block(0, 0, len(sheet.rows), sheet.data_columns)
    rendered: list[list[Rendered]] = [
        [render(cell, "FORMATTED_VALUE", sheet.evaluate) for cell in cells] for cells in block
    ]
    return [[str(cell) for cell in row] for row in _trim_rendered(rendered)]

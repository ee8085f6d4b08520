"""spreadsheets.values: get, batchGet, update, append and clear, with Google's responses
and limits."""

from __future__ import annotations

import json
from typing import Any

from sheets_emulator.a1 import A1Range, column_letters, format_range
from sheets_emulator.api_errors import ApiError
from sheets_emulator.cells import (
    DATE_TIME_RENDER_OPTIONS,
    KEEP,
    VALUE_INPUT_OPTIONS,
    VALUE_RENDER_OPTIONS,
    CellInput,
    CellInputError,
    Formula,
    parse_input,
    render,
)
from sheets_emulator.numfmt import NumberFormat, parse_date_entry
from sheets_emulator.sheets import Sheet, Spreadsheet
from sheets_emulator.tables import find_table

MAJOR_DIMENSIONS = ("ROWS", "COLUMNS")
INSERT_DATA_OPTIONS = ("INSERT_ROWS", "OVERWRITE")

Rendered = str | int | float | bool
#: Formats of dates typed as USER_ENTERED, by (row, column) offset in the written block.
TypedFormats = dict[tuple[int, int], NumberFormat]


def get_values(
    spreadsheet: Spreadsheet,
    range_text: str,
    render_option: str = "FORMATTED_VALUE",
    major_dimension: str = "ROWS",
    date_time_option: str = "SERIAL_NUMBER",
) -> dict[str, Any]:
    """values.get: an empty range has no ``values`` key; trailing blanks are trimmed."""
    _check_choice("valueRenderOption", render_option, VALUE_RENDER_OPTIONS)
    _check_choice("majorDimension", major_dimension, MAJOR_DIMENSIONS)
    _check_choice("dateTimeRenderOption", date_time_option, DATE_TIME_RENDER_OPTIONS)
    sheet, parsed = spreadsheet.resolve(range_text)
    if parsed.start_row >= sheet.row_count or parsed.start_col >= sheet.column_count:
        raise ApiError.invalid_argument(
            f"Range ({range_text}) exceeds grid limits. Max rows: {sheet.row_count}, "
            f"max columns: {sheet.column_count}"
        )
    end_row = min(parsed.end_row or sheet.row_count, sheet.row_count)
    end_col = min(parsed.end_col or sheet.column_count, sheet.column_count)
    rows = _rendered_block(
        sheet, parsed.start_row, parsed.start_col, end_row, end_col, render_option, date_time_option
    )
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


def batch_get_values(
    spreadsheet: Spreadsheet,
    ranges: list[str],
    render_option: str = "FORMATTED_VALUE",
    major_dimension: str = "ROWS",
    date_time_option: str = "SERIAL_NUMBER",
) -> dict[str, Any]:
    """values.batchGet: one values.get answer per range, in order (none: no key)."""
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    if ranges:
        result["valueRanges"] = [
            get_values(spreadsheet, range_text, render_option, major_dimension, date_time_option)
            for range_text in ranges
        ]
    return result


def clear_values(spreadsheet: Spreadsheet, range_text: str) -> dict[str, Any]:
    """values.clear: empty the range's cells (formats stay, as Google's do)."""
    sheet, parsed = spreadsheet.resolve(range_text)
    end_row = min(parsed.end_row or sheet.row_count, sheet.row_count)
    end_col = min(parsed.end_col or sheet.column_count, sheet.column_count)
    height = max(0, min(end_row, len(sheet.rows)) - parsed.start_row)
    if height:
        width = max(0, min(end_col, sheet.data_columns) - parsed.start_col)
        sheet.write(parsed.start_row, parsed.start_col, [[None] * width] * height)
    return {
        "spreadsheetId": spreadsheet.spreadsheet_id,
        "clearedRange": format_range(
            sheet.title, parsed.start_row, parsed.start_col, end_row, end_col
        ),
    }


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
    values, typed_formats = parse_values(body, input_option)
    height, width = len(values), max((len(row) for row in values), default=0)
    if not parsed.single_cell:  # one cell is only where the block starts, as for Google
        _check_fits(range_text, parsed, height, width)
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    if height == 0 or width == 0:
        return result
    spreadsheet.grow(sheet, parsed.start_row + height, parsed.start_col + width)
    sheet.write(parsed.start_row, parsed.start_col, values, typed_formats)
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
    (:mod:`sheets_emulator.tables`), from the table's first column."""
    _check_input_option(input_option)
    assert input_option is not None
    _check_choice("insertDataOption", insert_data_option, INSERT_DATA_OPTIONS)
    sheet, parsed = spreadsheet.resolve(range_text)
    values, typed_formats = parse_values(body, input_option)
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
    sheet.write(start_row, start_col, values, typed_formats)
    updates.update(_update_counts(sheet, start_row, start_col, values))
    if include_values:
        updates["updatedData"] = _updated_data(sheet, start_row, start_col, values)
    return result


def _update_counts(
    sheet: Sheet, start_row: int, start_col: int, values: list[list[CellInput]]
) -> dict[str, Any]:
    """Google counts the cells a write set; a ``null`` (leave as it is) is not one. A count
    of 0 is left out, as proto3's JSON leaves out every default value."""
    height, width = len(values), max(len(row) for row in values)
    written = [[value is not KEEP for value in row] for row in values]
    counts = {
        "updatedRows": sum(1 for row in written if any(row)),
        "updatedColumns": sum(
            1 for col in range(width) if any(col < len(row) and row[col] for row in written)
        ),
        "updatedCells": sum(sum(row) for row in written),
    }
    updated_range = format_range(
        sheet.title, start_row, start_col, start_row + height, start_col + width
    )
    return {"updatedRange": updated_range, **{name: n for name, n in counts.items() if n}}


def _updated_data(
    sheet: Sheet, start_row: int, start_col: int, values: list[list[CellInput]]
) -> dict[str, Any]:
    end_row = start_row + len(values)
    end_col = start_col + max(len(row) for row in values)
    rendered = _rendered_block(sheet, start_row, start_col, end_row, end_col, "FORMATTED_VALUE")
    data: dict[str, Any] = {
        "range": format_range(sheet.title, start_row, start_col, end_row, end_col),
        "majorDimension": "ROWS",
    }
    if rendered:
        data["values"] = rendered
    return data


def _rendered_block(
    sheet: Sheet,
    start_row: int,
    start_col: int,
    end_row: int,
    end_col: int,
    render_option: str,
    date_time_option: str = "SERIAL_NUMBER",
) -> list[list[Rendered]]:
    block = sheet.block(start_row, start_col, end_row, end_col)
    return [
        [
            render(
                cell,
                render_option,
                sheet.evaluate,
                sheet.number_format(start_row + row, start_col + col) if cell is not None else None,
                date_time_option,
            )
            for col, cell in enumerate(cells)
        ]
        for row, cells in enumerate(block)
    ]


def parse_values(
    body: dict[str, Any], input_option: str
) -> tuple[list[list[CellInput]], TypedFormats]:
    """The cells to write (rows first) and the formats of the dates typed among them."""
    raw = body.get("values") or []
    major_dimension = body.get("majorDimension") or "ROWS"  # null is unset, as for Google
    _check_choice("majorDimension", major_dimension, MAJOR_DIMENSIONS)
    if not isinstance(raw, list):  # Google's words (gspread's test_add_validation recording)
        raise ApiError.invalid_argument(_not_a_list("data.values", raw))
    for index, row in enumerate(raw):
        if not isinstance(row, list):
            raise ApiError.invalid_argument(_not_a_list(f"data.values[{index}]", row))
    typed_formats: TypedFormats = {}
    rows: list[list[CellInput]] = []
    try:
        for row_index, row in enumerate(raw):
            cells: list[CellInput] = []
            for col_index, value in enumerate(row):
                dated = parse_date_entry(value) if _may_be_date(value, input_option) else None
                if dated is None:
                    cells.append(parse_input(value, input_option))
                    continue
                cells.append(dated[0])
                typed_formats[(row_index, col_index)] = dated[1]
            rows.append(cells)
    except CellInputError as error:
        raise ApiError.invalid_argument(str(error)) from error
    if major_dimension == "COLUMNS":
        width = max((len(column) for column in rows), default=0)
        transposed = {(col, row): fmt for (row, col), fmt in typed_formats.items()}
        columns: list[list[CellInput]] = [
            [column[i] if i < len(column) else KEEP for column in rows] for i in range(width)
        ]
        return columns, transposed
    return rows, typed_formats


def _not_a_list(field: str, value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return f"Invalid value at '{field}' (type.googleapis.com/google.protobuf.ListValue), {shown}"


def _may_be_date(value: Any, input_option: str) -> bool:
    return input_option == "USER_ENTERED" and isinstance(value, str) and value[:1].isdigit()


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
    rendered = _rendered_block(sheet, 0, 0, len(sheet.rows), sheet.data_columns, "FORMATTED_VALUE")
    return [[str(cell) for cell in row] for row in _trim_rendered(rendered)]


def numeric_cells(sheet: Sheet) -> set[tuple[int, int]]:
    """The cells holding a number (dates included), which Sheets aligns right."""
    numeric = set()
    for row, cells in enumerate(sheet.rows):
        for col, cell in enumerate(cells):
            value = sheet.evaluate(cell) if isinstance(cell, Formula) else cell
            if isinstance(value, int | float) and not isinstance(value, bool):
                numeric.add((row, col))
    return numeric

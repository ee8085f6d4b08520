"""Grid data: the cells of a range as ``sheets[].data`` (GridData) holds them, and
spreadsheets.getByDataFilter, which returns them for the ranges its data filters name.

Only cell values are modelled: each CellData has ``userEnteredValue``, ``effectiveValue``
and ``formattedValue`` (an empty cell is ``{}``); formats, notes, row and column
metadata are left out. As in Google's answers (protobuf's JSON), ``startRow`` and
``startColumn`` are omitted when 0, trailing empty cells and rows are omitted, and an
empty range is a GridData without ``rowData``.
"""

from __future__ import annotations

from typing import Any

from sheets_emulator.api_errors import ApiError
from sheets_emulator.cells import CellValue, Formula, render
from sheets_emulator.request_fields import GridBox, grid_box
from sheets_emulator.sheets import Sheet, Spreadsheet

#: Data filters that select by developer metadata: the emulator keeps no metadata.
METADATA_FILTER_UNSUPPORTED = (
    "The Sheets API emulator keeps no developer metadata: select ranges with a "
    "gridRange or an a1Range data filter."
)


def get_by_data_filter(
    spreadsheet: Spreadsheet, body: dict[str, Any], base_url: str, fields: str
) -> dict[str, Any]:
    """spreadsheets.getByDataFilter: the spreadsheet, its sheets narrowed to those a
    filter matches (all of them without filters), with the matched ranges' grid data
    when ``includeGridData`` is true or a ``fields`` mask is set (Google ignores
    ``includeGridData`` then, and the mask chooses what is returned)."""
    raw_filters = body.get("dataFilters") or []
    if not isinstance(raw_filters, list):
        raise ApiError.invalid_argument("Invalid value at 'data_filters': not a list.")
    boxes = [_box(spreadsheet, position, raw) for position, raw in enumerate(raw_filters)]
    with_data = bool(fields) or body.get("includeGridData") is True
    resource = spreadsheet.resource(base_url)
    chosen = []
    for index, sheet in enumerate(spreadsheet.sheets):
        mine = [box for box in boxes if box.sheet is sheet]
        if boxes and not mine:
            continue
        entry: dict[str, Any] = {"properties": sheet.properties(index)}
        if with_data:
            whole = GridBox(sheet, 0, 0, sheet.row_count, sheet.column_count)
            entry["data"] = [grid_data(box) for box in (mine or [whole])]
        chosen.append(entry)
    resource["sheets"] = chosen
    return resource


def _box(spreadsheet: Spreadsheet, position: int, raw: Any) -> GridBox:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ApiError.invalid_argument(
            f"Invalid dataFilters[{position}]: exactly one filter kind must be set."
        )
    if "gridRange" in raw:
        return grid_box(spreadsheet, raw["gridRange"])
    if "a1Range" in raw:
        sheet, parsed = spreadsheet.resolve(str(raw["a1Range"]))
        bottom = min(parsed.end_row or sheet.row_count, sheet.row_count)
        right = min(parsed.end_col or sheet.column_count, sheet.column_count)
        return GridBox(sheet, parsed.start_row, parsed.start_col, bottom, right)
    if "developerMetadataLookup" in raw:
        raise ApiError.google(501, METADATA_FILTER_UNSUPPORTED)
    raise ApiError.invalid_argument(f"Invalid dataFilters[{position}]: no filter kind is set.")


def grid_data(box: GridBox) -> dict[str, Any]:
    """The GridData of one range."""
    sheet = box.sheet
    rows: list[dict[str, Any]] = []
    for row in range(box.top, min(box.bottom, len(sheet.rows))):
        values = [_cell_data(sheet, row, col) for col in range(box.left, box.right)]
        while values and not values[-1]:
            values.pop()
        rows.append({"values": values} if values else {})
    while rows and not rows[-1]:
        rows.pop()
    data: dict[str, Any] = {}
    if box.top:
        data["startRow"] = box.top
    if box.left:
        data["startColumn"] = box.left
    if rows:
        data["rowData"] = rows
    return data


def _cell_data(sheet: Sheet, row: int, col: int) -> dict[str, Any]:
    cell = sheet.cell(row, col)
    if cell is None:
        return {}
    number_format = sheet.number_format(row, col)
    effective = sheet.evaluate(cell) if isinstance(cell, Formula) else cell
    return {
        "userEnteredValue": _extended_value(cell),
        "effectiveValue": _extended_value(effective),
        "formattedValue": str(render(cell, "FORMATTED_VALUE", sheet.evaluate, number_format)),
    }


def _extended_value(value: CellValue) -> dict[str, Any]:
    if isinstance(value, Formula):
        return {"formulaValue": value.text}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int | float):
        return {"numberValue": value}
    # Approximated: a formula's error (``#NAME?``) is an ErrorValue at Google.
    return {"stringValue": value}

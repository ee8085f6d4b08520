"""spreadsheets.batchUpdate: addSheet, deleteSheet, appendCells, updateCells, the requests that
move cells (deleteDimension, insertDimension, sortRange: :mod:`.grid_requests`) and the
ones that change properties and formats (updateSheetProperties,
updateSpreadsheetProperties, repeatCell: :mod:`.property_requests`).

Each request is applied in order; if one fails, the ones before it are undone, so
the spreadsheet is left as it was (Google applies a batch atomically too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sheets_emulator.api_errors import ApiError
from sheets_emulator.cells import CellInput, CellInputError, parse_extended_value
from sheets_emulator.grid_requests import GRID_HANDLERS
from sheets_emulator.property_requests import CELL_PRESENTATION, PROPERTY_HANDLERS
from sheets_emulator.request_fields import (
    FieldMask,
    Reply,
    Undo,
    grid_box,
    optional_int,
    required_int,
    restore_point,
    sheet_for,
)
from sheets_emulator.sheets import Spreadsheet


def batch_update(spreadsheet: Spreadsheet, body: dict[str, Any], base_url: str) -> dict[str, Any]:
    """Apply ``body["requests"]`` and answer ``{"spreadsheetId", "replies"}``."""
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        raise ApiError.invalid_argument("Must specify at least one request.")
    undo_log: list[Undo] = []
    replies: list[Reply] = []
    try:
        for position, request in enumerate(requests):
            replies.append(_apply(spreadsheet, position, request, undo_log))
    except ApiError:
        for undo in reversed(undo_log):
            undo()
        raise
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id, "replies": replies}
    if body.get("includeSpreadsheetInResponse"):
        result["updatedSpreadsheet"] = spreadsheet.resource(base_url)
    return result


def _apply(spreadsheet: Spreadsheet, position: int, request: Any, undo_log: list[Undo]) -> Reply:
    if not isinstance(request, dict) or len(request) != 1:
        raise ApiError.invalid_argument(
            f"Invalid requests[{position}]: exactly one request kind must be set."
        )
    ((kind, payload),) = request.items()
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise ApiError.invalid_argument(
            f'Invalid JSON payload received. Unknown name "{kind}" at '
            f"'requests[{position}]': Cannot find field."
        )
    if not isinstance(payload, dict):
        raise ApiError.invalid_argument(f"Invalid requests[{position}].{kind}: not an object.")
    try:
        return handler(spreadsheet, payload, undo_log)
    except ApiError as error:
        message = error.body["error"]["message"]
        raise ApiError.invalid_argument(
            f"Invalid requests[{position}].{kind}: {message}"
        ) from error


def _add_sheet(spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]) -> Reply:
    properties = payload.get("properties") or {}
    grid = properties.get("gridProperties") or {}
    sheet = spreadsheet.add_sheet(
        title=properties.get("title"),
        sheet_id=optional_int(properties.get("sheetId"), "sheetId"),
        index=optional_int(properties.get("index"), "index"),
        row_count=optional_int(grid.get("rowCount"), "rowCount") or 1000,
        column_count=optional_int(grid.get("columnCount"), "columnCount") or 26,
    )
    undo_log.append(lambda: spreadsheet.sheets.remove(sheet))
    index = spreadsheet.sheets.index(sheet)
    return {"addSheet": {"properties": sheet.properties(index)}}


def _delete_sheet(spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]) -> Reply:
    sheet_id = required_int(payload.get("sheetId"), "sheetId")
    found = spreadsheet.sheet_by_id(sheet_id)
    index = spreadsheet.sheets.index(found) if found is not None else 0
    sheet = spreadsheet.delete_sheet(sheet_id)
    undo_log.append(lambda: spreadsheet.sheets.insert(index, sheet))
    return {}


def _append_cells(spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]) -> Reply:
    sheet = sheet_for(spreadsheet, payload.get("sheetId"))
    values = _row_values(payload.get("rows") or [])
    if not values:
        return {}
    saved_rows, saved_grid = len(sheet.rows), (sheet.row_count, sheet.column_count)
    start_row = len(sheet.rows)
    width = max(len(row) for row in values)
    spreadsheet.grow(sheet, start_row + len(values), width)

    def undo() -> None:
        del sheet.rows[saved_rows:]
        sheet.row_count, sheet.column_count = saved_grid

    undo_log.append(undo)
    sheet.write(start_row, 0, values)
    return {}


def _update_cells(spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]) -> Reply:
    """Cell values written from ``start`` (a GridCoordinate), or into ``range`` (a
    GridRange, whose cells the rows leave out are cleared). Within the grid only: an
    updateCells never grows it. Of the cell, only ``userEnteredValue`` is modelled."""
    mask = FieldMask.parse(payload.get("fields"), ("userEnteredValue",), CELL_PRESENTATION)
    values = _row_values(payload.get("rows") or [])
    start, grid_range = payload.get("start"), payload.get("range")
    if (start is None) == (grid_range is None):
        # Approximated wording: Google's for neither or both is not recorded.
        raise ApiError.invalid_argument("Exactly one of start or range must be set.")
    if start is not None:
        if not isinstance(start, dict):
            raise ApiError.invalid_argument("start must be an object.")
        top = optional_int(start.get("rowIndex"), "rowIndex") or 0
        left = optional_int(start.get("columnIndex"), "columnIndex") or 0
        width = max((len(row) for row in values), default=0)
        grid_range = {
            "sheetId": start.get("sheetId"),
            "startRowIndex": top,
            "endRowIndex": top + max(len(values), 1),
            "startColumnIndex": left,
            "endColumnIndex": left + max(width, 1),
        }
    box = grid_box(spreadsheet, grid_range)
    if len(values) > box.bottom - box.top or any(len(row) > box.right - box.left for row in values):
        # Approximated wording: Google's for rows larger than the range is not recorded.
        raise ApiError.invalid_argument("The rows do not fit in the range.")
    if not mask.has("userEnteredValue"):
        return {}
    undo_log.append(restore_point(box.sheet))
    if payload.get("range") is not None:
        height, width = box.bottom - box.top, box.right - box.left
        values = [
            [*row, *[None] * (width - len(row))] for row in values + [[]] * (height - len(values))
        ]
    box.sheet.write(box.top, box.left, values)
    return {}


def _row_values(rows: Any) -> list[list[CellInput]]:
    """The ``userEnteredValue`` of each CellData of a list of RowData (None: cleared)."""
    if not isinstance(rows, list):
        raise ApiError.invalid_argument("rows must be a list.")
    values: list[list[CellInput]] = []
    try:
        for row in rows:
            cells = row.get("values", []) if isinstance(row, dict) else None
            if not isinstance(cells, list):
                raise ApiError.invalid_argument("rows[].values must be a list.")
            values.append(
                [
                    parse_extended_value(cell.get("userEnteredValue"))
                    if isinstance(cell, dict)
                    else None
                    for cell in cells
                ]
            )
    except CellInputError as error:
        raise ApiError.invalid_argument(str(error)) from error
    return values


_HANDLERS: dict[str, Callable[[Spreadsheet, dict[str, Any], list[Undo]], Reply]] = {
    "addSheet": _add_sheet,
    "deleteSheet": _delete_sheet,
    "appendCells": _append_cells,
    "updateCells": _update_cells,
    **GRID_HANDLERS,
    **PROPERTY_HANDLERS,
}

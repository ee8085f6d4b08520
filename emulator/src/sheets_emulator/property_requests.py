"""batchUpdate requests that change properties and formats: updateSheetProperties,
updateSpreadsheetProperties and repeatCell; updateDimensionProperties,
autoResizeDimensions and updateBorders are accepted and change nothing the emulator
models (sizes and borders).

Each applies only what its ``fields`` mask names (``title``, ``gridProperties.rowCount``,
``gridProperties`` for all of them, ``*`` for everything; Google accepts ``/`` as well as
``.`` between names). A field named in the mask but absent from the request is reset to
its default, as Google does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sheets_emulator.a1 import MAX_COLUMNS
from sheets_emulator.api_errors import ApiError
from sheets_emulator.numfmt import NUMBER_FORMAT_TYPES, NumberFormat
from sheets_emulator.request_fields import (
    FieldMask,
    Reply,
    Undo,
    grid_box,
    optional_int,
    restore_point,
    sheet_for,
)
from sheets_emulator.sheets import Sheet, Spreadsheet
from sheets_emulator.state import check_time_zone

SHEET_FIELDS = (
    "title",
    "index",
    "hidden",
    "gridProperties.rowCount",
    "gridProperties.columnCount",
    "gridProperties.frozenRowCount",
    "gridProperties.frozenColumnCount",
)
SPREADSHEET_FIELDS = ("title", "timeZone", "locale")
#: Field paths the emulator accepts and ignores: how things look, not what they hold.
SHEET_PRESENTATION = (
    "tabColor",
    "tabColorStyle",
    "rightToLeft",
    "gridProperties.hideGridlines",
    "gridProperties.rowGroupControlAfter",
    "gridProperties.columnGroupControlAfter",
)
SPREADSHEET_PRESENTATION = ("autoRecalc", "defaultFormat", "spreadsheetTheme")
CELL_PRESENTATION = (
    "userEnteredFormat.backgroundColor",
    "userEnteredFormat.backgroundColorStyle",
    "userEnteredFormat.borders",
    "userEnteredFormat.padding",
    "userEnteredFormat.horizontalAlignment",
    "userEnteredFormat.verticalAlignment",
    "userEnteredFormat.wrapStrategy",
    "userEnteredFormat.textDirection",
    "userEnteredFormat.textFormat",
    "userEnteredFormat.hyperlinkDisplayType",
    "userEnteredFormat.textRotation",
)


def update_sheet_properties(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        raise ApiError.invalid_argument("properties must be set.")
    mask = FieldMask.parse(payload.get("fields"), SHEET_FIELDS, SHEET_PRESENTATION)
    sheet = sheet_for(spreadsheet, properties.get("sheetId"))
    grid = properties.get("gridProperties") or {}
    if not isinstance(grid, dict):
        raise ApiError.invalid_argument("gridProperties must be an object.")
    undo_log.append(restore_point(sheet))
    position = spreadsheet.sheets.index(sheet)
    undo_log.append(lambda: _move(spreadsheet, sheet, position))
    if mask.has("title"):
        _rename(spreadsheet, sheet, properties.get("title"))
    if mask.has("hidden"):
        _hide(spreadsheet, sheet, bool(properties.get("hidden", False)))
    if mask.has("gridProperties.rowCount") or mask.has("gridProperties.columnCount"):
        rows = _grid_count(grid, "rowCount", mask, sheet.row_count)
        columns = _grid_count(grid, "columnCount", mask, sheet.column_count)
        _resize(spreadsheet, sheet, rows, columns)
    for name in ("frozenRowCount", "frozenColumnCount"):
        if mask.has(f"gridProperties.{name}"):
            count = optional_int(grid.get(name), name) or 0
            if count < 0:
                raise ApiError.invalid_argument(f"{name} must be >= 0")
            sheet.frozen[name] = count
    if mask.has("index"):
        index = optional_int(properties.get("index"), "index") or 0
        # Google counts the index "before the move": to move S1 after S2 of S1,S2,S3, say 2.
        target = index if index <= position else index - 1
        _move(spreadsheet, sheet, max(0, min(target, len(spreadsheet.sheets) - 1)))
    return {}


def update_spreadsheet_properties(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        raise ApiError.invalid_argument("properties must be set.")
    mask = FieldMask.parse(payload.get("fields"), SPREADSHEET_FIELDS, SPREADSHEET_PRESENTATION)
    saved = (spreadsheet.title, spreadsheet.time_zone, spreadsheet.locale)

    def undo() -> None:
        spreadsheet.title, spreadsheet.time_zone, spreadsheet.locale = saved

    undo_log.append(undo)
    if mask.has("title"):
        spreadsheet.title = str(properties.get("title") or "")
    if mask.has("timeZone"):
        spreadsheet.time_zone = check_time_zone(properties.get("timeZone"))
    if mask.has("locale"):
        spreadsheet.locale = str(properties.get("locale") or "en_US")
    return {}


def repeat_cell(spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]) -> Reply:
    """The cell's ``userEnteredFormat.numberFormat`` over the range (the one format kept)."""
    box = grid_box(spreadsheet, payload.get("range"))
    cell = payload.get("cell") or {}
    if not isinstance(cell, dict):
        raise ApiError.invalid_argument("cell must be an object.")
    mask = FieldMask.parse(
        payload.get("fields"), ("userEnteredFormat.numberFormat",), CELL_PRESENTATION
    )
    undo_log.append(restore_point(box.sheet))
    if mask.has("userEnteredFormat.numberFormat"):
        user_format = cell.get("userEnteredFormat") or {}
        number_format = _number_format(user_format.get("numberFormat"))
        box.sheet.formats.set_area(box.top, box.left, box.bottom, box.right, number_format)
    return {}


def presentation_only(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    """Column widths, borders and the like: checked for their sheet, then ignored."""
    target = payload.get("range") or payload.get("dimensions") or {}
    sheet_for(spreadsheet, target.get("sheetId") if isinstance(target, dict) else None)
    return {}


def _number_format(raw: Any) -> NumberFormat | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ApiError.invalid_argument("numberFormat must be an object.")
    kind = raw.get("type")
    if kind not in NUMBER_FORMAT_TYPES:
        raise ApiError.invalid_argument(
            f"Invalid value at 'requests.repeat_cell.cell.user_entered_format.number_format"
            f".type': {kind!r}"
        )
    pattern = raw.get("pattern") or ""
    if not isinstance(pattern, str):
        raise ApiError.invalid_argument("numberFormat.pattern must be a string.")
    return NumberFormat(kind, pattern)


def _rename(spreadsheet: Spreadsheet, sheet: Sheet, title: Any) -> None:
    if not isinstance(title, str) or not title.strip():
        raise ApiError.invalid_argument("The sheet name cannot be empty.")
    other = spreadsheet.sheet_by_title(title)
    if other is not None and other is not sheet:
        raise ApiError.invalid_argument(
            f'A sheet with the name "{title}" already exists. Please enter another name.'
        )
    sheet.title = title


def _hide(spreadsheet: Spreadsheet, sheet: Sheet, hidden: bool) -> None:
    if hidden and all(other.hidden or other is sheet for other in spreadsheet.sheets):
        # Google's words, as gspread's recording WorksheetTest.test_hide_show_worksheet has them.
        raise ApiError.invalid_argument("You can't hide all the sheets in a document.")
    sheet.hidden = hidden


def _grid_count(grid: dict[str, Any], name: str, mask: FieldMask, current: int) -> int:
    if not mask.has(f"gridProperties.{name}"):
        return current
    count = optional_int(grid.get(name), name)
    if count is None or count < 1:
        # Approximated wording: Google's for a zero-sized grid is not recorded.
        raise ApiError.invalid_argument(f"gridProperties.{name} must be at least 1.")
    return count


def _resize(spreadsheet: Spreadsheet, sheet: Sheet, rows: int, columns: int) -> None:
    if columns > MAX_COLUMNS:
        raise ApiError.invalid_argument(
            f"This action would increase the number of columns in the sheet above the "
            f"limit of {MAX_COLUMNS}."
        )
    # Google applies rowCount first and checks the limit after each step: a resize that
    # adds rows and removes columns can fail though its end size fits (gspread-dataframe
    # PR #38 found it); the emulator does the same.
    spreadsheet.check_cell_limit((rows - sheet.row_count) * sheet.column_count)
    sheet.resize(rows, sheet.column_count)
    spreadsheet.check_cell_limit(rows * (columns - sheet.column_count))
    sheet.resize(rows, columns)


def _move(spreadsheet: Spreadsheet, sheet: Sheet, position: int) -> None:
    spreadsheet.sheets.remove(sheet)
    spreadsheet.sheets.insert(position, sheet)


PROPERTY_HANDLERS: dict[str, Callable[[Spreadsheet, dict[str, Any], list[Undo]], Reply]] = {
    "updateSheetProperties": update_sheet_properties,
    "updateSpreadsheetProperties": update_spreadsheet_properties,
    "repeatCell": repeat_cell,
    "updateDimensionProperties": presentation_only,
    "autoResizeDimensions": presentation_only,
    "updateBorders": presentation_only,
}

"""batchUpdate requests that move cells or size the grid: deleteDimension,
insertDimension, appendDimension, moveDimension and sortRange.

Each records an undo (the sheet as it was) so a later failing request of the same batch
leaves the spreadsheet untouched. Formatting is not modelled, so ``inheritFromBefore``
is accepted and has no effect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sheets_emulator.a1 import MAX_COLUMNS
from sheets_emulator.api_errors import ApiError
from sheets_emulator.request_fields import (
    DIMENSIONS,
    Reply,
    Undo,
    dimension_span,
    grid_box,
    required_int,
    restore_point,
    sheet_for,
)
from sheets_emulator.sheets import Spreadsheet
from sheets_emulator.sorting import SortSpec, sort_rows

SORT_ORDERS = ("ASCENDING", "DESCENDING")


def delete_dimension(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    span = dimension_span(spreadsheet, payload)
    size = span.grid_size
    start = span.start or 0
    end = size if span.end is None else span.end
    if end > size:
        raise ApiError.invalid_argument(
            f"Cannot delete a {span.noun} that doesn't exist. Tried to delete {span.noun} "
            f"index {max(start, size)} but there are only {size} {span.noun}s."
        )
    _check_not_empty(start, end)
    if start == 0 and end == size:
        raise ApiError.invalid_argument(
            f"Sorry, it is not possible to delete all non-frozen {span.noun}s."
        )
    undo_log.append(restore_point(span.sheet))
    if span.dimension == "ROWS":
        span.sheet.delete_rows(start, end)
    else:
        span.sheet.delete_columns(start, end)
    return {}


def insert_dimension(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    span = dimension_span(spreadsheet, payload)
    sheet, size = span.sheet, span.grid_size
    start = span.start or 0
    end = span.end or 0  # an insert has no open end: protobuf's default 0
    _check_not_empty(start, end)
    if start > size:
        # Approximated wording: Google's for an insert past the grid is not recorded.
        raise ApiError.invalid_argument(
            f"Cannot insert {span.noun}s at index {start}: there are only {size} {span.noun}s."
        )
    count = end - start
    if span.dimension == "COLUMNS" and sheet.column_count + count > MAX_COLUMNS:
        raise ApiError.invalid_argument(
            f"This action would increase the number of columns in the sheet above the "
            f"limit of {MAX_COLUMNS}."
        )
    other_size = sheet.column_count if span.dimension == "ROWS" else sheet.row_count
    spreadsheet.check_cell_limit(count * other_size)
    undo_log.append(restore_point(sheet))
    if span.dimension == "ROWS":
        sheet.insert_rows(start, count)
    else:
        sheet.insert_columns(start, count)
    return {}


def append_dimension(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    """``length`` empty rows or columns at the end of sheet ``sheetId``."""
    sheet = sheet_for(spreadsheet, payload.get("sheetId"))
    dimension = payload.get("dimension")
    if dimension not in DIMENSIONS:
        # Approximated wording: Google's for DIMENSION_UNSPECIFIED is not recorded.
        raise ApiError.invalid_argument("dimension must be ROWS or COLUMNS.")
    length = required_int(payload.get("length", 0), "length")
    if length < 1:
        # Approximated wording: Google's for a length of 0 is not recorded.
        raise ApiError.invalid_argument("length must be greater than 0.")
    if dimension == "COLUMNS" and sheet.column_count + length > MAX_COLUMNS:
        raise ApiError.invalid_argument(
            f"This action would increase the number of columns in the sheet above the "
            f"limit of {MAX_COLUMNS}."
        )
    other_size = sheet.column_count if dimension == "ROWS" else sheet.row_count
    spreadsheet.check_cell_limit(length * other_size)
    undo_log.append(restore_point(sheet))
    if dimension == "ROWS":
        sheet.insert_rows(sheet.row_count, length)
    else:
        sheet.insert_columns(sheet.column_count, length)
    return {}


def move_dimension(
    spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]
) -> Reply:
    """``source`` (a DimensionRange) moves before ``destinationIndex``, an index counted
    before the move, as Google documents: to move column A after C, say 3."""
    span = dimension_span(spreadsheet, {"range": payload.get("source")})
    size = span.grid_size
    start = span.start or 0
    end = size if span.end is None else span.end
    _check_not_empty(start, end)
    destination = required_int(payload.get("destinationIndex", 0), "destinationIndex")
    if end > size or not 0 <= destination <= size:
        # Approximated wording: Google's for a move outside the grid is not recorded.
        raise ApiError.invalid_argument(
            f"Cannot move {span.noun}s {start}..{end - 1} to {destination}: there are only "
            f"{size} {span.noun}s."
        )
    if start <= destination <= end:
        return {}  # onto itself: nothing moves
    undo_log.append(restore_point(span.sheet))
    if span.dimension == "ROWS":
        span.sheet.move_rows(start, end, destination)
    else:
        span.sheet.move_columns(start, end, destination)
    return {}


def sort_range(spreadsheet: Spreadsheet, payload: dict[str, Any], undo_log: list[Undo]) -> Reply:
    box = grid_box(spreadsheet, payload.get("range"))
    raw_specs = payload.get("sortSpecs")
    if not isinstance(raw_specs, list) or not raw_specs:
        raise ApiError.invalid_argument("At least one sortSpec is required.")
    specs = [_sort_spec(index, spec, box.left, box.right) for index, spec in enumerate(raw_specs)]
    undo_log.append(restore_point(box.sheet))
    sort_rows(box.sheet, box.top, box.left, box.bottom, box.right, specs)
    return {}


def _sort_spec(position: int, spec: Any, left: int, right: int) -> SortSpec:
    if not isinstance(spec, dict) or "dimensionIndex" not in spec:
        raise ApiError.invalid_argument(f"sortSpecs[{position}].dimensionIndex must be set.")
    column = required_int(spec["dimensionIndex"], "dimensionIndex")
    if not left <= column < right:
        # Approximated wording: Google's for a sort column outside the range is not recorded.
        raise ApiError.invalid_argument(
            f"sortSpecs[{position}].dimensionIndex ({column}) is outside the range's columns."
        )
    order = spec.get("sortOrder", "ASCENDING")
    if order not in SORT_ORDERS:
        raise ApiError.invalid_argument(
            f"Invalid value at 'sortSpecs[{position}].sortOrder': {order!r}"
        )
    return SortSpec(column, descending=order == "DESCENDING")


def _check_not_empty(start: int, end: int) -> None:
    if start >= end:
        # Approximated wording: Google's for an empty DimensionRange is not recorded.
        raise ApiError.invalid_argument(
            f"DimensionRange startIndex ({start}) must be less than endIndex ({end})."
        )


GRID_HANDLERS: dict[str, Callable[[Spreadsheet, dict[str, Any], list[Undo]], Reply]] = {
    "deleteDimension": delete_dimension,
    "insertDimension": insert_dimension,
    "appendDimension": append_dimension,
    "sortRange": sort_range,
    "moveDimension": move_dimension,
}

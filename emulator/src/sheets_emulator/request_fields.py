"""Fields of batchUpdate requests, read and checked the way Google checks them.

Integer fields arrive as JSON numbers or strings (protobuf's JSON mapping allows both).
An absent ``sheetId`` is 0, protobuf's default, so it names the first sheet of a new
spreadsheet, as it does at Google.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sheets_emulator.a1 import format_range
from sheets_emulator.api_errors import ApiError
from sheets_emulator.partial import Mask, parse_fields
from sheets_emulator.sheets import Sheet, Spreadsheet

#: Undoes one applied request when a later request of the batch fails.
Undo = Callable[[], None]
#: One entry of the batchUpdate ``replies``.
Reply = dict[str, Any]
Dimension = Literal["ROWS", "COLUMNS"]
DIMENSIONS: tuple[Dimension, ...] = ("ROWS", "COLUMNS")


@dataclass(frozen=True)
class FieldMask:
    """A request's ``fields``: which of its properties to apply."""

    paths: frozenset[str]

    @classmethod
    def parse(
        cls, raw: Any, known: tuple[str, ...], presentation: tuple[str, ...] = ()
    ) -> FieldMask:
        """Parse ``"title,gridProperties/rowCount"``; ``*`` stands for every known field.

        Paths under ``presentation`` (colours, fonts: what the emulator does not model
        and no value depends on) are accepted and have no effect; any other unknown path
        is refused, so a test never believes a change was made that was not.
        """
        if not isinstance(raw, str) or not raw.strip():
            # Approximated wording: Google's for a missing mask is not recorded.
            raise ApiError.invalid_argument("At least one field must be specified in 'fields'.")
        paths = set(_flatten(parse_fields(raw)))
        if "*" in paths:
            return cls(frozenset(known))
        for path in paths:
            if any(path == name or path.startswith(name + ".") for name in presentation):
                continue
            if not any(name == path or name.startswith(path + ".") for name in known):
                raise ApiError.invalid_argument(
                    f"Invalid field mask path: {path!r} (the emulator models {', '.join(known)})."
                )
        return cls(frozenset(paths))

    def has(self, name: str) -> bool:
        """True when the mask names ``name`` or a field that contains it."""
        parts = name.split(".")
        return any(".".join(parts[:end]) in self.paths for end in range(1, len(parts) + 1))


@dataclass(frozen=True)
class DimensionSpan:
    """A DimensionRange: ``start`` and ``end`` are None where the request left them open."""

    sheet: Sheet
    dimension: Dimension
    start: int | None
    end: int | None

    @property
    def noun(self) -> str:
        return "row" if self.dimension == "ROWS" else "column"

    @property
    def grid_size(self) -> int:
        return self.sheet.row_count if self.dimension == "ROWS" else self.sheet.column_count


@dataclass(frozen=True)
class GridBox:
    """A GridRange with its open ends closed at the grid's edge (end-exclusive)."""

    sheet: Sheet
    top: int
    left: int
    bottom: int
    right: int


def optional_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    return required_int(value, name)


def required_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise ApiError.invalid_argument(f"Invalid value for {name}: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise ApiError.invalid_argument(f"Invalid value for {name}: {value!r}") from error


def _flatten(mask: Mask, prefix: str = "") -> list[str]:
    """``{"a": {"b": {}, "c": {}}}`` as ``["a.b", "a.c"]``."""
    paths: list[str] = []
    for name, inner in mask.items():
        path = f"{prefix}{name}"
        paths.extend(_flatten(inner, path + ".") if inner else [path])
    return paths


def sheet_for(spreadsheet: Spreadsheet, sheet_id: Any) -> Sheet:
    """The sheet with this id; Google's 400 ``No grid with id: N`` when there is none."""
    number = required_int(0 if sheet_id is None else sheet_id, "sheetId")
    sheet = spreadsheet.sheet_by_id(number)
    if sheet is None:
        raise ApiError.invalid_argument(f"No grid with id: {number}")
    return sheet


def dimension_span(spreadsheet: Spreadsheet, payload: dict[str, Any]) -> DimensionSpan:
    """The ``range`` (a DimensionRange) of deleteDimension or insertDimension."""
    span = payload.get("range")
    if not isinstance(span, dict):
        raise ApiError.invalid_argument("range must be set.")
    sheet = sheet_for(spreadsheet, span.get("sheetId"))
    dimension = span.get("dimension")
    if dimension not in DIMENSIONS:
        # Approximated wording: Google's for DIMENSION_UNSPECIFIED is not recorded.
        raise ApiError.invalid_argument("range.dimension must be ROWS or COLUMNS.")
    start = optional_int(span.get("startIndex"), "startIndex")
    end = optional_int(span.get("endIndex"), "endIndex")
    if (start is not None and start < 0) or (end is not None and end < 0):
        raise ApiError.invalid_argument("DimensionRange indexes must be >= 0")
    return DimensionSpan(sheet, dimension, start, end)


def grid_box(spreadsheet: Spreadsheet, grid_range: Any) -> GridBox:
    """A GridRange (``sheetId``, ``start/endRowIndex``, ``start/endColumnIndex``)."""
    if not isinstance(grid_range, dict):
        raise ApiError.invalid_argument("range must be set.")
    sheet = sheet_for(spreadsheet, grid_range.get("sheetId"))
    bounds = {
        name: optional_int(grid_range.get(name), name)
        for name in ("startRowIndex", "endRowIndex", "startColumnIndex", "endColumnIndex")
    }
    if any(bound is not None and bound < 0 for bound in bounds.values()):
        raise ApiError.invalid_argument("GridRange indexes must be >= 0")
    top = bounds["startRowIndex"] or 0
    left = bounds["startColumnIndex"] or 0
    bottom = bounds["endRowIndex"]
    right = bounds["endColumnIndex"]
    bottom = sheet.row_count if bottom is None else bottom
    right = sheet.column_count if right is None else right
    if bottom > sheet.row_count or right > sheet.column_count:
        shown = format_range(sheet.title, top, left, max(bottom, top + 1), max(right, left + 1))
        raise ApiError.invalid_argument(
            f"Range ({shown}) exceeds grid limits. Max rows: {sheet.row_count}, "
            f"max columns: {sheet.column_count}"
        )
    if top > bottom or left > right:
        raise ApiError.invalid_argument("GridRange start indexes must not exceed end indexes.")
    return GridBox(sheet, top, left, bottom, right)


def restore_point(sheet: Sheet) -> Undo:
    """An undo that puts the sheet's cells, formats and properties back as they are now."""
    rows = [list(cells) for cells in sheet.rows]
    grid = (sheet.row_count, sheet.column_count)
    formats = sheet.formats.copy()
    title, hidden, frozen = sheet.title, sheet.hidden, dict(sheet.frozen)

    def undo() -> None:
        sheet.rows[:] = rows
        sheet.row_count, sheet.column_count = grid
        sheet.formats = formats
        sheet.title, sheet.hidden, sheet.frozen = title, hidden, frozen

    return undo

"""The number formats of a sheet's cells, kept apart from their values.

A format applies to empty cells too (``repeatCell`` over a whole column formats the
rows not written yet), so formats are areas (later ones win) plus single cells (a date
typed as USER_ENTERED takes the format of the style it was typed in). Inserting or
deleting rows and columns moves them as it moves the cells; rows or columns inserted
inside or next to an area take its format, as inserted rows inherit their neighbours'
(the emulator does not tell before from after), growing the grid extends an area
that reaches its last row or column, and moved rows or columns take their formats along.
Sorting does not move formats (the emulator's simplification).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from sheets_emulator.numfmt import NumberFormat

Axis = str  # "ROWS" or "COLUMNS"


@dataclass
class FormatArea:
    """Rows ``top`` to ``bottom - 1`` and columns ``left`` to ``right - 1``."""

    top: int
    left: int
    bottom: int
    right: int
    number_format: NumberFormat | None

    def covers(self, row: int, col: int) -> bool:
        return self.top <= row < self.bottom and self.left <= col < self.right


class FormatBook:
    def __init__(self) -> None:
        self.areas: list[FormatArea] = []
        self.cells: dict[tuple[int, int], NumberFormat | None] = {}

    def at(self, row: int, col: int) -> NumberFormat | None:
        if (row, col) in self.cells:
            return self.cells[(row, col)]
        for area in reversed(self.areas):
            if area.covers(row, col):
                return area.number_format
        return None

    def set_area(
        self, top: int, left: int, bottom: int, right: int, number_format: NumberFormat | None
    ) -> None:
        area = FormatArea(top, left, bottom, right, number_format)
        self.cells = {key: value for key, value in self.cells.items() if not area.covers(*key)}
        self.areas = [
            old
            for old in self.areas
            if not (
                top <= old.top and old.bottom <= bottom and left <= old.left and old.right <= right
            )
        ]
        self.areas.append(area)

    def set_cell(self, row: int, col: int, number_format: NumberFormat | None) -> None:
        self.cells[(row, col)] = number_format

    def insert(self, axis: Axis, at: int, count: int) -> None:
        for area in self.areas:
            low, high = _bounds(area, axis)
            if low > at:
                low, high = low + count, high + count
            elif high >= at:  # inserted next to or inside the area: they take its format
                high += count
            _set_bounds(area, axis, low, high)
        index = 0 if axis == "ROWS" else 1
        self.cells = {
            _moved(key, index, key[index] + count if key[index] >= at else key[index]): value
            for key, value in self.cells.items()
        }

    def delete(self, axis: Axis, start: int, end: int) -> None:
        removed = end - start

        def shifted(bound: int) -> int:
            if bound <= start:
                return bound
            return start if bound < end else bound - removed

        for area in self.areas:
            low, high = _bounds(area, axis)
            _set_bounds(area, axis, shifted(low), shifted(high))
        self.areas = [area for area in self.areas if area.top < area.bottom]
        self.areas = [area for area in self.areas if area.left < area.right]
        index = 0 if axis == "ROWS" else 1
        self.cells = {
            _moved(key, index, key[index] - removed if key[index] >= end else key[index]): value
            for key, value in self.cells.items()
            if not start <= key[index] < end
        }

    def move(self, axis: Axis, start: int, end: int, destination: int) -> None:
        """Rows or columns ``start..end-1`` moved to sit before ``destination`` (an index
        before the move); an area the move splits becomes one area per piece."""
        position = _moved_position(start, end, destination)
        areas: list[FormatArea] = []
        for area in self.areas:
            low, high = _bounds(area, axis)
            moved = sorted(position(index) for index in range(low, high))
            run_start = moved[0] if moved else 0
            for previous, current in zip(moved, [*moved[1:], None], strict=True):
                if current != previous + 1:
                    piece = copy.copy(area)
                    _set_bounds(piece, axis, run_start, previous + 1)
                    areas.append(piece)
                    run_start = current if current is not None else 0
        self.areas = areas
        index = 0 if axis == "ROWS" else 1
        self.cells = {
            _moved(key, index, position(key[index])): value for key, value in self.cells.items()
        }

    def grow(self, axis: Axis, old_size: int, new_size: int) -> None:
        for area in self.areas:
            low, high = _bounds(area, axis)
            if high == old_size and new_size > old_size:
                _set_bounds(area, axis, low, new_size)

    def truncate(self, axis: Axis, size: int) -> None:
        """The grid shrank to ``size``: forget what lies beyond it."""
        for area in self.areas:
            low, high = _bounds(area, axis)
            _set_bounds(area, axis, min(low, size), min(high, size))
        self.areas = [a for a in self.areas if a.top < a.bottom and a.left < a.right]
        index = 0 if axis == "ROWS" else 1
        self.cells = {key: value for key, value in self.cells.items() if key[index] < size}

    def copy(self) -> FormatBook:
        return copy.deepcopy(self)


def _moved_position(start: int, end: int, destination: int) -> Callable[[int], int]:
    """Where index ``i`` goes when ``start..end-1`` moves before ``destination``."""
    count = end - start

    def position(index: int) -> int:
        if destination > end:  # moved down
            if start <= index < end:
                return index + destination - end
            return index - count if end <= index < destination else index
        if start <= index < end:  # moved up
            return destination + index - start
        return index + count if destination <= index < start else index

    return position


def _bounds(area: FormatArea, axis: Axis) -> tuple[int, int]:
    return (area.top, area.bottom) if axis == "ROWS" else (area.left, area.right)


def _set_bounds(area: FormatArea, axis: Axis, low: int, high: int) -> None:
    if axis == "ROWS":
        area.top, area.bottom = low, high
    else:
        area.left, area.right = low, high


def _moved(key: tuple[int, int], index: int, value: int) -> tuple[int, int]:
    return (value, key[1]) if index == 0 else (key[0], value)

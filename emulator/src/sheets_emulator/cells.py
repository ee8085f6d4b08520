"""Cell values: how input is stored (RAW vs USER_ENTERED) and how it is read back.

A stored cell is a :data:`CellValue`: a string, a number, a boolean or a
:class:`Formula`. An empty cell is ``None`` (an empty string is stored as empty too,
as Google does).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sheets_emulator.errors import EmulatorError
from sheets_emulator.numfmt import NumberFormat, format_with

#: Google's limit on the characters in one cell, counted in UTF-16 code units as Sheets
#: (JavaScript/Java strings) counts them: an emoji outside the BMP counts 2.
MAX_CELL_CHARS = 50_000

CELL_TOO_LONG_MESSAGE = (
    f"Your input contains more than the maximum of {MAX_CELL_CHARS} characters in a single cell."
)

VALUE_INPUT_OPTIONS = ("RAW", "USER_ENTERED")
VALUE_RENDER_OPTIONS = ("FORMATTED_VALUE", "UNFORMATTED_VALUE", "FORMULA")
DATE_TIME_RENDER_OPTIONS = ("SERIAL_NUMBER", "FORMATTED_STRING")

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


@dataclass(frozen=True)
class Formula:
    """A formula as the user entered it, ``=`` included."""

    text: str


class Keep(enum.Enum):
    """Marks a JSON ``null`` in written values: leave that cell as it is."""

    CELL = "keep"


#: The one :class:`Keep` value.
KEEP = Keep.CELL

CellValue = str | int | float | bool | Formula
#: What a write may put in a cell: a value, ``None`` (clear it) or :data:`KEEP`.
CellInput = CellValue | None | Keep
#: What a formula evaluates to: a scalar, or an error code such as ``#NAME?``.
Scalar = str | int | float | bool


class CellInputError(EmulatorError, ValueError):
    """A value cannot be stored (too long, or not a JSON scalar)."""


def parse_input(value: Any, input_option: str) -> CellInput:
    """Turn one JSON value from a request into what the cell stores.

    RAW keeps strings exactly as sent. USER_ENTERED parses them as if typed into the
    UI: ``=...`` becomes a formula, ``0012`` the number 12, ``TRUE`` a boolean, and a
    leading apostrophe forces text (and is dropped). ``null`` leaves the cell alone.
    """
    if value is None:
        return KEEP
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise CellInputError("Invalid value: numbers must be finite.")
        return value
    if not isinstance(value, str):
        raise CellInputError(f"Invalid value at 'data.values': {type(value).__name__}")
    check_cell_length(value)
    if value == "":
        return None
    if input_option == "RAW":
        return value
    return _parse_user_entered(value)


def utf16_length(text: str) -> int:
    """The length of ``text`` in UTF-16 code units (what Sheets counts)."""
    return len(text.encode("utf-16-le")) // 2


def check_cell_length(text: str) -> None:
    """Refuse text over Google's per-cell limit (the whole request fails, as Google's)."""
    # A text of n code points has at most 2n code units: short texts skip the encoding.
    if 2 * len(text) > MAX_CELL_CHARS and utf16_length(text) > MAX_CELL_CHARS:
        raise CellInputError(CELL_TOO_LONG_MESSAGE)


def _parse_user_entered(text: str) -> CellValue:
    if text.startswith("'"):
        return text[1:] or text
    if text.startswith("=") and len(text) > 1:
        return Formula(text)
    if _NUMBER.match(text):
        return _as_number(float(text))
    if text.upper() in ("TRUE", "FALSE"):
        return text.upper() == "TRUE"
    return text


def _as_number(number: float) -> int | float:
    if number.is_integer() and abs(number) < 2**53:
        return int(number)
    return number


def parse_extended_value(value: Any) -> CellValue | None:
    """Turn a batchUpdate ``userEnteredValue`` (``{"stringValue": ...}`` etc.) into a cell."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise CellInputError("Invalid userEnteredValue: exactly one value kind must be set.")
    ((kind, payload),) = value.items()
    if kind == "stringValue" and isinstance(payload, str):
        return _raw(payload)
    if kind == "numberValue" and isinstance(payload, int | float) and not isinstance(payload, bool):
        return _raw(payload)
    if kind == "boolValue" and isinstance(payload, bool):
        return payload
    if kind == "formulaValue" and isinstance(payload, str):
        check_cell_length(payload)
        return Formula(payload) if payload.startswith("=") else _raw(payload)
    raise CellInputError(f"Invalid userEnteredValue kind: {kind}")


def _raw(value: str | int | float) -> CellValue | None:
    parsed = parse_input(value, "RAW")
    assert not isinstance(parsed, Keep)
    return parsed


def format_number(number: int | float) -> str:
    """Numbers as Google's default (automatic) format shows them: ``12``, ``0.3333333333``."""
    if isinstance(number, int) or (number.is_integer() and abs(number) < 1e15):
        return str(int(number))
    return f"{number:.10g}".upper()


def render(
    cell: CellValue | None,
    render_option: str,
    evaluate: Callable[[Formula], Scalar],
    number_format: NumberFormat | None = None,
    date_time_option: str = "SERIAL_NUMBER",
) -> str | int | float | bool:
    """A cell as values.get returns it under ``render_option``; empty cells are ``""``.

    A number in a date, time or date-time cell is its serial number unless the value is
    formatted, or ``date_time_option`` is ``FORMATTED_STRING`` (Google ignores that
    option for FORMATTED_VALUE).
    """
    if cell is None:
        return ""
    if isinstance(cell, Formula):
        if render_option == "FORMULA":
            return cell.text
        cell = evaluate(cell)
    if isinstance(cell, bool):
        return cell if render_option != "FORMATTED_VALUE" else ("TRUE" if cell else "FALSE")
    if not isinstance(cell, int | float):
        return cell
    if render_option != "FORMATTED_VALUE":
        dated = number_format is not None and number_format.is_date
        if dated and date_time_option == "FORMATTED_STRING":
            assert number_format is not None
            return format_with(cell, number_format)
        return cell
    if number_format is not None:
        return format_with(cell, number_format)
    return format_number(cell)

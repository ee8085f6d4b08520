"""Number formats: serial dates, dates typed as USER_ENTERED, and formatted values.

Sheets stores a date as a serial number (days since 1899-12-30, the time of day as the
fraction) and shows it through the cell's number format. The recording
``WorksheetTest.test_get_all_records_value_render_options`` shows it: ``2020-01-01``
typed (USER_ENTERED) reads back as ``"2020-01-01"`` formatted and ``43831`` unformatted
and as a formula. Typed dates keep the style they were typed in as their format; the
en_US entry styles modelled are ``yyyy-mm-dd``, ``yyyy/mm/dd`` and ``m/d/yyyy``, each
with an optional ``h:mm`` or ``h:mm:ss`` time. Patterns follow Sheets' date and number
format tokens (``yyyy mm m dd d hh h ss am/pm``, ``0 # , . %``); a pattern using a token
outside these is shown with the tokens it has.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

#: Day 0 of Sheets' serial dates.
EPOCH = datetime(1899, 12, 30)
DATE_TYPES = ("DATE", "TIME", "DATE_TIME")
NUMBER_FORMAT_TYPES = (
    "TEXT",
    "NUMBER",
    "PERCENT",
    "CURRENCY",
    "DATE",
    "TIME",
    "DATE_TIME",
    "SCIENTIFIC",
)
#: The en_US patterns of a number format given only its type.
DEFAULT_PATTERNS = {
    "TEXT": "@",
    "NUMBER": "#,##0.00",
    "PERCENT": "0.00%",
    "CURRENCY": '"$"#,##0.00',
    "DATE": "M/d/yyyy",
    "TIME": "h:mm:ss am/pm",
    "DATE_TIME": "M/d/yyyy H:mm:ss",
    "SCIENTIFIC": "0.00E+00",
}


@dataclass(frozen=True)
class NumberFormat:
    """A cell's ``userEnteredFormat.numberFormat``."""

    type: str
    pattern: str = ""

    @property
    def is_date(self) -> bool:
        return self.type in DATE_TYPES

    def as_json(self) -> dict[str, str]:
        result = {"type": self.type}
        if self.pattern:
            result["pattern"] = self.pattern
        return result


def to_serial(moment: datetime) -> float | int:
    """A naive datetime as a serial number (an int when it is midnight)."""
    delta = moment - EPOCH
    serial = delta.days + delta.seconds / 86_400 + delta.microseconds / 86_400e6
    return int(serial) if float(serial).is_integer() else serial


def from_serial(serial: float) -> datetime:
    """The wall-clock datetime of a serial number, to the millisecond."""
    return EPOCH + timedelta(milliseconds=round(serial * 86_400_000))


_TIME = r"(?: (\d{1,2}):(\d{2})(?::(\d{2}))?)?"
_ENTRY_STYLES = (
    (re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})" + _TIME + "$"), "ymd", "yyyy-mm-dd"),
    (re.compile(r"^(\d{4})/(\d{1,2})/(\d{1,2})" + _TIME + "$"), "ymd", "yyyy/mm/dd"),
    (re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})" + _TIME + "$"), "mdy", "m/d/yyyy"),
)


def parse_date_entry(text: str) -> tuple[int | float, NumberFormat] | None:
    """A typed date (USER_ENTERED) as its serial number and the format Sheets gives it."""
    stripped = text.strip()
    for pattern, order, date_pattern in _ENTRY_STYLES:
        match = pattern.match(stripped)
        if match is None:
            continue
        first, second, third, hour, minute, second_of_minute = match.groups()
        if order == "ymd":
            year, month, day = int(first), int(second), int(third)
        else:
            month, day, year = int(first), int(second), int(third)
        try:
            moment = datetime(
                year, month, day, int(hour or 0), int(minute or 0), int(second_of_minute or 0)
            )
        except ValueError:
            return None
        if hour is None:
            return to_serial(moment), NumberFormat("DATE", date_pattern)
        time_pattern = "hh:mm:ss" if second_of_minute is not None else "hh:mm"
        return to_serial(moment), NumberFormat("DATE_TIME", f"{date_pattern} {time_pattern}")
    return None


def format_with(number: int | float, number_format: NumberFormat) -> str:
    """``number`` as a cell with ``number_format`` shows it."""
    pattern = number_format.pattern or DEFAULT_PATTERNS.get(number_format.type, "")
    if number_format.type == "TEXT" or pattern in ("", "@"):
        return _plain(number)
    if number_format.is_date or _has_date_tokens(pattern):
        try:
            moment = from_serial(number)
            if not re.search(r"\.0", pattern):
                moment = from_serial(round(number * 86_400) / 86_400)
            return _format_date(moment, pattern)
        except (OverflowError, ValueError):
            return _plain(number)
    return _format_number(number, pattern)


def _plain(number: int | float) -> str:
    if isinstance(number, int) or (number.is_integer() and abs(number) < 1e15):
        return str(int(number))
    return f"{number:.10g}".upper()


_DATE_TOKEN = re.compile(
    r'"[^"]*"|\\.|am/pm|a/p|yyyy|yy|mmmmm|mmmm|mmm|mm|m|dddd|ddd|dd|d|hh|h|ss|s|\.0+|.',
    re.IGNORECASE,
)
_MONTHS = calendar.month_name[1:]
_DAYS = calendar.day_name[:]


def _has_date_tokens(pattern: str) -> bool:
    unquoted = re.sub(r'"[^"]*"|\\.', "", pattern)
    return bool(re.search(r"[ydhs]", unquoted, re.IGNORECASE))


def _format_date(moment: datetime, pattern: str) -> str:
    tokens = _DATE_TOKEN.findall(pattern)
    twelve_hour = any(token.lower() in ("am/pm", "a/p") for token in tokens)
    parts: list[str] = []
    for position, token in enumerate(tokens):
        lower = token.lower()
        if lower.startswith("m") and lower != "am/pm" and len(lower) <= 2:
            before = next((t.lower() for t in reversed(tokens[:position]) if t.isalpha()), "")
            after = next((t.lower() for t in tokens[position + 1 :] if t.isalpha()), "")
            if before.startswith("h") or after.startswith("s"):
                lower = "min" + lower
        parts.append(_date_part(moment, token, lower, twelve_hour))
    return "".join(parts)


def _date_part(moment: datetime, token: str, lower: str, twelve_hour: bool) -> str:
    hour = moment.hour % 12 or 12 if twelve_hour else moment.hour
    simple = {
        "yyyy": f"{moment.year:04d}",
        "yy": f"{moment.year % 100:02d}",
        "mmmmm": _MONTHS[moment.month - 1][0],
        "mmmm": _MONTHS[moment.month - 1],
        "mmm": _MONTHS[moment.month - 1][:3],
        "mm": f"{moment.month:02d}",
        "m": str(moment.month),
        "minmm": f"{moment.minute:02d}",
        "minm": str(moment.minute),
        "dddd": _DAYS[moment.weekday()],
        "ddd": _DAYS[moment.weekday()][:3],
        "dd": f"{moment.day:02d}",
        "d": str(moment.day),
        "hh": f"{hour:02d}",
        "h": str(hour),
        "ss": f"{moment.second:02d}",
        "s": str(moment.second),
    }
    if lower in simple:
        return simple[lower]
    if lower == "am/pm":
        text = "AM" if moment.hour < 12 else "PM"
        return text if token[0].isupper() else text.lower()
    if lower == "a/p":
        return "A" if moment.hour < 12 else "P"
    if token.startswith(".") and set(token[1:]) == {"0"}:
        digits = len(token) - 1
        return "." + f"{moment.microsecond / 1e6:.{digits}f}"[2:]
    if token.startswith('"'):
        return token[1:-1]
    if token.startswith("\\"):
        return token[1:]
    return token


_NUMBER_BODY = re.compile(r"[#0,]*[0#](?:\.[0#]*)?(?:E\+0+)?")


def _format_number(number: int | float, pattern: str) -> str:
    section = pattern.split(";", maxsplit=1)[0]
    literal = re.sub(r'"([^"]*)"|\\(.)', lambda m: m.group(1) or m.group(2) or "", section)
    match = _NUMBER_BODY.search(literal)
    if match is None:
        return literal
    body = match.group(0)
    prefix, suffix = literal[: match.start()], literal[match.end() :]
    value = float(number) * (100 if "%" in suffix or "%" in prefix else 1)
    integer_part, _, decimals = body.partition(".")
    if "E+" in body:
        digits = len(decimals.split("E")[0])
        mantissa, exponent = f"{value:.{digits}E}".split("E")
        return f"{prefix}{mantissa}E+{int(exponent):02d}{suffix}"
    min_decimals = decimals.count("0")
    max_decimals = len(decimals)
    # Sheets rounds half away from zero (Python's format rounds half to even).
    try:
        rounded = Decimal(repr(abs(value))).quantize(
            Decimal(1).scaleb(-max_decimals), ROUND_HALF_UP
        )
    except InvalidOperation:  # more digits than Decimal's precision: Sheets shows 1E+300
        return _plain(number)
    text = f"{rounded:.{max_decimals}f}"
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0").ljust(min_decimals, "0")
    if whole == "0" and "0" not in integer_part:
        whole = ""
    if "," in integer_part:
        whole = f"{int(whole or 0):,}" if whole else ""
    sign = "-" if value < 0 and not math.isclose(value, 0) else ""
    return f"{sign}{prefix}{whole}{'.' + fraction if fraction else ''}{suffix}"

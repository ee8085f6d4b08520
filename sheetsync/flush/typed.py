"""Typed cells: numbers and dates as Sheets stores them, everything else text.

Rows are sent RAW, so a JSON number becomes a number cell and a string stays text
exactly as typed (``=1+1``, ``+1 555``, ``0012`` and ``@x`` are never formulas or
numbers). A NUMBER answer that reads as a plain decimal becomes a number; a DATE answer
and "Submitted at" become serial dates (days since 1899-12-30, the fraction the time of
day), in the link's time zone, shown by the number format their column gets when it is
created (:mod:`sheetsync.flush.columns`). A value that does not parse stays text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sheetsync.models import QuestionType
from sheetsync.settings import Settings

#: What a cell of a row may be: text, or a number (a serial date is a number too).
Cell = str | int | float

#: Day 0 of Sheets' serial dates.
_SERIAL_EPOCH = datetime(1899, 12, 30)
#: A plain decimal: no leading zeros (``0012`` is an identifier), no sign but ``-``,
#: no spaces, no thousands separators.
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?")
#: The largest integer a double (a Sheets number) holds exactly.
_EXACT_INT = 2**53


def parse_number(text: str) -> Cell:
    """``text`` as a number if it is a plain decimal a double holds, else ``text``."""
    if len(text) > 40 or not _DECIMAL.fullmatch(text):
        return text
    if "." not in text and "e" not in text.lower():
        number = int(text)
        return number if abs(number) < _EXACT_INT else text
    value = float(text)
    return value if math.isfinite(value) else text


def parse_date(text: str, zone: tzinfo) -> Cell:
    """An ISO date (``2024-05-01``) as a whole serial day; an ISO date-time as a serial
    with its time, in ``zone`` when it carries an offset; anything else stays text."""
    try:
        if len(text) == 10:
            return (date.fromisoformat(text) - _SERIAL_EPOCH.date()).days
        if 10 < len(text) <= 40 and text[10] in "T ":
            return serial_date_time(datetime.fromisoformat(text), zone, naive_is_local=True)
    except (ValueError, OverflowError):
        pass
    return text


def serial_date_time(value: datetime, zone: tzinfo, *, naive_is_local: bool = False) -> float:
    """``value`` in ``zone`` as a serial date-time, to the second. A naive value is UTC
    (as the database stores times), or already local with ``naive_is_local``."""
    if value.tzinfo is None and not naive_is_local:
        value = value.replace(tzinfo=UTC)
    local = value.astimezone(zone).replace(tzinfo=None) if value.tzinfo else value
    seconds = round((local - _SERIAL_EPOCH) / timedelta(seconds=1))
    return seconds / 86_400


def typed_columns(
    columns: Iterable[tuple[int, QuestionType | str]], zone: tzinfo
) -> tuple[tuple[int, Callable[[str], Cell]], ...]:
    """(cell index, parser) for each NUMBER and DATE column of ``(index, type)``."""
    parsers: list[tuple[int, Callable[[str], Cell]]] = []
    for index, kind in columns:
        if kind is QuestionType.NUMBER:
            parsers.append((index, parse_number))
        elif kind is QuestionType.DATE:
            parsers.append((index, lambda text: parse_date(text, zone)))
    return tuple(parsers)


def link_zone(settings: Settings, spreadsheet_zone: str | None) -> tzinfo:
    """The zone of a link's dates: the spreadsheet's own, unless it has none, names a
    zone this host does not know, or SHEETSYNC_FORCE_TIMEZONE is set; then
    SHEETSYNC_TIMEZONE."""
    if spreadsheet_zone and not settings.force_timezone:
        try:
            return ZoneInfo(spreadsheet_zone)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return ZoneInfo(settings.timezone)

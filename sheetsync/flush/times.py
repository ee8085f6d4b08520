"""Times as a sheet shows them in text: ``YYYY-MM-DD HH:MM:SS`` in a zone, and a formatter
that gives the same text about five times faster, for the rows of a batch."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, tzinfo


def format_time(value: datetime, zone: tzinfo) -> str:
    """``value`` as ``YYYY-MM-DD HH:MM:SS`` in ``zone``; a naive value is taken as UTC.

    The reference for :func:`time_formatter`, which gives the same text faster.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # isoformat is about twice as fast as strftime and gives the same first 19 characters.
    return value.astimezone(zone).isoformat(" ", "seconds")[:19]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_SECOND = timedelta(seconds=1)
_LAST_SECOND_OF_HOUR = timedelta(seconds=3599)
#: `` HH`` for every hour, and ``:MM:SS`` for every second of an hour (3600 short strings).
_HOUR_TEXT = tuple(f" {hour:02d}" for hour in range(24))
_MINUTE_SECOND_TEXT = tuple(
    f":{minute:02d}:{second:02d}" for minute in range(60) for second in range(60)
)
#: Marks a UTC hour in which the zone's offset changes (a DST switch, say).
_MIXED = 1 << 40
#: Cached hours and days per formatter, before the caches start over.
_CACHE_ENTRIES = 4096


def time_formatter(zone: tzinfo) -> Callable[[datetime], str]:
    """A function giving :func:`format_time` ``(value, zone)``, about five times faster.

    It works in whole seconds since the epoch: the zone's offset is looked up once per
    UTC hour (checked at both ends of the hour; an hour with a change of offset, such as
    a DST switch, is left to :func:`format_time`), and the ``YYYY-MM-DD HH`` text once
    per local hour. The rest is arithmetic and a table of ``:MM:SS``. Use one per zone
    and batch (or longer: the caches are bounded).
    """
    offsets: dict[int, int] = {}  # UTC hour since the epoch -> offset in seconds, or _MIXED
    hours: dict[int, str] = {}  # local hour since the epoch -> "YYYY-MM-DD HH"

    def offset_of(hour: int) -> int:
        start = _EPOCH + timedelta(hours=hour)
        try:
            first = start.astimezone(zone).utcoffset()
            last = (start + _LAST_SECOND_OF_HOUR).astimezone(zone).utcoffset()
        except OverflowError:  # the ends of datetime's range
            return _MIXED
        if first is None or first != last:
            return _MIXED
        return first // _SECOND

    def format_local(value: datetime) -> str:
        try:
            seconds: int = (value - _EPOCH) // _SECOND
        except TypeError:  # naive, or a tzinfo without an offset
            return format_time(value, zone)
        offset = offsets.get(seconds // 3600)
        if offset is None:
            if len(offsets) >= _CACHE_ENTRIES:
                offsets.clear()
            offset = offsets[seconds // 3600] = offset_of(seconds // 3600)
        if offset == _MIXED:
            return format_time(value, zone)
        local = seconds + offset
        hour_text = hours.get(local // 3600)
        if hour_text is None:
            day, hour = divmod(local // 3600, 24)
            try:
                hour_text = date.fromordinal(day + _EPOCH_ORDINAL).isoformat() + _HOUR_TEXT[hour]
            except (ValueError, OverflowError):  # beyond year 9999 in the zone
                return format_time(value, zone)
            if len(hours) >= _CACHE_ENTRIES:
                hours.clear()
            hours[local // 3600] = hour_text
        return hour_text + _MINUTE_SECOND_TEXT[local % 3600]

    return format_local

"""Times as a sheet shows them in text: ``YYYY-MM-DD HH:MM:SS`` in a zone."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo


def format_time(value: datetime, zone: tzinfo) -> str:
    """``value`` as ``YYYY-MM-DD HH:MM:SS`` in ``zone``; a naive value is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # isoformat is about twice as fast as strftime and gives the same first 19 characters.
    return value.astimezone(zone).isoformat(" ", "seconds")[:19]

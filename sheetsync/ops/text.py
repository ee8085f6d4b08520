"""Text for people: masked URLs, times, durations, clipped one-liners (CLI, demo, console)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

#: Widest a free-text cell (an error message) gets in a table before it is cut.
DEFAULT_TEXT_CELL_CHARS = 60
#: What a masked secret looks like.
MASK = "***"


def mask_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``; safe to print."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    userinfo = f"{parts.username or ''}:{MASK}"
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{userinfo}@{host}" + (f":{port}" if port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


def iso(moment: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 in UTC (``...Z``); None stays None."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def short_time(moment: datetime | None) -> str:
    """``2024-05-01 09:30:00Z`` for tables."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    """A compact length of time: ``45s``, ``3m 20s``, ``6d 23h``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def relative(moment: datetime | None, now: datetime | None = None) -> str:
    """``in 6d 23h``, ``3m 20s ago`` or ``now``."""
    if moment is None:
        return "-"
    delta = (moment - (now or datetime.now(UTC))).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def now_ms() -> int:
    return int(time.time() * 1000)


def clip(text: str | None, limit: int = DEFAULT_TEXT_CELL_CHARS) -> str:
    """One line of at most ``limit`` characters, with an ellipsis when cut."""
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

"""Text for people: masked URLs, times, durations, clipped one-liners (logs, CLI, console, demo)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: Widest a free-text cell (an error message) gets in a table before it is cut.
DEFAULT_TEXT_CELL_CHARS = 60
#: What a masked secret looks like.
MASK = "***"


#: Query parameters whose value is a secret (``?password=`` in a Redis URL, ...).
SECRET_QUERY_KEYS = re.compile(r"pass|pwd|secret|token|key|auth|credential", re.IGNORECASE)
#: Characters a terminal acts on: C0 controls (but tab and newline), DEL and C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def mask_url(url: str) -> str:
    """``url`` with its password and secret query values replaced by ``***``; safe to
    print."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(SECRET_QUERY_KEYS.search(name) for name, _ in pairs):
        query = [(name, MASK if SECRET_QUERY_KEYS.search(name) else value) for name, value in pairs]
        masked = urlencode(query, safe="*")
        url = url.replace(f"?{parts.query}", f"?{masked}", 1)
        parts = parts._replace(query=masked)
    if parts.password is None:
        return url
    userinfo = f"{parts.username or ''}:{MASK}"
    # The hosts as written: a Sentinel URL names several (host:26379,host2:26379).
    hosts = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{hosts}"))


def printable(text: str) -> str:
    """``text`` with every control character a terminal would act on shown as an
    escape (``\\x1b``), so stored text from outside cannot move the cursor, clear the
    screen or retitle the window."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


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

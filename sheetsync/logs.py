"""Log formats: text (the default) or JSON, one object per line (``SHEETSYNC_LOG_FORMAT``).

A JSON line holds the time, level, logger, an ``event`` name (the ``event`` passed in
``extra``, else the message's template), the message as text logs print it, and the
structured fields a call passes in ``extra`` from :data:`FIELDS` (ids, counts,
durations, outcomes): never an arbitrary attribute, so nothing a caller did not mean
to log as a field gets in. Messages never hold answer values or tokens of Google; the
fields are counts and ids by construction.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterable
from datetime import UTC, datetime

#: The ``extra`` fields a JSON line carries.
FIELDS = (
    "token",
    "buffer",
    "queue",
    "rows",
    "failed",
    "parked",
    "batches",
    "requests",
    "duration_ms",
    "outcome",
    "count",
    "port",
)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", None) or str(record.msg),
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            line["error"] = type(exc).__name__
            line["traceback"] = "".join(traceback.format_exception(exc)).rstrip()
        return json.dumps(line, default=str, ensure_ascii=False)


def formatter(log_format: str, text_format: str = TEXT_FORMAT) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(text_format)


def apply(log_format: str, handlers: Iterable[logging.Handler]) -> None:
    """Give these handlers the JSON formatter (``json``); text leaves them as they are."""
    if log_format != "json":
        return
    for handler in handlers:
        handler.setFormatter(JsonFormatter())


def configured_format() -> str:
    """``SHEETSYNC_LOG_FORMAT`` as the settings read it; ``text`` while the settings are
    broken (the command reports that itself, in one line)."""
    from sheetsync.errors import ConfigError
    from sheetsync.settings import get_settings

    try:
        return get_settings().log_format
    except ConfigError:
        return "text"

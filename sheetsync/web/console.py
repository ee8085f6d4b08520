"""The console's state (its services, sampler, CSRF token and templates) and how a
page is rendered: every section read on its own, an outage shown as a banner."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from sheetsync.deadletters import queries
from sheetsync.models import DeadLetterReason, DeadLetterStatus
from sheetsync.settings import Settings
from sheetsync.web import data
from sheetsync.web.auth import CSRF_FIELD, Csrf
from sheetsync.web.history import History

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
T = TypeVar("T")
#: What an action's redirect may announce, by code (never text from the request).
NOTICES = {
    "replay-sent": ("ok", "Sent to the workers: its answers go back to their buffer now."),
    "replay-taken": ("warn", "Not sent: a replay of it is already running elsewhere."),
    "replay-skipped": ("warn", "Not sent: only PENDING and FAILED dead letters replay."),
    "purged": ("ok", "Purged: its answers are recorded FAILED and will not be written."),
    "purge-refused": ("warn", "Not purged: only PENDING and FAILED dead letters can be."),
}
#: Bulk results: (what was done, to how many), counts read from the redirect's query.
BULK_NOTICES = {
    "bulk-replay": "sent to the workers: their answers go back to their buffers now",
    "bulk-purge": "purged: their answers are recorded FAILED and will not be written",
}
#: A count or an entry id, as a form or a redirect carries it.
COUNT = re.compile(r"[0-9]{1,18}")
#: The dead-letter filter's query parameters, and the fields they set.
FILTER_PARAMS = {
    "status": "status",
    "reason": "reason",
    "user": "user_id",
    "form": "submission_id",
    "spreadsheet": "spread_sheet_id",
}


def error_text(exc: BaseException) -> str:
    """One line for an operator: what failed, never a traceback or a value."""
    from sheetsync.ops.explain import describe

    return describe(exc) or f"unexpected {type(exc).__name__}"


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def notice_of(query: Mapping[str, str]) -> tuple[str, str] | None:
    """The banner a redirect asked for, from codes and counts only."""
    code = query.get("notice", "")
    if code in NOTICES:
        return NOTICES[code]
    if code not in BULK_NOTICES:
        return None
    done, confirmed = _count(query.get("done")), _count(query.get("confirmed"))
    text = f"{plural(done, 'dead letter')} {BULK_NOTICES[code]}."
    if done < confirmed:
        text += (
            f" Left alone: {confirmed - done:,} of the {confirmed:,} confirmed, replayed, "
            "purged or changed elsewhere meanwhile."
        )
    elif done > confirmed:
        text += f" ({confirmed:,} had been confirmed: more matched by then.)"
    return ("ok" if done == confirmed and done else "warn", text)


def _count(value: str | None) -> int:
    return int(value) if value is not None and COUNT.fullmatch(value) else 0


def dead_letter_filter(params: Mapping[str, Any]) -> queries.Filter:
    """The filter named by query or form parameters; unknown statuses and reasons, and
    empty fields, match anything."""
    fields = {
        field: str(value)
        for name, field in FILTER_PARAMS.items()
        if isinstance(value := params.get(name), str) and value.strip()
    }
    if fields.get("status") not in (None, *DeadLetterStatus.__members__):
        del fields["status"]
    if fields.get("reason") not in (None, *DeadLetterReason.__members__):
        del fields["reason"]
    return queries.Filter(**{field: value.strip() for field, value in fields.items()})


def filter_params(where: queries.Filter) -> dict[str, str]:
    """``where`` as query parameters (the fields it sets only)."""
    return {
        name: value
        for name, field in FILTER_PARAMS.items()
        if (value := getattr(where, field)) is not None
    }


def filter_query(where: queries.Filter | None, **changes: str | None) -> str:
    """A query string for ``where`` (None: no filter) with ``changes`` (None removes a
    parameter)."""
    params = {**(filter_params(where) if where else {}), **changes}
    return urlencode({name: value for name, value in params.items() if value})


class Console:
    def __init__(
        self, settings: Settings, sample_interval_s: float, refresh_interval_s: float
    ) -> None:
        self.settings = settings
        self.read = data.read_services(settings)
        self.actions = data.ActionServices(settings)
        self.history = History(self.read, sample_interval_s)
        self.refresh_interval_s = refresh_interval_s
        self.csrf = Csrf(settings.web_token.get_secret_value() if settings.web_token else None)
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
        )
        environment.filters["ago"] = ago
        environment.filters["duration"] = duration
        environment.filters["plural"] = plural
        environment.globals["filter_query"] = filter_query
        self.templates = Jinja2Templates(env=environment)

    def attempt(self, errors: list[str], read: Callable[[], T]) -> T | None:
        try:
            return read()
        except Exception as exc:
            message = error_text(exc)
            log.warning("console read failed: %s", message)
            if message not in errors:
                errors.append(message)
            return None

    def page(
        self,
        request: Request,
        name: str,
        errors: list[str],
        status_code: int = 200,
        *,
        live: bool = True,
        **context: Any,
    ) -> Response:
        """Render ``name``. A ``live`` page refreshes its data regions by itself."""
        return self.templates.TemplateResponse(
            request,
            name,
            {
                "errors": errors,
                "notice": notice_of(request.query_params),
                "csrf_field": CSRF_FIELD,
                "csrf_token": self.csrf.value,
                "path": request.url.path,
                "refresh_s": self.refresh_interval_s if live else 0,
                "dlq_delay_s": self.settings.dlq_delay_s,
                "titles": {},
                **context,
            },
            status_code=status_code,
            headers={"Cache-Control": "no-store"},
        )


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = abs(float(seconds))
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 3600:
        whole = f"{seconds // 60:.0f} min"
        return whole if seconds % 60 < 0.5 else f"{whole} {seconds % 60:02.0f} s"
    if seconds < 86400:
        return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:02.0f} min"
    return f"{seconds / 86400:.1f} days"


def ago(when: Any) -> str:
    if when is None:
        return "-"
    from sheetsync.models import utcnow

    delta = (utcnow() - when).total_seconds()
    return f"{duration(delta)} ago" if delta >= 0 else f"in {duration(delta)}"

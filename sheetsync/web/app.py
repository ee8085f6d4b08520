"""The console's routes: pages that read, and two actions that ask first.

Page endpoints are plain functions: Starlette runs them in its thread pool, so a slow
Redis or database holds one thread for a few seconds, never the server. Every section
of a page is read on its own: an outage shows as a banner over what could be read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from sheetsync.cli import dlq_store
from sheetsync.models import DeadLetterReason, DeadLetterStatus
from sheetsync.ops import replays
from sheetsync.ops import status as status_data
from sheetsync.recovery import deadletters
from sheetsync.settings import Settings
from sheetsync.web import charts, data
from sheetsync.web.auth import CSRF_FIELD, Csrf, Guard, same_origin
from sheetsync.web.history import HISTORY_S, Gap, History

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
T = TypeVar("T")
#: Answer ids shown on a dead letter's page (the count is always whole).
SHOWN_ANSWER_IDS = 500
#: Accounts charted on the overview (the busiest).
CHARTED_ACCOUNTS = 8
#: What an action's redirect may announce, by code (never text from the request).
NOTICES = {
    "replay-sent": ("ok", "Sent to the workers: its answers go back to their buffer now."),
    "replay-taken": ("warn", "Not sent: a replay of it is already running elsewhere."),
    "replay-skipped": ("warn", "Not sent: only PENDING and FAILED dead letters replay."),
    "purged": ("ok", "Purged: its answers are recorded FAILED and will not be written."),
    "purge-refused": ("warn", "Not purged: only PENDING and FAILED dead letters can be."),
}


def error_text(exc: BaseException) -> str:
    """One line for an operator: what failed, never a traceback or a value."""
    from sheetsync.cli.runtime import describe

    return describe(exc) or f"unexpected {type(exc).__name__}"


class Console:
    def __init__(self, settings: Settings, sample_interval_s: float) -> None:
        self.settings = settings
        self.read = data.read_pipeline(settings)
        self.actions = data.ActionPipeline(settings)
        self.history = History(self.read, sample_interval_s)
        self.csrf = Csrf(settings.web_token.get_secret_value() if settings.web_token else None)
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every template, whatever its name
            undefined=jinja2.StrictUndefined,
        )
        environment.filters["ago"] = ago
        environment.filters["duration"] = duration
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
        self, request: Request, name: str, errors: list[str], status_code: int = 200, **context: Any
    ) -> Response:
        notice = NOTICES.get(request.query_params.get("notice", ""))
        return self.templates.TemplateResponse(
            request,
            name,
            {
                "errors": errors,
                "notice": notice,
                "csrf_field": CSRF_FIELD,
                "csrf_token": self.csrf.value,
                "path": request.url.path,
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


def overview(request: Request) -> Response:
    console: Console = request.app.state.console
    read, errors = console.read, list[str]()
    workers = console.attempt(errors, lambda: status_data.collect_workers(read))
    buffers = console.attempt(errors, lambda: status_data.collect_buffers(read, 10))
    dead = console.attempt(errors, lambda: status_data.collect_dead_letters(read))
    limiter = console.attempt(errors, lambda: status_data.collect_limiter(read))
    appends = console.attempt(errors, lambda: data.appends_per_minute(read))
    stalled = status_data.flag_stalled(buffers, workers) if buffers and workers else []
    console.history.sample_if_older_than(1.0)  # the tiles agree with the page's other reads
    now = time.time()
    samples = console.history.samples()
    # The charts span what was sampled (at least 30 samples' worth), up to the hour kept.
    least = 30 * console.history.interval_s
    span = min(HISTORY_S, max(least, now - samples[0].at if samples else least))

    def series(pick: Callable[[Any], float]) -> list[tuple[float, float | None]]:
        return [
            (sample.at, None) if isinstance(sample, Gap) else (sample.at, pick(sample))
            for sample in samples
        ]

    latest = next((s for s in reversed(samples) if not isinstance(s, Gap)), None)
    oldest = (
        max((item["oldest_age_s"] for item in buffers["items"]), default=None) if buffers else None
    )
    meters = []
    if limiter:
        project = limiter["project"]
        meters.append(charts.meter("project", project["used"], project["limit"]))
        busiest = sorted(limiter["accounts"], key=lambda item: -item["used"])
        meters += [
            charts.meter(f"account {item['account']}", item["used"], item["limit"])
            for item in busiest[:CHARTED_ACCOUNTS]
            if item["used"]
        ]
    return console.page(
        request,
        "overview.html",
        errors,
        workers=workers,
        buffers=buffers,
        dead=dead,
        limiter=limiter,
        meters=meters,
        stalled=stalled,
        latest=latest,
        oldest=oldest,
        appended=sum(appends) if appends is not None else None,
        appends_chart=charts.bar_chart(appends) if appends is not None else None,
        depth_chart=charts.line_chart(series(lambda s: s.depth), now=now, span_s=span),
        age_chart=charts.line_chart(
            series(lambda s: s.oldest_age_s), now=now, span_s=span, unit=" s"
        ),
        use_chart=charts.line_chart(series(lambda s: s.project_used), now=now, span_s=span),
        sample_interval=console.history.interval_s,
    )


def buffers_page(request: Request) -> Response:
    console: Console = request.app.state.console
    read, errors = console.read, list[str]()
    buffers = console.attempt(errors, lambda: status_data.collect_buffers(read, data.PAGE_LIMIT))
    workers = console.attempt(errors, lambda: status_data.collect_workers(read))
    stalled = status_data.flag_stalled(buffers, workers) if buffers and workers else []
    sheets = {item["spread_sheet_id"] for item in buffers["items"]} if buffers else set()
    last = console.attempt(errors, lambda: data.last_errors(read, sheets)) or {}
    if buffers:
        for item in buffers["items"]:
            key = (item["submission_id"], item["spread_sheet_id"], item["sheet_id"])
            item["last_error"] = last.get(key)
    return console.page(request, "buffers.html", errors, buffers=buffers, stalled=stalled)


def links_page(request: Request) -> Response:
    console: Console = request.app.state.console
    errors: list[str] = []
    found = console.attempt(errors, lambda: data.links(console.read))
    cell_limit = console.settings.tab_cell_limit
    return console.page(request, "links.html", errors, links=found, cell_limit=cell_limit)


def dead_letters_page(request: Request) -> Response:
    console: Console = request.app.state.console
    errors: list[str] = []
    status = request.query_params.get("status") or None
    reason = request.query_params.get("reason") or None
    user = request.query_params.get("user") or None
    if status not in (None, *DeadLetterStatus.__members__):
        status = None
    if reason not in (None, *DeadLetterReason.__members__):
        reason = None
    found = console.attempt(
        errors,
        lambda: dlq_store.list_entries(
            console.read.sessions,
            user_id=user,
            status=status,
            reason=reason,
            limit=data.PAGE_LIMIT,
        ),
    )
    return console.page(
        request,
        "dead_letters.html",
        errors,
        page=found,
        status=status,
        reason=reason,
        user=user,
        statuses=list(DeadLetterStatus.__members__),
        reasons=list(DeadLetterReason.__members__),
    )


def _entry(request: Request, template: str, **context: Any) -> Response:
    console: Console = request.app.state.console
    errors: list[str] = []
    entry_id = int(request.path_params["entry_id"])
    entry = console.attempt(errors, lambda: dlq_store.get_entry(console.read.sessions, entry_id))
    if entry is None and not errors:
        return console.page(request, "missing.html", errors, entry_id=entry_id, status_code=404)
    if entry is not None:
        entry["shown_ids"] = entry["answer_ids"][:SHOWN_ANSWER_IDS]
    return console.page(request, template, errors, entry=entry, entry_id=entry_id, **context)


def dead_letter_page(request: Request) -> Response:
    return _entry(request, "dead_letter.html")


#: The actions on a dead letter, as the CLI names them.
ACTIONS = ("replay", "purge")


def confirm_page(request: Request) -> Response:
    action = request.path_params["action"]
    if action not in ACTIONS:
        return Response("not found\n", status_code=404, media_type="text/plain")
    return _entry(request, "confirm.html", action=action)


async def act(request: Request) -> Response:
    """Replay or purge one dead letter, once the confirmation page's form says so."""
    console: Console = request.app.state.console
    entry_id = int(request.path_params["entry_id"])
    action = request.path_params["action"]
    if action not in ACTIONS:
        return Response("not found\n", status_code=404, media_type="text/plain")
    form = await request.form()
    if not same_origin(request.headers) or not console.csrf.valid(form.get(CSRF_FIELD)):
        return console.page(
            request,
            "refused.html",
            [],
            status_code=403,
            entry_id=entry_id,
        )
    try:
        notice = await run_in_threadpool(_perform, console, action, entry_id)
    except Exception as exc:
        message = error_text(exc)
        log.warning("console %s of dead letter %s failed: %s", action, entry_id, message)
        return console.page(
            request,
            "confirm.html",
            [f"{action} failed: {message}"],
            status_code=503,
            entry=None,
            entry_id=entry_id,
            action=action,
        )
    return RedirectResponse(f"/dead-letters/{entry_id}?notice={notice}", status_code=303)


def _perform(console: Console, action: str, entry_id: int) -> str:
    """The CLI's own code: ``dlq replay ID`` sends to the workers, ``dlq purge ID``."""
    pipeline = console.actions.get()
    if action == "replay":
        chosen = replays.candidates(pipeline, ids=[entry_id], user_id=None)
        if not chosen.ids:
            return "replay-skipped"
        sent = replays.send_to_workers(pipeline, chosen)
        log.info("console: dead letter %s sent to the workers", entry_id)
        return "replay-sent" if sent.sent else "replay-taken"
    purged, _refused = deadletters.purge(pipeline.sessions, [entry_id])
    log.info("console: dead letter %s purge: %s", entry_id, "done" if purged else "refused")
    return "purged" if purged else "purge-refused"


def create_app(settings: Settings, *, sample_interval_s: float = 5.0) -> Starlette:
    """The console for ``settings``; the sampler runs while the app is served."""
    console = Console(settings, sample_interval_s)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        console.history.start()
        try:
            yield
        finally:
            console.history.stop()
            console.actions.close()
            console.read.close()

    token = settings.web_token.get_secret_value() if settings.web_token else None
    actions = "{action:str}"
    app = Starlette(
        routes=[
            Route("/", overview),
            Route("/buffers", buffers_page),
            Route("/links", links_page),
            Route("/dead-letters", dead_letters_page),
            Route("/dead-letters/{entry_id:int}", dead_letter_page),
            Route(f"/dead-letters/{{entry_id:int}}/{actions}", confirm_page, methods=["GET"]),
            Route(f"/dead-letters/{{entry_id:int}}/{actions}", act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(Guard, token=token)],
        lifespan=lifespan,
    )
    app.state.console = console
    return app

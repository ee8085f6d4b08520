"""The console's pages that read: overview, buffers, links and dead letters.

Page endpoints are plain functions: Starlette runs them in its thread pool, so a slow
Redis or database holds one thread for a few seconds, never the server. Every section
of a page is read on its own: an outage shows as a banner over what could be read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sheetsync.deadletters import queries
from sheetsync.downgrades import downgrades
from sheetsync.models import DeadLetterReason, DeadLetterStatus
from sheetsync.ops import status as status_data
from sheetsync.redis_keys import DEFAULT_GOOGLE_CLIENT
from sheetsync.web import charts, data, labels
from sheetsync.web.console import Console, dead_letter_filter
from sheetsync.web.history import HISTORY_S, Gap

#: Answer ids shown on a dead letter's page (the count is always whole).
SHOWN_ANSWER_IDS = 500
#: Accounts charted on the overview (the busiest).
CHARTED_ACCOUNTS = 8


def account_label(owners: list[str] | None) -> str:
    """A Google account, as the owners whose credential uses it."""
    if not owners:
        return "(no owner)"
    return owners[0] if len(owners) == 1 else f"{owners[0]} +{len(owners) - 1}"


def overview(request: Request) -> Response:
    console: Console = request.app.state.console
    read, errors = console.read, list[str]()
    workers = console.attempt(errors, lambda: status_data.collect_workers(read))
    buffers = console.attempt(errors, lambda: status_data.collect_buffers(read, 10))
    dead = console.attempt(errors, lambda: status_data.collect_dead_letters(read))
    changes = console.attempt(errors, lambda: status_data.collect_changes(read))
    limiter = console.attempt(errors, lambda: status_data.collect_limiter(read))
    appends = console.attempt(errors, lambda: data.appends_per_minute(read))
    stalled = status_data.flag_stalled(buffers, workers) if buffers and workers else []
    forms = {item["submission_id"] for item in buffers["items"]} if buffers else set()
    titles = console.attempt(errors, lambda: labels.form_titles(read.sessions, forms)) or {}
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
        meters += [  # the other OAuth clients' projects, each with its own quota
            charts.meter(f"project {name}", use["write"]["used"], use["write"]["limit"])
            for name, use in limiter["projects"].items()
            if name != DEFAULT_GOOGLE_CLIENT
        ]
        busiest = [item for item in limiter["accounts"] if item["used"]]
        busiest.sort(key=lambda item: -item["used"])
        owners = (
            console.attempt(errors, lambda: labels.account_owners(read.sessions)) or {}
            if busiest
            else {}
        )
        meters += [
            charts.meter(account_label(owners.get(item["account"])), item["used"], item["limit"])
            for item in busiest[:CHARTED_ACCOUNTS]
        ]
    return console.page(
        request,
        "overview.html",
        errors,
        workers=workers,
        buffers=buffers,
        dead=dead,
        changes=changes,
        limiter=limiter,
        meters=meters,
        stalled=stalled,
        downgrades=downgrades(console.settings),
        latest=latest,
        oldest=oldest,
        titles=titles,
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
    forms = {item["submission_id"] for item in buffers["items"]} if buffers else set()
    last = console.attempt(errors, lambda: data.last_errors(read, sheets)) or {}
    titles = console.attempt(errors, lambda: labels.form_titles(read.sessions, forms)) or {}
    if buffers:
        for item in buffers["items"]:
            key = (item["submission_id"], item["spread_sheet_id"], item["sheet_id"])
            item["last_error"] = last.get(key)
    return console.page(
        request, "buffers.html", errors, buffers=buffers, stalled=stalled, titles=titles
    )


def links_page(request: Request) -> Response:
    console: Console = request.app.state.console
    errors: list[str] = []
    found = console.attempt(errors, lambda: data.links(console.read))
    forms = {item["form"] for item in found["items"]} if found else set()
    titles = console.attempt(errors, lambda: labels.form_titles(console.read.sessions, forms))
    cell_limit = console.settings.tab_cell_limit
    return console.page(
        request, "links.html", errors, links=found, cell_limit=cell_limit, titles=titles or {}
    )


def dead_letters_page(request: Request) -> Response:
    console: Console = request.app.state.console
    errors: list[str] = []
    where = dead_letter_filter(request.query_params)
    sessions = console.read.sessions
    found = console.attempt(
        errors,
        lambda: queries.list_entries(
            sessions,
            user_id=where.user_id,
            status=where.status,
            reason=where.reason,
            submission_id=where.submission_id,
            spread_sheet_id=where.spread_sheet_id,
            limit=data.PAGE_LIMIT,
        ),
    )
    forms = {entry["submission_id"] for entry in found.entries} if found else set()
    titles = console.attempt(errors, lambda: labels.form_titles(sessions, forms)) or {}
    return console.page(
        request,
        "dead_letters.html",
        errors,
        page=found,
        where=where,
        filtered=where != queries.Filter(),
        titles=titles,
        statuses=list(DeadLetterStatus.__members__),
        reasons=list(DeadLetterReason.__members__),
    )


def entry_page(request: Request, template: str, *, live: bool, **context: Any) -> Response:
    """A page about one dead letter: the entry, its form's title, its owner's credential."""
    console: Console = request.app.state.console
    errors: list[str] = []
    entry_id = int(request.path_params["entry_id"])
    sessions = console.read.sessions
    entry = console.attempt(errors, lambda: queries.get_entry(sessions, entry_id))
    if entry is None and not errors:
        return console.page(
            request, "missing.html", errors, entry_id=entry_id, status_code=404, live=False
        )
    titles: dict[str, str] = {}
    credential = None
    if entry is not None:
        entry["shown_ids"] = entry["answer_ids"][:SHOWN_ANSWER_IDS]
        owner, form = entry["user_id"], entry["submission_id"]
        titles = console.attempt(errors, lambda: labels.form_titles(sessions, [form])) or {}
        states = console.attempt(errors, lambda: labels.credential_states(sessions, [owner]))
        credential = states[owner] if states else None
    return console.page(
        request,
        template,
        errors,
        live=live,
        entry=entry,
        entry_id=entry_id,
        titles=titles,
        credential=credential,
        **context,
    )


def dead_letter_page(request: Request) -> Response:
    return entry_page(request, "dead_letter.html", live=True)

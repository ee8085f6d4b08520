"""The console's actions: replay or purge one dead letter, or every one a filter matches.

Each asks first on a confirmation page, whose form carries the CSRF token; the post is
refused without it or from another origin. The work is the CLI's own: ``dlq replay
ID...`` sends to the workers (:mod:`sheetsync.deadletters.replay`), ``dlq purge ID...``
(:func:`sheetsync.deadletters.store.purge`).

A bulk action acts on its filter as it stands at the post, bounded by the newest entry
the confirmation page counted: an entry that appears after the page was shown is left
out (the operator never saw it counted), one that stopped matching or left PENDING and
FAILED meanwhile (replayed, purged) is left alone, and answer ids merged into a counted
entry meanwhile go with it, as they would with ``dlq purge ID``.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from sheetsync.deadletters import queries, replay, store
from sheetsync.web import labels
from sheetsync.web.auth import CSRF_FIELD, same_origin
from sheetsync.web.console import (
    COUNT,
    Console,
    dead_letter_filter,
    error_text,
    filter_params,
    filter_query,
)
from sheetsync.web.pages import entry_page

log = logging.getLogger(__name__)

#: The actions on a dead letter, as the CLI names them.
ACTIONS = ("replay", "purge")
#: The statuses a bulk action takes: those a person replays or gives up on. A
#: REPLAYING entry belongs to a running replay, DONE and PURGED ones are finished.
BULK_STATUSES = tuple(status.value for status in store.PURGEABLE)
#: Entry ids a bulk confirmation lists (the counts are always whole).
SHOWN_ENTRIES = 30
#: What an owner, form or spreadsheet id looks like (see :mod:`sheetsync.redis_keys`).
ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: Ids per step of a bulk action (keeps IN lists under every database's parameter limit).
CHUNK = replay.CLAIM_CHUNK


def _not_found() -> Response:
    return Response("not found\n", status_code=404, media_type="text/plain")


def confirm_page(request: Request) -> Response:
    action = request.path_params["action"]
    if action not in ACTIONS:
        return _not_found()
    return entry_page(request, "confirm.html", live=False, action=action)


def _refused(console: Console, request: Request, back: str, label: str) -> Response:
    return console.page(
        request, "refused.html", [], status_code=403, live=False, back=back, back_label=label
    )


async def _trusted(request: Request, console: Console) -> dict[str, Any] | None:
    """The posted form, when it came from one of the console's confirmation pages."""
    form = await request.form()
    if not same_origin(request.headers) or not console.csrf.valid(form.get(CSRF_FIELD)):
        return None
    return {name: value for name, value in form.items() if isinstance(value, str)}


async def act(request: Request) -> Response:
    """Replay or purge one dead letter, once the confirmation page's form says so."""
    console: Console = request.app.state.console
    entry_id = int(request.path_params["entry_id"])
    action = request.path_params["action"]
    if action not in ACTIONS:
        return _not_found()
    back = f"/dead-letters/{entry_id}"
    if await _trusted(request, console) is None:
        return _refused(console, request, back, f"dead letter {entry_id}")
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
            live=False,
            entry=None,
            entry_id=entry_id,
            action=action,
            credential=None,
        )
    return RedirectResponse(f"{back}?notice={notice}", status_code=303)


def _perform(console: Console, action: str, entry_id: int) -> str:
    """The CLI's own code: ``dlq replay ID`` sends to the workers, ``dlq purge ID``."""
    services = console.actions.get()
    if action == "replay":
        chosen = replay.candidates(services, ids=[entry_id], user_id=None)
        if not chosen.ids:
            return "replay-skipped"
        sent = replay.send_to_workers(services, chosen)
        log.info("console: dead letter %s sent to the workers", entry_id)
        return "replay-sent" if sent.sent else "replay-taken"
    purged, _refused = store.purge(services.sessions, [entry_id])
    log.info("console: dead letter %s purge: %s", entry_id, "done" if purged else "refused")
    return "purged" if purged else "purge-refused"


def bulk_confirm_page(request: Request) -> Response:
    """What a bulk action would take now: counts, owners whose credential is not VALID,
    and the bound (the newest entry counted) its form posts."""
    console: Console = request.app.state.console
    action = request.path_params["action"]
    if action not in ACTIONS:
        return _not_found()
    errors: list[str] = []
    where = dead_letter_filter(request.query_params)
    sessions = console.read.sessions
    selection = console.attempt(
        errors, lambda: queries.select_entries(sessions, where, statuses=BULK_STATUSES)
    )
    unusable: list[dict[str, Any]] = []
    if selection is not None and action == "replay":
        owners = selection.owners
        states = console.attempt(errors, lambda: labels.credential_states(sessions, owners))
        unusable = labels.unusable_owners(states or {}, owners)
    return console.page(
        request,
        "bulk_confirm.html",
        errors,
        live=False,
        action=action,
        where=where,
        params=filter_params(where),
        selection=selection,
        count=len(selection.ids) if selection else 0,
        shown=selection.ids[:SHOWN_ENTRIES] if selection else [],
        upto=max(selection.ids) if selection and selection.ids else None,
        unusable=unusable,
        others=[
            (status, count)
            for status, count in sorted(selection.by_status.items())
            if status not in BULK_STATUSES
        ]
        if selection
        else [],
    )


async def bulk_act(request: Request) -> Response:
    """Replay or purge what the confirmed filter matches, up to the bound it counted."""
    console: Console = request.app.state.console
    action = request.path_params["action"]
    if action not in ACTIONS:
        return _not_found()
    form = await _trusted(request, console)
    where = dead_letter_filter(form or {})
    back = "/dead-letters?" + filter_query(where)
    if form is None:
        return _refused(console, request, back, "the dead letters")
    upto, confirmed = form.get("upto", ""), form.get("confirmed", "")
    if not (COUNT.fullmatch(upto) and COUNT.fullmatch(confirmed)):
        return Response("bad request: upto and confirmed must be counts\n", status_code=400)
    try:
        done = await run_in_threadpool(_perform_bulk, console, action, where, int(upto))
    except Exception as exc:
        message = error_text(exc)
        log.warning("console bulk %s failed: %s", action, message)
        return console.page(
            request,
            "refused.html",
            [f"{action} failed: {message}"],
            status_code=503,
            live=False,
            back=back,
            back_label="the dead letters",
        )
    query = urlencode(
        {**filter_params(where), "notice": f"bulk-{action}", "done": done, "confirmed": confirmed}
    )
    return RedirectResponse(f"/dead-letters?{query}", status_code=303)


def _perform_bulk(console: Console, action: str, where: queries.Filter, upto: int) -> int:
    """The entries ``where`` matches now, up to ``upto``, handed to the CLI's code as
    ``dlq replay ID...`` or ``dlq purge ID...`` would; returns how many were sent or
    purged."""
    services = console.actions.get()
    selection = queries.select_entries(services.sessions, where, statuses=BULK_STATUSES, upto=upto)
    done = 0
    for start in range(0, len(selection.ids), CHUNK):
        chunk = selection.ids[start : start + CHUNK]
        if action == "replay":
            chosen = replay.candidates(services, ids=chunk, user_id=None)
            done += len(replay.send_to_workers(services, chosen).sent)
        else:
            purged, _ = store.purge(services.sessions, chunk)
            done += len(purged)
    log.info(
        "console: bulk %s of %s up to #%d: %d of %d dead letters",
        action,
        _logged(where),
        upto,
        done,
        len(selection.ids),
    )
    return done


def _logged(where: queries.Filter) -> str:
    """The filter for a log line: ids as they are, anything else (it matches nothing)
    not repeated."""
    shown = {
        name: value if ID.fullmatch(value) else "(not an id)"
        for name, value in filter_params(where).items()
    }
    return " ".join(f"{name}={value}" for name, value in shown.items()) or "every dead letter"

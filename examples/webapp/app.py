"""A small form web app on sheetsync: the integration guide in code (``make demo-web``).

It lists the forms, shows one with its questions, and on submit stores the answer and
calls :func:`sheetsync.emit_answer_submitted` in the same transaction, as the docs'
"Emitting an answer" says (docs/integration/index.md). Then a thank-you page links to the
sheet (in the Sheets API emulator), where a worker writes the row within seconds, and to
the operator console.

Starlette with Jinja2 templates, served by uvicorn (the console uses the same stack).
It reads the forms through sheetsync's models because the demo shares that schema; your
app would use its own models of the same tables. Configuration: the ``SHEETSYNC_*``
settings, plus ``WEBAPP_EMULATOR_URL`` (where the sheets are shown) and
``WEBAPP_CONSOLE_URL`` (the ``sheetsync web`` console, optional).

    uvicorn --app-dir examples/webapp --factory app:create_app
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import quote

from forms import FormView, answer_items, form_list, load_form, sheets_of
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from sheetsync import check_settings, emit_answer_submitted
from sheetsync.db import get_sessionmaker
from sheetsync.models import SubmissionAnswer

TEMPLATES = Jinja2Templates(directory=Path(__file__).with_name("templates"))
#: The emulator's sheet page reloads itself this often, so the new row shows up.
SHEET_REFRESH_S = 2


def emulator_url() -> str:
    return os.environ.get("WEBAPP_EMULATOR_URL", "http://127.0.0.1:8085").rstrip("/")


def console_url() -> str | None:
    return os.environ.get("WEBAPP_CONSOLE_URL") or None


async def index(request: Request) -> Response:
    forms = await run_in_threadpool(form_list)
    return TEMPLATES.TemplateResponse(request, "index.html", {"forms": forms})


async def show_form(request: Request) -> Response:
    form = await run_in_threadpool(_form_or_404, request.path_params["form_id"])
    return TEMPLATES.TemplateResponse(request, "form.html", {"form": form})


async def submit(request: Request) -> Response:
    form_id = request.path_params["form_id"]
    fields = await request.form()
    # The database work is synchronous (SQLAlchemy sessions): off the event loop.
    answer_id = await run_in_threadpool(store_answer, form_id, fields)
    # 303: the browser GETs the thank-you page, and a reload does not submit again.
    return RedirectResponse(f"/forms/{quote(form_id)}/thanks/{answer_id}", status_code=303)


def store_answer(form_id: str, fields: FormData) -> str:
    """Store one answer and emit it, in one transaction. Returns the answer's id."""
    # The id comes first: personal info is encrypted for this answer and question.
    answer_id = f"web_{secrets.token_hex(8)}"
    with get_sessionmaker().begin() as session:
        form = load_form(session, form_id)
        if form is None:
            raise HTTPException(404, "no such form")
        answer = SubmissionAnswer(
            id=answer_id,
            submission_id=form_id,
            user_name=str(fields.get("submitter", "")).strip() or None,
            answer=answer_items(form, fields, answer_id),
        )
        session.add(answer)
        # Same transaction: the ledger rows (one per linked sheet) commit or roll back
        # with the answer. The push to Redis happens after the commit; if it cannot,
        # the reconciler pushes later, and this request still succeeds.
        emit_answer_submitted(answer, session=session)
    return answer_id


async def thanks(request: Request) -> Response:
    form = await run_in_threadpool(_form_or_404, request.path_params["form_id"])
    sheets = await run_in_threadpool(sheets_of, form.id)
    base = emulator_url()
    links = [
        {
            "title": sheet.title,
            "url": f"{base}/_emulator/spreadsheets/{quote(sheet.spreadsheet_id, safe='')}"
            f"/sheets/{sheet.gid}?format=html&refresh={SHEET_REFRESH_S}",
        }
        for sheet in sheets
    ]
    context: dict[str, Any] = {
        "form": form,
        "answer_id": request.path_params["answer_id"],
        "sheets": links,
        "console_url": console_url(),
    }
    return TEMPLATES.TemplateResponse(request, "thanks.html", context)


def _form_or_404(form_id: str) -> FormView:
    with get_sessionmaker()() as session:
        form = load_form(session, form_id)
    if form is None:
        raise HTTPException(404, "no such form")
    return form


def create_app() -> Starlette:
    # A bad SHEETSYNC_* value stops the start with one line, not the first request.
    check_settings()
    return Starlette(
        routes=[
            Route("/", index),
            Route("/forms/{form_id}", show_form),
            Route("/forms/{form_id}", submit, methods=["POST"]),
            Route("/forms/{form_id}/thanks/{answer_id}", thanks),
        ]
    )

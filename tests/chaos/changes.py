"""What the web app and people do to answers and rows during a chaos run, beside submits:
respondents edit answers, owners delete them, a person's erasure request erases them, and
people sort the sheets and insert rows into them."""

from __future__ import annotations

import random

from sqlalchemy import delete

from chaos.webapp import WebApp
from sheets_emulator import EmulatorAdmin
from sheetsync import emit_answer_deleted, emit_answers_updated
from sheetsync.emit.erasure import erase
from sheetsync.models import SubmissionAnswer


def _pick(webapp: WebApp, rng: random.Random, most: int) -> list[str]:
    """Up to ``most`` answers the app emitted and did not delete."""
    with webapp._lock:
        alive = sorted(set(webapp.journal.emitted) - webapp.journal.deleted)
    return rng.sample(alive, k=min(len(alive), rng.randint(1, most))) if alive else []


def edit_answers(webapp: WebApp, rng: random.Random) -> str | None:
    """Respondents edit 1-6 answers in one request: a new submitter name, the version in it."""
    chosen = _pick(webapp, rng, 6)
    if not chosen:
        return None
    names: dict[str, str] = {}
    with webapp.pipeline.sessions.begin() as session:
        for answer_id in chosen:
            answer = session.get(SubmissionAnswer, answer_id)
            if answer is None:
                continue
            base = (answer.user_name or "").split(" v", 1)[0]
            names[answer_id] = f"{base} v{rng.randint(2, 10**6)}"
            answer.user_name = names[answer_id]
        emit_answers_updated(list(names), session=session)
    with webapp._lock:
        webapp.journal.edited.update(names)
    return "edited " + ", ".join(names)


def delete_answers(webapp: WebApp, rng: random.Random) -> str | None:
    """An owner deletes 1-3 answers, each in its own request (the emit before the delete)."""
    chosen = _pick(webapp, rng, 3)
    for answer_id in chosen:
        with webapp.pipeline.sessions.begin() as session:
            emit_answer_deleted(answer_id, session=session)
            session.execute(delete(SubmissionAnswer).where(SubmissionAnswer.id == answer_id))
        with webapp._lock:
            webapp.journal.deleted.add(answer_id)
    return ("deleted " + ", ".join(chosen)) if chosen else None


def erase_answers(webapp: WebApp, rng: random.Random) -> str | None:
    """A person's erasure: the app deletes their answers, then runs the erasure."""
    chosen = _pick(webapp, rng, 3)
    if not chosen:
        return None
    with webapp.pipeline.sessions.begin() as session:
        session.execute(delete(SubmissionAnswer).where(SubmissionAnswer.id.in_(chosen)))
    with webapp._lock:
        webapp.journal.deleted.update(chosen)
        webapp.journal.erased.update(chosen)
    erase(chosen, services=webapp.pipeline)
    return "erased " + ", ".join(chosen)


def sort_rows(webapp: WebApp, admin: EmulatorAdmin, rng: random.Random) -> str:
    """A person sorts a sheet by one of its first columns (row 1 stays)."""
    link = rng.choice(list(webapp.links))
    column, descending = rng.randint(0, 2), rng.random() < 0.5
    admin.sort_rows(link.spreadsheet_id, link.gid, column, descending=descending)
    return f"sorted {link.spreadsheet_id}:{link.gid} by column {column}"


def insert_rows(webapp: WebApp, admin: EmulatorAdmin, rng: random.Random) -> str | None:
    """A person inserts 1-3 blank rows somewhere below row 1."""
    link = rng.choice(list(webapp.links))
    body = len(admin.sheet_values(link.spreadsheet_id, link.gid)) - 1
    if body < 2:
        return None
    start, count = rng.randint(1, body), rng.randint(1, 3)
    admin.insert_rows(link.spreadsheet_id, link.gid, start, start + count)
    return f"inserted {count} rows at {start + 1} of {link.spreadsheet_id}:{link.gid}"

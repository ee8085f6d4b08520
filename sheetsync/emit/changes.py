"""The web app's side of edits and deletions: the sheet follows the answer.

Like a submit (:mod:`sheetsync.emit.answers`), an edit or a deletion is recorded in the
caller's transaction (``SheetTransaction.change`` on every sheet the answer was emitted
to) and its id is pushed to those sheets' buffers only after that transaction commits.
The flush reads the answer as it is then: five edits before a run are written once, at
the latest version, and an answer deleted before its run is never written. A deletion
may be emitted before or after the answer's row is deleted from the database: its
sheets are found through the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from sheetsync import ledger
from sheetsync.emit.answers import (
    EmitResult,
    Recorded,
    forms_given,
    push_after_commit,
    push_now,
    results_of,
    routes_cache,
)
from sheetsync.errors import NotFoundError
from sheetsync.models import AnswerChange, SpreadSheet, SubmissionAnswer
from sheetsync.services import Services, get_services

#: Answers per statement (keeps bind parameters under SQLite's limit).
CHUNK = 500


def emit_answer_updated(
    answer: str | SubmissionAnswer,
    *,
    session: Session | None = None,
    services: Services | None = None,
) -> EmitResult:
    """Rewrite an edited answer's row, at its latest version, in every sheet it was
    emitted to; call it in the transaction that changes the answer's items.

    An answer whose row has not landed yet lands at its latest version; one whose sheets
    never took it (no submit was emitted) is left alone."""
    [result] = emit_answers_updated([answer], session=session, services=services)
    return result


def emit_answers_updated(
    answers: Iterable[str | SubmissionAnswer],
    *,
    session: Session | None = None,
    services: Services | None = None,
) -> list[EmitResult]:
    """:func:`emit_answer_updated` for many answers: one statement per :data:`CHUNK`
    answers, one push per buffer. Results are in the order given."""
    return _emit(answers, AnswerChange.UPDATE, session, services)


def emit_answer_deleted(
    answer: str | SubmissionAnswer,
    *,
    session: Session | None = None,
    services: Services | None = None,
) -> EmitResult:
    """Remove a deleted answer's row from every sheet it was emitted to; call it in the
    transaction that deletes the answer's row (before or after the delete) or marks it
    deleted. An answer whose row has not landed yet is never written."""
    [result] = emit_answers_deleted([answer], session=session, services=services)
    return result


def emit_answers_deleted(
    answers: Iterable[str | SubmissionAnswer],
    *,
    session: Session | None = None,
    services: Services | None = None,
) -> list[EmitResult]:
    """:func:`emit_answer_deleted` for many answers (a person's, on an erasure request)."""
    return _emit(answers, AnswerChange.DELETE, session, services)


def _emit(
    answers: Iterable[str | SubmissionAnswer],
    change: AnswerChange,
    session: Session | None,
    services: Services | None,
) -> list[EmitResult]:
    forms = forms_given(answers)
    services = services or get_services()
    if session is not None:
        recorded = mark(session, forms, change, services)
        if recorded.pushes:
            push_after_commit(session, services, recorded.pushes)
        return results_of(forms, recorded, pushed=False)
    with services.sessions.begin() as own:
        recorded = mark(own, forms, change, services)
    pushed = push_now(services, recorded.pushes)
    return results_of(forms, recorded, pushed=pushed)


def mark(
    session: Session, forms: dict[str, str | None], change: AnswerChange, services: Services
) -> Recorded:
    """Mark the answers' ledger rows changed, and route each marked sheet's buffer."""
    _find_forms(session, forms, change)
    cache = routes_cache(services)
    recorded = Recorded()
    linked: dict[tuple[str, int], list[str]] = {}  # forms linked to a sheet, as read
    answer_ids = list(forms)
    for start in range(0, len(answer_ids), CHUNK):
        marked = ledger.mark_changed(session, answer_ids[start : start + CHUNK], change)
        for answer_id, spreadsheet, gid in marked:
            own_form = forms[answer_id]
            if own_form is None and (spreadsheet, gid) not in linked:
                linked[(spreadsheet, gid)] = _linked_forms(session, spreadsheet, gid)
            for form_id in [own_form] if own_form else linked[(spreadsheet, gid)]:
                route = cache.get(session, form_id).routes.get((spreadsheet, gid))
                if route is None or route.key is None:
                    continue  # the link is gone: nothing left to follow
                recorded.enqueued[answer_id].append(route.key)
                recorded.pushes[(route.key, route.queue)].append(answer_id)
    order = {answer_id: n for n, answer_id in enumerate(forms)}
    for ids in recorded.pushes.values():
        ids.sort(key=order.__getitem__)
    return recorded


def _find_forms(session: Session, forms: dict[str, str | None], change: AnswerChange) -> None:
    """Fill in the form of each answer given by id. A deleted answer's row may be gone
    already: its form stays None (its sheets' links say which forms to route by)."""
    unknown = [answer_id for answer_id, form in forms.items() if form is None]
    for start in range(0, len(unknown), CHUNK):
        chunk = unknown[start : start + CHUNK]
        found = session.execute(
            select(SubmissionAnswer.id, SubmissionAnswer.submission_id).where(
                SubmissionAnswer.id.in_(chunk)
            )
        ).all()
        forms.update({answer_id: form_id for answer_id, form_id in found})
    if change is AnswerChange.UPDATE:
        missing = [answer_id for answer_id in unknown if forms[answer_id] is None]
        if missing:
            raise NotFoundError(f"answer {missing[0]} does not exist")


def _linked_forms(session: Session, spreadsheet: str, gid: int) -> list[str]:
    """The forms linked to a sheet (normally one): a deleted answer's change goes to each
    one's buffer, its own form being unknown once its row is gone."""
    return list(
        session.scalars(
            select(SpreadSheet.submission_id)
            .where(SpreadSheet.spread_sheet_id == spreadsheet, SpreadSheet.sheet_id == gid)
            .distinct()
        )
    )

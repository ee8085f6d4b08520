"""Forms as an operator or an integrator reads them (``sheetsync forms``): which forms
there are, and a form's questions in order with the column each has in its sheets.

Only reads. The question ids are what a web app's answers name (``questionId``,
docs/integration/schema.md); the columns come from each link's column map
(docs/ARCHITECTURE.md, "Columns"), made on the link's first write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import String, func, select, type_coerce
from sqlalchemy.orm import Session, sessionmaker

from sheetsync.errors import NotFoundError
from sheetsync.flush.columns import column_letters
from sheetsync.models import Question, QuestionType, SheetColumn, SpreadSheet, Step, Submission


@dataclass(frozen=True)
class FormSummary:
    id: str
    title: str
    owner: str
    #: Every question, display-only ones included.
    questions: int
    links: int


@dataclass(frozen=True)
class FormPage:
    #: Forms matching the filter, of which ``forms`` is the first page.
    total: int
    forms: list[FormSummary]


@dataclass(frozen=True)
class LinkedSheet:
    id: int
    spreadsheet: str
    gid: int
    paused: bool


@dataclass(frozen=True)
class QuestionColumn:
    link: int
    #: The column's letters (``D``); None while the question waits for its title to be
    #: written into row 1 (a question added since the map was made).
    column: str | None


@dataclass(frozen=True)
class QuestionLine:
    """One question, where the form puts it, and where each linked sheet does."""

    step: int
    step_id: str
    position: int
    id: str
    title: str
    #: The type as stored (a type this version does not know is written as text).
    type: str
    personal_info: bool
    #: JUMBOTRON: nothing to answer, never a column.
    display_only: bool
    #: One per link whose column map has the question, in the order of the form's links.
    columns: list[QuestionColumn] = field(default_factory=list)


@dataclass(frozen=True)
class FormDetail:
    id: str
    title: str
    owner: str
    links: list[LinkedSheet]
    questions: list[QuestionLine]


def list_forms(
    sessions: sessionmaker[Session], *, owner: str | None = None, limit: int
) -> FormPage:
    """Forms by id (only ``owner``'s, when given), at most ``limit``, with how many
    questions and links each has."""
    questions = (
        select(func.count(Question.id))
        .join(Step, Step.id == Question.step_id)
        .where(Step.submission_id == Submission.id)
        .scalar_subquery()
    )
    links = (
        select(func.count(SpreadSheet.id))
        .where(SpreadSheet.submission_id == Submission.id)
        .scalar_subquery()
    )
    conditions = [] if owner is None else [Submission.owner_id == owner]
    with sessions() as session:
        total = session.scalar(select(func.count()).select_from(Submission).where(*conditions))
        rows = session.execute(
            select(Submission.id, Submission.title, Submission.owner_id, questions, links)
            .where(*conditions)
            .order_by(Submission.id)
            .limit(limit)
        ).all()
    forms = [
        FormSummary(form_id, title, owner_id, int(n_questions or 0), int(n_links or 0))
        for form_id, title, owner_id, n_questions, n_links in rows
    ]
    return FormPage(int(total or 0), forms)


def show_form(sessions: sessionmaker[Session], form_id: str) -> FormDetail:
    """Form ``form_id``'s questions in form order (steps by position, then questions by
    position) and its links; :class:`NotFoundError` if there is no such form."""
    with sessions() as session:
        form = session.get(Submission, form_id)
        if form is None:
            raise NotFoundError(f"form {form_id} does not exist", submission_id=form_id)
        links = [
            LinkedSheet(
                link.id, link.spread_sheet_id, link.sheet_id, paused=link.paused_reason is not None
            )
            for link in session.scalars(
                select(SpreadSheet)
                .where(SpreadSheet.submission_id == form_id)
                .order_by(SpreadSheet.id)
            )
        ]
        placed: dict[str, list[QuestionColumn]] = {}
        if links:
            order = {link.id: n for n, link in enumerate(links)}
            mapped = session.execute(
                select(SheetColumn.link_id, SheetColumn.question_id, SheetColumn.position).where(
                    SheetColumn.link_id.in_(order)
                )
            ).all()
            for link_id, question_id, position in sorted(mapped, key=lambda row: order[row[0]]):
                letters = None if position is None else column_letters(position)
                placed.setdefault(question_id, []).append(QuestionColumn(link_id, letters))
        rows = session.execute(
            select(
                Step.position,
                Step.id,
                Question.position,
                Question.id,
                Question.title,
                type_coerce(Question.type, String()),
            )
            .join(Step, Question.step_id == Step.id)
            .where(Step.submission_id == form_id)
            .order_by(Step.position, Step.id, Question.position, Question.id)
        ).all()
        questions = [
            QuestionLine(
                step=step_position,
                step_id=step_id,
                position=position,
                id=question_id,
                title=title,
                type=str(type_name),
                personal_info=type_name == QuestionType.PERSONAL_INFO.value,
                display_only=type_name == QuestionType.JUMBOTRON.value,
                columns=placed.get(question_id, []),
            )
            for step_position, step_id, position, question_id, title, type_name in rows
        ]
        return FormDetail(form.id, form.title, form.owner_id, links, questions)

"""The web app's reading of forms, and the one place an answer's items are built.

A real app has its own models of these tables; this demo reads sheetsync's. The schema
has no option lists for choice questions, so the app brings its own (:data:`OPTIONS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sheetsync.crypto import encrypt_answer_value
from sheetsync.db import get_sessionmaker
from sheetsync.models import Question, QuestionType, SpreadSheet, Step, Submission

#: The options of choice questions (the demo's; your app stores them with the question).
OPTIONS = {
    QuestionType.SINGLE_CHOICE: ("참석", "불참", "미정"),
    QuestionType.MULTI_CHOICE: ("AI", "데이터", "프론트엔드", "백엔드", "보안", "DevOps"),
}


@dataclass(frozen=True)
class QuestionView:
    id: str
    title: str
    type: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepView:
    title: str
    questions: tuple[QuestionView, ...]


@dataclass(frozen=True)
class FormView:
    id: str
    title: str
    owner_id: str
    steps: tuple[StepView, ...]

    @property
    def questions(self) -> tuple[QuestionView, ...]:
        return tuple(q for step in self.steps for q in step.questions)


@dataclass(frozen=True)
class FormSummary:
    id: str
    title: str
    owner_id: str
    questions: int
    sheets: int


@dataclass(frozen=True)
class LinkedSheet:
    title: str
    spreadsheet_id: str
    gid: int


def form_list() -> list[FormSummary]:
    """Every form, with its number of questions and of linked sheets."""
    questions = (
        select(func.count(Question.id))
        .join(Step, Step.id == Question.step_id)
        .where(Step.submission_id == Submission.id)
        .scalar_subquery()
    )
    sheets = (
        select(func.count(SpreadSheet.id))
        .where(SpreadSheet.submission_id == Submission.id)
        .scalar_subquery()
    )
    with get_sessionmaker()() as session:
        rows = session.execute(
            select(
                Submission.id, Submission.title, Submission.owner_id, questions, sheets
            ).order_by(Submission.owner_id, Submission.title)
        )
        return [FormSummary(*row) for row in rows]


def load_form(session: Session, form_id: str) -> FormView | None:
    form = session.get(Submission, form_id)
    if form is None:
        return None
    steps = session.scalars(
        select(Step).where(Step.submission_id == form_id).order_by(Step.position)
    ).all()
    views = []
    for step in steps:
        questions = session.scalars(
            select(Question).where(Question.step_id == step.id).order_by(Question.position)
        )
        views.append(
            StepView(
                step.title,
                tuple(
                    QuestionView(q.id, q.title, q.type.value, OPTIONS.get(q.type, ()))
                    for q in questions
                ),
            )
        )
    return FormView(form.id, form.title, form.owner_id, tuple(views))


def sheets_of(form_id: str) -> list[LinkedSheet]:
    with get_sessionmaker()() as session:
        links = session.scalars(
            select(SpreadSheet).where(SpreadSheet.submission_id == form_id).order_by(SpreadSheet.id)
        )
        return [
            LinkedSheet(f"sheet {n}", link.spread_sheet_id, link.sheet_id)
            for n, link in enumerate(links, start=1)
        ]


def answer_items(form: FormView, fields: Mapping[str, Any], answer_id: str) -> list[dict[str, Any]]:
    """The ``answer`` JSON (docs/integration/schema.md, "Answers"): one item per question.
    Personal info is encrypted for this answer and question before it is stored."""
    items: list[dict[str, Any]] = []
    for question in form.questions:
        kind = QuestionType(question.type)
        if kind is QuestionType.JUMBOTRON:
            continue  # display-only: nothing to answer
        if kind is QuestionType.MULTI_CHOICE:
            chosen = [v for v in _all(fields, question.id) if v in question.options]
            if chosen:
                items.append({"questionId": question.id, "value": chosen})
            continue
        value = str(fields.get(question.id, "")).strip()
        if not value:
            continue
        if kind is QuestionType.PERSONAL_INFO:
            value = encrypt_answer_value(value, answer_id=answer_id, question_id=question.id)
        items.append({"questionId": question.id, "value": value})
    return items


def _all(fields: Mapping[str, Any], name: str) -> list[str]:
    getlist = getattr(fields, "getlist", None)
    return [str(v) for v in getlist(name)] if getlist else []

"""What the framework snippets import: a submitted answer, its items, a fresh answer id.

Copy it into your app as ``yourapp/forms.py``. It reads the form's questions through
sheetsync's models, on the database SHEETSYNC_DATABASE_URL names (the tables your app
writes: docs/integration/schema.md); an app with models of its own reads them there.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import String, select, type_coerce

from sheetsync.crypto import encrypt_answer_value
from sheetsync.db import get_sessionmaker
from sheetsync.models import Question, Step, Submission

#: The ids sheetsync takes (answers, forms, questions): they become Redis keys.
ID_PATTERN = r"[A-Za-z0-9_-]{1,128}"
#: Question types that take a list of values (sheetsync joins a MULTI_CHOICE's).
LIST_TYPES = {"MULTI_CHOICE", "PERSONAL_INFO"}


class InvalidAnswerError(ValueError):
    """What was posted is not an answer to this form: answer 400 with its text, which
    names ids only, never a value."""


class Item(BaseModel):
    """One answered question: ``{"questionId": ..., "value": ...}``."""

    model_config = ConfigDict(extra="forbid")

    question_id: str = Field(alias="questionId", pattern=f"^{ID_PATTERN}$")
    value: str | list[str] | None = None


class AnswerIn(BaseModel):
    """A submitted answer: its items, and the submitter's display name (the sheet's
    Submitter column; None leaves it empty)."""

    model_config = ConfigDict(extra="forbid")

    items: list[Item] = Field(max_length=1000)
    user_name: str | None = Field(default=None, max_length=500)

    @field_validator("user_name")
    @classmethod
    def _blank_is_none(cls, name: str | None) -> str | None:
        return (name or "").strip() or None

    @classmethod
    def from_form(
        cls, form_id: str, fields: Mapping[str, Any], *, user_name: str | None = None
    ) -> AnswerIn:
        """An answer from an HTML form whose fields are named by question id (several
        values for a MULTI_CHOICE); other fields (a CSRF token, the button) are left."""
        items = []
        for question_id, kind in form_questions(form_id).items():
            if kind == "JUMBOTRON":
                continue  # display-only: nothing to answer
            getlist = getattr(fields, "getlist", None)  # Django's QueryDict, Werkzeug's MultiDict
            if kind == "MULTI_CHOICE" and getlist is not None:
                value: Any = [v for v in getlist(question_id) if v] or None
            else:
                value = fields.get(question_id) or None
            if value is not None:
                items.append({"questionId": question_id, "value": value})
        try:
            return cls.model_validate({"items": items, "user_name": user_name})
        except ValidationError as exc:
            raise InvalidAnswerError(_problems(exc)) from None


def new_answer_id() -> str:
    """A fresh answer id (32 hex digits): chosen before the answer is stored, since its
    personal info is encrypted for it."""
    return uuid.uuid4().hex


def form_questions(form_id: str) -> dict[str, str]:
    """The form's questions in form order: {question id: type name}."""
    if not re.fullmatch(ID_PATTERN, form_id):
        raise InvalidAnswerError("no such form")
    with get_sessionmaker()() as session:
        if session.get(Submission, form_id) is None:
            raise InvalidAnswerError(f"form {form_id} does not exist")
        rows = session.execute(
            select(Question.id, type_coerce(Question.type, String()))
            .join(Step, Question.step_id == Step.id)
            .where(Step.submission_id == form_id)
            .order_by(Step.position, Question.position)
        )
        return {question_id: str(kind) for question_id, kind in rows}


def items_from(answer: AnswerIn, form_id: str, answer_id: str) -> list[dict[str, Any]]:
    """The ``answer`` JSON sheetsync reads (docs/integration/schema.md, "Answers"), each
    PERSONAL_INFO value encrypted for this answer and question."""
    questions = form_questions(form_id)
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in answer.items:
        question_id = item.question_id
        value = item.value if item.value not in ("", []) else None
        kind = questions.get(question_id)
        if kind is None:
            raise InvalidAnswerError(f"form {form_id} has no question {question_id}")
        if kind == "JUMBOTRON":
            raise InvalidAnswerError(f"question {question_id} is display-only")
        if question_id in seen:
            raise InvalidAnswerError(f"question {question_id} is answered twice")
        seen.add(question_id)
        if isinstance(value, list) and kind not in LIST_TYPES:
            raise InvalidAnswerError(f"question {question_id} takes one value")
        if kind == "MULTI_CHOICE" and isinstance(value, str):
            value = [value]
        if kind == "PERSONAL_INFO" and value is not None:
            value = _sealed(value, answer_id, question_id)
        items.append({"questionId": question_id, "value": value})
    return items


def _sealed(value: str | list[str], answer_id: str, question_id: str) -> str | list[str]:
    """Personal info as tokens that decrypt only as this question's value in this answer."""
    values = [value] if isinstance(value, str) else value
    tokens = [encrypt_answer_value(v, answer_id=answer_id, question_id=question_id) for v in values]
    return tokens[0] if isinstance(value, str) else tokens


def _problems(exc: ValidationError) -> str:
    """Pydantic's errors as one line: where, and what is wrong (never the value)."""
    return "; ".join(
        f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors()
    )

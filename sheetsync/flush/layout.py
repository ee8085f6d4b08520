"""A form's layout: its questions in order, and the cell each one's answers take in a row.

A row is ``[answer id, submitter, submitted at, one cell per question]``, where the
questions are the form's non-JUMBOTRON questions in form order (steps by position, then
questions by position), or placed by the link's column map
(:mod:`sheetsync.flush.columns`). A question type this version does not know is a text
question.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import String, select, type_coerce
from sqlalchemy.orm import Session

from sheetsync.errors import NotFoundError
from sheetsync.models import Question, QuestionType, Step, Submission

#: Columns before the question columns: answer id, submitter, submitted at.
FIXED_COLUMNS = 3
#: The fixed column of the submitter's name (personal info).
SUBMITTER_COLUMN = 1
_QUESTION_TYPES: dict[str | None, QuestionType] = {kind.value: kind for kind in QuestionType}
_warned_types: set[str | None] = set()

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FormQuestion:
    """A question whose answers get a cell in each row. ``type`` is the name as stored
    when this version does not know it: such a question's cells are text."""

    question_id: str
    title: str
    type: QuestionType | str


@dataclass(frozen=True)
class FormLayout:
    """A form's questions in order, and the display-only questions whose answers are
    dropped."""

    submission_id: str
    questions: tuple[FormQuestion, ...]
    ignored_question_ids: frozenset[str] = field(default_factory=frozenset)
    #: Each question's cell index (0 is column A), from the link's column map; None: the
    #: questions follow the fixed columns in order (a form's own layout).
    positions: tuple[int, ...] | None = None
    #: The link's ``escape_formulas``: text that begins like a formula gets an apostrophe.
    escape_formulas: bool = False
    #: The link's ``blank_on_delete``: a deleted answer's personal-info cells and
    #: submitter are blanked, its row kept.
    blank_on_delete: bool = False

    @property
    def cell_indexes(self) -> tuple[int, ...]:
        if self.positions is not None:
            return self.positions
        return tuple(range(FIXED_COLUMNS, FIXED_COLUMNS + len(self.questions)))

    @property
    def width(self) -> int:
        """Cells per row: the fixed ones, then up to the last question's."""
        return max((*self.cell_indexes, FIXED_COLUMNS - 1)) + 1

    @classmethod
    def from_questions(
        cls, submission_id: str, questions: Iterable[tuple[str, str, QuestionType | str]]
    ) -> FormLayout:
        """Build from ``(question id, title, type)`` already in form order; a type may be
        given by name, and an unknown one makes a text question."""
        kept: list[FormQuestion] = []
        ignored: set[str] = set()
        for question_id, title, type_name in questions:
            kind = question_type(type_name)
            if kind is QuestionType.JUMBOTRON:
                ignored.add(question_id)
            else:
                kept.append(FormQuestion(question_id, title, kind))
        return cls(submission_id, tuple(kept), frozenset(ignored))

    @property
    def question_ids(self) -> tuple[str, ...]:
        return tuple(question.question_id for question in self.questions)

    @property
    def personal_cell_indexes(self) -> tuple[int, ...]:
        """The cells of a row that hold personal info: the submitter, and each
        PERSONAL_INFO question's."""
        personal = [
            index
            for question, index in zip(self.questions, self.cell_indexes, strict=True)
            if question.type is QuestionType.PERSONAL_INFO
        ]
        return (SUBMITTER_COLUMN, *personal)

    @property
    def has_personal_info(self) -> bool:
        return any(question.type is QuestionType.PERSONAL_INFO for question in self.questions)


def question_type(type_name: str | QuestionType | None) -> QuestionType | str:
    """The type by its stored name; a name this version does not know stays a name."""
    if isinstance(type_name, QuestionType):
        return type_name
    return _QUESTION_TYPES.get(type_name, str(type_name))


def load_layout(session: Session, submission_id: str) -> FormLayout:
    """The layout of form ``submission_id``; :class:`NotFoundError` if there is no such form.

    The type is read as text, so a type the web app added since this version is a text
    question (logged once per process) rather than an error for the whole form.
    """
    rows = session.execute(
        select(Question.id, Question.title, type_coerce(Question.type, String()))
        .join(Step, Question.step_id == Step.id)
        .where(Step.submission_id == submission_id)
        .order_by(Step.position, Step.id, Question.position, Question.id)
    ).all()
    if not rows and session.get(Submission, submission_id) is None:
        raise NotFoundError(f"form {submission_id} does not exist", submission_id=submission_id)
    for type_name in {row[2] for row in rows} - _QUESTION_TYPES.keys() - _warned_types:
        _warned_types.add(type_name)
        log.warning("question type %r is unknown to this version: written as text", type_name)
    return FormLayout.from_questions(submission_id, ((r[0], r[1], r[2]) for r in rows))

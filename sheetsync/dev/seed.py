"""Realistic forms, answers and sheet links for the demo, tests and benchmarks.

Korean titles and names, several steps, PERSONAL_INFO (stored encrypted), JUMBOTRON
(display-only) and multi-choice questions, and a few unanswered questions per response.
Everything is deterministic for a given ``seed``. Personal info and refresh tokens are
encrypted as the web app must: bound to their answer and question, or to their user
(:mod:`sheetsync.crypto`), with the default keyring (``SHEETSYNC_PII_KEYS``) unless one
is given.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from sheetsync.crypto import (
    Keyring,
    answer_value_context,
    default_keyring,
    refresh_token_context,
)
from sheetsync.models import (
    CredentialStatus,
    GoogleCredential,
    Plan,
    Question,
    QuestionType,
    SpreadSheet,
    Step,
    Submission,
    SubmissionAnswer,
    User,
)

__all__ = [
    "DEFAULT_ANSWER_SPACING",
    "DEFAULT_FIRST_SUBMITTED_AT",
    "DEFAULT_OWNER_ID",
    "SeededForm",
    "SeededQuestion",
    "answer_ids_for",
    "answer_items",
    "answer_value",
    "korean_name",
    "link_sheet",
    "new_id",
    "seed_answers",
    "seed_form",
    "seed_user",
]

#: The owner every seeded form gets unless told otherwise.
DEFAULT_OWNER_ID = "user_1"
#: When answer number 1 was submitted.
DEFAULT_FIRST_SUBMITTED_AT = datetime(2024, 5, 1, 0, 0, tzinfo=UTC)
#: Time between consecutive seeded answers (answer n is at first + (n - 1) * spacing).
DEFAULT_ANSWER_SPACING = timedelta(seconds=7)

#: The types the non-PII, non-jumbotron questions cycle through.
_ANSWERABLE_TYPES = (
    QuestionType.SHORT_TEXT,
    QuestionType.SINGLE_CHOICE,
    QuestionType.MULTI_CHOICE,
    QuestionType.LONG_TEXT,
    QuestionType.DATE,
    QuestionType.NUMBER,
    QuestionType.FILE,
)
_TITLES = {
    QuestionType.SHORT_TEXT: "소속 팀",
    QuestionType.LONG_TEXT: "하고 싶은 말",
    QuestionType.SINGLE_CHOICE: "참석 여부",
    QuestionType.MULTI_CHOICE: "관심 분야",
    QuestionType.DATE: "희망 날짜",
    QuestionType.NUMBER: "참석 인원",
    QuestionType.FILE: "첨부 파일",
    QuestionType.PERSONAL_INFO: "연락처",
    QuestionType.JUMBOTRON: "안내",
}
_FAMILY_NAMES = "김이박최정강조윤장임한오서신권황안송류홍"
_GIVEN_NAMES = ("민준", "서연", "도윤", "하은", "시우", "지우", "예준", "수아", "지호", "하린")
_TEAMS = ("디자인팀", "개발팀", "마케팅팀", "영업팀", "Platform", "CS")
_CHOICES = ("참석", "불참", "미정")
_INTERESTS = ("AI", "데이터", "프론트엔드", "백엔드", "보안", "디자인 시스템", "DevOps")
_MESSAGES = (
    "좋은 행사 감사합니다!",
    "주차 공간이 있는지 궁금합니다.",
    "작년보다 세션이 다양해져서 기대돼요 🙌",
    "Looking forward to it.",
    "채식 메뉴 부탁드립니다.\n알레르기: 견과류",
)
_UNANSWERED_SHARE = 0.08


@dataclass(frozen=True, slots=True)
class SeededQuestion:
    id: str
    title: str
    type: QuestionType


@dataclass(frozen=True)
class SeededForm:
    """What :func:`seed_form` created, in form order."""

    submission_id: str
    owner_id: str
    plan: Plan
    step_ids: tuple[str, ...]
    questions: tuple[SeededQuestion, ...]

    @property
    def columns(self) -> tuple[SeededQuestion, ...]:
        """The questions that are sheet columns (everything but JUMBOTRON), in order."""
        return tuple(q for q in self.questions if q.type is not QuestionType.JUMBOTRON)

    @property
    def pii_question_ids(self) -> tuple[str, ...]:
        return tuple(q.id for q in self.questions if q.type is QuestionType.PERSONAL_INFO)

    @property
    def jumbotron_question_ids(self) -> tuple[str, ...]:
        return tuple(q.id for q in self.questions if q.type is QuestionType.JUMBOTRON)


def new_id(prefix: str) -> str:
    """A fresh id in the pipeline's alphabet (``[A-Za-z0-9_-]``)."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def seed_user(
    session: Session,
    user_id: str = DEFAULT_OWNER_ID,
    *,
    plan: Plan = Plan.PRO,
    email: str | None = None,
    credential_status: CredentialStatus | None = CredentialStatus.VALID,
    refresh_token: str | None = None,
    google_account_id: str | None = None,
    keyring: Keyring | None = None,
) -> User:
    """The user ``user_id``, created with a Google credential if it does not exist yet.

    ``credential_status=None`` creates no credential. The refresh token is stored
    encrypted for ``user_id``; by default it is ``refresh-<user id>``.
    """
    user = session.get(User, user_id)
    if user is not None:
        return user
    user = User(id=user_id, email=email or f"{user_id}@example.com", plan=plan)
    session.add(user)
    if credential_status is not None:
        token = refresh_token or f"refresh-{user_id}"
        session.add(
            GoogleCredential(
                user_id=user_id,
                google_account_id=google_account_id or f"google-{user_id}",
                refresh_token=(keyring or default_keyring()).encrypt(
                    token, refresh_token_context(user_id)
                ),
                scopes="https://www.googleapis.com/auth/spreadsheets",
                status=credential_status,
            )
        )
    session.flush()
    return user


def seed_form(
    session: Session,
    *,
    owner_id: str = DEFAULT_OWNER_ID,
    plan: Plan = Plan.PRO,
    steps: int = 3,
    questions_per_step: int = 4,
    pii: int = 2,
    jumbotrons: int = 1,
    submission_id: str | None = None,
    title: str = "2024 개발자 컨퍼런스 참가 신청",
    credential_status: CredentialStatus | None = CredentialStatus.VALID,
    keyring: Keyring | None = None,
) -> SeededForm:
    """A form of ``steps`` steps with ``questions_per_step`` answerable questions each.

    ``pii`` of the answerable questions are PERSONAL_INFO (spread over the form), the
    rest cycle through the other types, MULTI_CHOICE included. ``jumbotrons``
    display-only questions are added on top, at the start of the first steps. The
    owner (with a credential, see :func:`seed_user`) is created if needed.
    """
    total = steps * questions_per_step
    if not 0 <= pii <= total:
        raise ValueError(f"pii must be between 0 and {total}")
    seed_user(session, owner_id, plan=plan, credential_status=credential_status, keyring=keyring)
    submission_id = submission_id or new_id("form")
    session.add(Submission(id=submission_id, title=title, owner_id=owner_id))
    # Spread evenly: the positions are at least one apart, so there are exactly `pii`.
    pii_positions = {int((n + 0.5) * total / pii) for n in range(pii)}
    step_ids: list[str] = []
    questions: list[SeededQuestion] = []
    counter = 0
    for step_index in range(steps):
        step_id = f"{submission_id}_s{step_index + 1}"
        step_ids.append(step_id)
        session.add(
            Step(
                id=step_id,
                submission_id=submission_id,
                position=step_index,
                title=f"{step_index + 1}단계",
            )
        )
        types: list[QuestionType] = []
        if step_index < jumbotrons:
            types.append(QuestionType.JUMBOTRON)
        for _ in range(questions_per_step):
            if counter in pii_positions:
                types.append(QuestionType.PERSONAL_INFO)
            else:
                types.append(_ANSWERABLE_TYPES[counter % len(_ANSWERABLE_TYPES)])
            counter += 1
        for position, question_type in enumerate(types):
            question = SeededQuestion(
                id=f"{step_id}_q{position + 1}",
                title=f"{_TITLES[question_type]} ({step_index + 1}-{position + 1})",
                type=question_type,
            )
            questions.append(question)
            session.add(
                Question(
                    id=question.id,
                    step_id=step_id,
                    position=position,
                    title=question.title,
                    type=question_type,
                )
            )
    # Jumbotrons beyond the number of steps go at the end of the last step.
    for extra in range(max(jumbotrons - steps, 0)):
        question = SeededQuestion(
            id=f"{step_ids[-1]}_j{extra + 1}",
            title=_TITLES[QuestionType.JUMBOTRON],
            type=QuestionType.JUMBOTRON,
        )
        questions.append(question)
        session.add(
            Question(
                id=question.id,
                step_id=step_ids[-1],
                position=questions_per_step + extra + 1,
                title=question.title,
                type=QuestionType.JUMBOTRON,
            )
        )
    session.flush()
    return SeededForm(submission_id, owner_id, plan, tuple(step_ids), tuple(questions))


def korean_name(rng: random.Random) -> str:
    return rng.choice(_FAMILY_NAMES) + rng.choice(_GIVEN_NAMES)


def answer_value(question: SeededQuestion, rng: random.Random) -> Any:
    """A plausible plain value for ``question`` (PERSONAL_INFO not yet encrypted)."""
    kind = question.type
    if kind is QuestionType.SHORT_TEXT:
        return rng.choice(_TEAMS)
    if kind is QuestionType.LONG_TEXT:
        return " ".join(rng.sample(_MESSAGES, k=rng.randint(1, 3)))
    if kind is QuestionType.SINGLE_CHOICE:
        return rng.choice(_CHOICES)
    if kind is QuestionType.MULTI_CHOICE:
        return rng.sample(_INTERESTS, k=rng.randint(0, 3))
    if kind is QuestionType.DATE:
        return f"2024-06-{rng.randint(1, 30):02d}"
    if kind is QuestionType.NUMBER:
        return str(rng.randint(1, 12))
    if kind is QuestionType.FILE:
        return f"https://files.example.com/uploads/{rng.getrandbits(48):012x}.pdf"
    if kind is QuestionType.PERSONAL_INFO:
        if rng.random() < 0.5:
            return f"010-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"
        return f"user{rng.randint(1, 99_999)}@example.co.kr"
    return None


def answer_items(
    form: SeededForm, rng: random.Random, *, keyring: Keyring, answer_id: str
) -> list[dict[str, Any]]:
    """The ``answer`` JSON of answer ``answer_id``: PII encrypted for it, a few questions
    left out."""
    items: list[dict[str, Any]] = []
    for question in form.questions:
        if question.type is QuestionType.JUMBOTRON:
            # Some clients send display-only questions with a null value.
            if rng.random() < 0.5:
                items.append({"questionId": question.id, "value": None})
            continue
        if rng.random() < _UNANSWERED_SHARE:
            continue
        value = answer_value(question, rng)
        if question.type is QuestionType.PERSONAL_INFO:
            value = keyring.encrypt(value, answer_value_context(answer_id, question.id))
        items.append({"questionId": question.id, "value": value})
    return items


def seed_answers(
    session: Session,
    form: SeededForm,
    n: int,
    *,
    start: int = 1,
    prefix: str = "ans",
    first_submitted_at: datetime = DEFAULT_FIRST_SUBMITTED_AT,
    seed: int | None = None,
    keyring: Keyring | None = None,
) -> list[str]:
    """Insert ``n`` answers to ``form``, ids ``<prefix>_<start>`` onwards; returns the ids.

    Inserted with one executemany (fast enough for benchmark-sized batches).
    """
    keyring = keyring or default_keyring()
    rng = random.Random(start if seed is None else seed)
    ids = [f"{prefix}_{number}" for number in range(start, start + n)]
    rows = [
        {
            "id": answer_id,
            "submission_id": form.submission_id,
            "user_name": korean_name(rng),
            "submitted_at": first_submitted_at + DEFAULT_ANSWER_SPACING * (start + offset - 1),
            "answer": answer_items(form, rng, keyring=keyring, answer_id=answer_id),
        }
        for offset, answer_id in enumerate(ids)
    ]
    if rows:
        session.execute(insert(SubmissionAnswer), rows)
    return ids


def link_sheet(
    session: Session,
    form: SeededForm,
    spread_sheet_id: str,
    sheet_id: int = 0,
    *,
    create_user_id: str | None = None,
) -> SpreadSheet:
    """Link ``form`` to one sheet (by default as the form's owner)."""
    link = SpreadSheet(
        submission_id=form.submission_id,
        spread_sheet_id=spread_sheet_id,
        sheet_id=sheet_id,
        create_user_id=create_user_id or form.owner_id,
    )
    session.add(link)
    session.flush()
    return link


def answer_ids_for(prefix: str, numbers: Sequence[int]) -> list[str]:
    """``["<prefix>_<n>", ...]``: the ids :func:`seed_answers` gives."""
    return [f"{prefix}_{number}" for number in numbers]

"""Key and format rotation of every stored token: ``sheetsync pii rotate [--check]``.

Rewrites each personal-info value and refresh token as a version-2 token under the
primary key, bound to its row (:mod:`sheetsync.crypto`). It works in short batches and
is resumable; every write is a compare-and-set on the column's text, so a row the web
app saved meanwhile is read again, never overwritten. A token that cannot be read is
skipped and listed, never fatal.

Tokens are found whatever the form looks like now: in the items of today's
personal-info questions, of personal-info columns of a link's column map (a deleted
question keeps its column, and the flush still decrypts it), and in any item whose
value has a token's shape under a key of the keyring (a deleted question no link ever
showed). Every answer is read, so rotation and ``--check`` scan the whole table.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, Text, cast, select, update
from sqlalchemy.orm import Session

from sheetsync.crypto import (
    TOKEN_VERSION,
    Keyring,
    answer_value_context,
    default_keyring,
    refresh_token_context,
)
from sheetsync.errors import CryptoError, MissingKeyError, VersionOneTokenError
from sheetsync.models import (
    GoogleCredential,
    Question,
    QuestionType,
    SheetColumn,
    SpreadSheet,
    Step,
    SubmissionAnswer,
)

#: Rows read and written per transaction by :func:`rotate_pii` and :func:`check_pii`.
DEFAULT_ROTATION_BATCH_SIZE = 500
#: Reads of a row the web app changed under :func:`rotate_pii` before it is left alone.
_SWAP_ATTEMPTS = 3

ANSWERS_TABLE = "submission_answer"
CREDENTIALS_TABLE = "google_credential"
#: Why a token is listed by :func:`check_pii` or skipped by :func:`rotate_pii`.
OLD_KEY, OLD_VERSION, UNREADABLE, CHANGED = "old_key", "old_version", "unreadable", "changed"


@dataclass(frozen=True, slots=True)
class TokenIssue:
    """A token that is not version 2 under the primary key, or could not be made one:
    where it is, its ``state`` and why, never its value. ``question_id`` is None for a
    refresh token, and for a whole answer (``CHANGED``)."""

    table: str
    row_id: str
    question_id: str | None
    state: str
    reason: str


@dataclass(frozen=True, slots=True)
class RotationResult:
    """What :func:`rotate_pii` looked at and rewrote, and the tokens it had to skip."""

    answers_scanned: int
    answers_updated: int
    values_reencrypted: int
    credentials_reencrypted: int
    skipped: tuple[TokenIssue, ...] = ()


@dataclass(frozen=True, slots=True)
class PiiCheck:
    """What :func:`check_pii` found: every token left to rotate (or to fix by hand)."""

    answers_scanned: int
    credentials_scanned: int
    left: tuple[TokenIssue, ...]

    def counts(self) -> dict[str, dict[str, int]]:
        """Tokens left, per table and state (every table and state, zeros included)."""
        counts = {t: dict.fromkeys((OLD_KEY, OLD_VERSION, UNREADABLE), 0) for t in _TABLES}
        for issue in self.left:
            counts[issue.table][issue.state] = counts[issue.table].get(issue.state, 0) + 1
        return counts


_TABLES = (ANSWERS_TABLE, CREDENTIALS_TABLE)
#: Gives a token's replacement (the same token when it stays), or raises CryptoError.
_Convert = Callable[[str, str], str]


def rotate_pii(
    session: Session,
    *,
    keyring: Keyring | None = None,
    batch_size: int = DEFAULT_ROTATION_BATCH_SIZE,
    commit_each_batch: bool = False,
) -> RotationResult:
    """Rewrite every personal-info value and refresh token as version 2 under the
    primary key, bound to its row (answer and question, or user).

    Works in batches by primary key and rewrites only what changes, each row with a
    compare-and-set (``UPDATE ... WHERE`` the column still holds what was read), so a
    value the web app saved meanwhile is read again, never overwritten. A token that
    cannot be read (tampered, misplaced, not a token, under a key that is not in the
    keyring) is left as it is and listed in ``skipped``. Safe to run again, so with
    ``commit_each_batch`` a large table is rotated in short transactions and an
    interrupted run is simply run again. Otherwise the caller commits.
    """
    keyring = keyring or default_keyring()
    skipped: list[TokenIssue] = []
    scanned = updated = values = credentials = 0
    for pii_questions_of, rows in _answer_pages(session, batch_size):
        scanned += len(rows)
        for answer_id, text, form_id in rows:
            found = _Finder(pii_questions_of(form_id), keyring.names_a_key)
            count = _rotate_answer(session, keyring, answer_id, text, found, skipped)
            updated += count > 0
            values += count
        _end_batch(session, commit_each_batch)
    for credential_rows in _credential_pages(session, batch_size):
        for user_id, token in credential_rows:
            credentials += _rotate_credential(session, keyring, user_id, token, skipped)
        _end_batch(session, commit_each_batch)
    return RotationResult(scanned, updated, values, credentials, tuple(skipped))


def check_pii(
    session: Session,
    *,
    keyring: Keyring | None = None,
    batch_size: int = DEFAULT_ROTATION_BATCH_SIZE,
) -> PiiCheck:
    """Every token that is not version 2 under the primary key, or does not decrypt where
    it is. Reads in short transactions (each batch's is rolled back) and writes nothing."""
    keyring = keyring or default_keyring()
    left: list[TokenIssue] = []

    def inspect(table: str, row_id: str, question_id: str | None, token: str) -> str:
        context = (
            refresh_token_context(row_id)
            if question_id is None
            else answer_value_context(row_id, question_id)
        )
        keyring.decrypt(token, context)
        version, key = keyring.header(token)
        if key != keyring.primary_key_id:
            reason = f"under an older key (id {key.hex()})"
            left.append(TokenIssue(table, row_id, question_id, OLD_KEY, reason))
        elif version != TOKEN_VERSION:
            bound_to = "user" if question_id is None else "answer and question"
            reason = f"version {version}: not bound to its {bound_to}"
            left.append(TokenIssue(table, row_id, question_id, OLD_VERSION, reason))
        return token

    answers = credentials = 0
    for pii_questions_of, rows in _answer_pages(session, batch_size):
        answers += len(rows)
        for answer_id, text, form_id in rows:
            convert = functools.partial(inspect, ANSWERS_TABLE, answer_id)
            found = _Finder(pii_questions_of(form_id), keyring.names_a_key)
            _walk_answer(answer_id, _decode(text), found, convert, left)
        session.rollback()
    for credential_rows in _credential_pages(session, batch_size):
        credentials += len(credential_rows)
        for user_id, token in credential_rows:
            try:
                inspect(CREDENTIALS_TABLE, user_id, None, token)
            except CryptoError as exc:
                left.append(_issue(CREDENTIALS_TABLE, user_id, None, exc))
        session.rollback()
    return PiiCheck(answers, credentials, tuple(left))


def _answer_pages(
    session: Session, batch_size: int
) -> Iterator[tuple[Callable[[str], frozenset[str]], Sequence[Row[str, str | None, str]]]]:
    """Pages of ``(answer id, answer as stored text)`` of every answer, with a lookup of
    its form's personal-info question ids. The text is what a compare-and-set compares."""
    by_form = _pii_questions_by_form(session)

    def pii_questions_of(form_id: str) -> frozenset[str]:
        return by_form.get(form_id, frozenset())

    last_id = ""
    while rows := session.execute(
        select(
            SubmissionAnswer.id, cast(SubmissionAnswer.answer, Text), SubmissionAnswer.submission_id
        )
        .where(SubmissionAnswer.id > last_id)
        .order_by(SubmissionAnswer.id)
        .limit(batch_size)
    ).all():
        last_id = rows[-1][0]
        yield pii_questions_of, rows


def _credential_pages(session: Session, batch_size: int) -> Iterator[Sequence[Row[str, str]]]:
    last_id = ""
    while rows := session.execute(
        select(GoogleCredential.user_id, GoogleCredential.refresh_token)
        .where(GoogleCredential.user_id > last_id)
        .order_by(GoogleCredential.user_id)
        .limit(batch_size)
    ).all():
        last_id = rows[-1][0]
        yield rows


def _pii_questions_by_form(session: Session) -> dict[str, frozenset[str]]:
    """Each form's personal-info question ids: today's questions, and the columns of its
    links' column maps made for one (deleted questions keep their columns)."""
    today = select(Step.submission_id, Question.id).join(Step, Question.step_id == Step.id)
    mapped = select(SpreadSheet.submission_id, SheetColumn.question_id).join(
        SpreadSheet, SheetColumn.link_id == SpreadSheet.id
    )
    rows = [
        *session.execute(today.where(Question.type == QuestionType.PERSONAL_INFO)),
        *session.execute(mapped.where(SheetColumn.type == QuestionType.PERSONAL_INFO.value)),
    ]
    by_form: dict[str, set[str]] = {}
    for submission_id, question_id in rows:
        by_form.setdefault(submission_id, set()).add(question_id)
    return {form: frozenset(ids) for form, ids in sorted(by_form.items())}


def _decode(text: str | None) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # SQLite keeps any text: the flush fails it alone
        return None


@dataclass(frozen=True, slots=True)
class _Finder:
    """Which values of an answer are tokens: every value of ``pii_questions``, and any
    other that ``names_a_key`` (a token's shape under a key of the keyring)."""

    pii_questions: frozenset[str]
    names_a_key: Callable[[object], bool]

    def wants(self, question_id: str, part: object) -> bool:
        return question_id in self.pii_questions or self.names_a_key(part)


def _walk_answer(
    answer_id: str,
    items: Any,
    finder: _Finder,
    convert: _Convert,
    issues: list[TokenIssue],
) -> tuple[Any, int]:
    """``items`` with each personal-info token replaced by ``convert(question id, token)``,
    and how many changed. A token it refuses stays as it is, listed in ``issues``. A
    document that is not a list holds no token to find (the flush fails it on its own)."""
    if not isinstance(items, list):
        return items, 0
    changed = 0
    new_items: list[Any] = []
    for item in items:
        question_id = item.get("questionId") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(question_id, str) else None
        if value is None or value in ("", []):
            new_items.append(item)
            continue
        assert isinstance(question_id, str)
        parts = value if isinstance(value, list) else [value]
        new_parts = []
        for part in parts:
            new_part = part
            if not finder.wants(question_id, part):
                new_parts.append(part)
                continue
            try:
                if not isinstance(part, str):
                    raise CryptoError(f"personal info is not a token (a {type(part).__name__})")
                new_part = convert(question_id, part)
            except CryptoError as exc:
                issues.append(_issue(ANSWERS_TABLE, answer_id, question_id, exc))
            changed += new_part != part
            new_parts.append(new_part)
        new_value = new_parts if isinstance(value, list) else new_parts[0]
        new_items.append(item if new_value == value else {**item, "value": new_value})
    return new_items, changed


def _rotate_answer(
    session: Session,
    keyring: Keyring,
    answer_id: str,
    text: str | None,
    finder: _Finder,
    skipped: list[TokenIssue],
) -> int:
    """Rotate one answer's tokens; how many were rewritten."""

    def upgrade(question_id: str, token: str) -> str:
        return keyring.upgrade(token, answer_value_context(answer_id, question_id))

    for _ in range(_SWAP_ATTEMPTS):
        found: list[TokenIssue] = []
        items, changed = _walk_answer(answer_id, _decode(text), finder, upgrade, found)
        if not changed or _swap(
            session, SubmissionAnswer.answer, SubmissionAnswer.id == answer_id, text, items
        ):
            skipped.extend(found)
            return changed
        text = session.scalar(
            select(cast(SubmissionAnswer.answer, Text)).where(SubmissionAnswer.id == answer_id)
        )
    skipped.append(_changed(ANSWERS_TABLE, answer_id))
    return 0


def _rotate_credential(
    session: Session, keyring: Keyring, user_id: str, token: str | None, skipped: list[TokenIssue]
) -> int:
    """Rotate one refresh token; 1 if it was rewritten."""
    for _ in range(_SWAP_ATTEMPTS):
        if token is None:  # deleted meanwhile
            return 0
        try:
            new_token = keyring.upgrade(token, refresh_token_context(user_id))
        except CryptoError as exc:
            skipped.append(_issue(CREDENTIALS_TABLE, user_id, None, exc))
            return 0
        if new_token == token:
            return 0
        where = GoogleCredential.user_id == user_id
        if _swap(session, GoogleCredential.refresh_token, where, token, new_token):
            return 1
        token = session.scalar(select(GoogleCredential.refresh_token).where(where))
    skipped.append(_changed(CREDENTIALS_TABLE, user_id))
    return 0


def _swap(session: Session, column: Any, where: Any, old_text: str | None, new: Any) -> bool:
    """Compare-and-set: write ``new`` into ``column`` of the row ``where`` picks only if it
    still holds ``old_text`` (compared as text: PostgreSQL's ``json`` has no ``=``).

    On PostgreSQL a row the web app changed since it was read fails the comparison and
    is read again. On SQLite every transaction holds the write lock from its start
    (``BEGIN IMMEDIATE``), so no one can change it in between; the check costs nothing.
    """
    result = session.execute(
        update(column.class_)
        .where(where, cast(column, Text) == old_text)
        .values({column.key: new})
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def _issue(table: str, row_id: str, question_id: str | None, exc: CryptoError) -> TokenIssue:
    if isinstance(exc, VersionOneTokenError):
        state = OLD_VERSION
    else:
        state = OLD_KEY if isinstance(exc, MissingKeyError) else UNREADABLE
    return TokenIssue(table, row_id, question_id, state, exc.message)


def _changed(table: str, row_id: str) -> TokenIssue:
    reason = "changed by someone else at every try: run the rotation again"
    return TokenIssue(table, row_id, None, CHANGED, reason)


def _end_batch(session: Session, commit: bool) -> None:
    if commit:
        session.commit()
    else:
        session.flush()

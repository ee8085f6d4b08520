"""Answers to sheet rows, as pure functions over a form's layout.

A row is ``[answer id, submitter, submitted at, one cell per column]``, where the
columns are the form's non-JUMBOTRON questions in form order (steps by position, then
questions by position). Cells are sent RAW, so they are passed through as typed: a
respondent's ``=HYPERLINK(...)`` or ``0012`` stays text.

The flush builds up to 5000 rows per batch, so :class:`RowBuilder` resolves each
question id to its column and kind once per layout, and does only a dict lookup and a
type check per cell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from sheetsync.crypto import Keyring, default_keyring
from sheetsync.errors import CryptoError, NotFoundError, ValidationError
from sheetsync.models import Question, QuestionType, Step, Submission
from sheetsync.settings import Settings, get_settings

#: Joins the choices of a multi-choice answer.
MULTI_VALUE_SEPARATOR = ", "
_join_choices = MULTI_VALUE_SEPARATOR.join
#: Columns before the question columns: answer id, submitter, submitted at.
FIXED_COLUMNS = 3


@dataclass(frozen=True, slots=True)
class Column:
    """One question column of the sheet."""

    question_id: str
    title: str
    type: QuestionType


@dataclass(frozen=True)
class FormLayout:
    """A form's columns in order, and the display-only questions whose answers are dropped."""

    submission_id: str
    columns: tuple[Column, ...]
    ignored_question_ids: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_questions(
        cls, submission_id: str, questions: Iterable[tuple[str, str, QuestionType]]
    ) -> FormLayout:
        """Build from ``(question id, title, type)`` already in form order."""
        columns: list[Column] = []
        ignored: set[str] = set()
        for question_id, title, question_type in questions:
            if question_type is QuestionType.JUMBOTRON:
                ignored.add(question_id)
            else:
                columns.append(Column(question_id, title, question_type))
        return cls(submission_id, tuple(columns), frozenset(ignored))

    @property
    def question_ids(self) -> tuple[str, ...]:
        return tuple(column.question_id for column in self.columns)

    @property
    def has_personal_info(self) -> bool:
        return any(column.type is QuestionType.PERSONAL_INFO for column in self.columns)


def load_layout(session: Session, submission_id: str) -> FormLayout:
    """The layout of form ``submission_id``; :class:`NotFoundError` if there is no such form."""
    rows = session.execute(
        select(Question.id, Question.title, Question.type)
        .join(Step, Question.step_id == Step.id)
        .where(Step.submission_id == submission_id)
        .order_by(Step.position, Step.id, Question.position, Question.id)
    ).all()
    if not rows and session.get(Submission, submission_id) is None:
        raise NotFoundError(f"form {submission_id} does not exist", submission_id=submission_id)
    return FormLayout.from_questions(submission_id, ((r[0], r[1], r[2]) for r in rows))


def header_row(layout: FormLayout, settings: Settings | None = None) -> list[str]:
    """``["Answer ID", "Submitter", "Submitted at", <question titles>]``, labels from settings."""
    settings = settings or get_settings()
    limit = settings.cell_chars_max
    labels = [settings.header_answer_id, settings.header_submitter, settings.header_submitted_at]
    return [fit_cell(text, limit) for text in labels + [c.title for c in layout.columns]]


def fit_cell(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else cut with a visible marker.

    The marker says how many characters were cut, e.g. ``… [truncated 12,345 chars]``,
    and the result is never longer than ``limit``.
    """
    if len(text) <= limit:
        return text
    keep = limit
    marker = ""
    # The marker's length depends on the count it reports; settle in a step or two.
    for _ in range(4):
        marker = f"… [truncated {len(text) - keep:,} chars]"
        new_keep = max(limit - len(marker), 0)
        if new_keep == keep:
            break
        keep = new_keep
    return (text[:keep] + marker)[:limit]


def format_time(value: datetime, zone: tzinfo) -> str:
    """``value`` as ``YYYY-MM-DD HH:MM:SS`` in ``zone``; a naive value is taken as UTC.

    The reference for :func:`time_formatter`, which gives the same text faster.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # isoformat is about twice as fast as strftime and gives the same first 19 characters.
    return value.astimezone(zone).isoformat(" ", "seconds")[:19]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_SECOND = timedelta(seconds=1)
_LAST_SECOND_OF_HOUR = timedelta(seconds=3599)
#: `` HH`` for every hour, and ``:MM:SS`` for every second of an hour (3600 short strings).
_HOUR_TEXT = tuple(f" {hour:02d}" for hour in range(24))
_MINUTE_SECOND_TEXT = tuple(
    f":{minute:02d}:{second:02d}" for minute in range(60) for second in range(60)
)
#: Marks a UTC hour in which the zone's offset changes (a DST switch, say).
_MIXED = 1 << 40
#: Cached hours and days per formatter, before the caches start over.
_CACHE_ENTRIES = 4096


def time_formatter(zone: tzinfo) -> Callable[[datetime], str]:
    """A function giving :func:`format_time` ``(value, zone)``, about five times faster.

    It works in whole seconds since the epoch: the zone's offset is looked up once per
    UTC hour (checked at both ends of the hour; an hour with a change of offset, such as
    a DST switch, is left to :func:`format_time`), and the ``YYYY-MM-DD HH`` text once
    per local hour. The rest is arithmetic and a table of ``:MM:SS``. Use one per zone
    and batch (or longer: the caches are bounded).
    """
    offsets: dict[int, int] = {}  # UTC hour since the epoch -> offset in seconds, or _MIXED
    hours: dict[int, str] = {}  # local hour since the epoch -> "YYYY-MM-DD HH"

    def offset_of(hour: int) -> int:
        start = _EPOCH + timedelta(hours=hour)
        try:
            first = start.astimezone(zone).utcoffset()
            last = (start + _LAST_SECOND_OF_HOUR).astimezone(zone).utcoffset()
        except OverflowError:  # the ends of datetime's range
            return _MIXED
        if first is None or first != last:
            return _MIXED
        return first // _SECOND

    def format_local(value: datetime) -> str:
        try:
            seconds: int = (value - _EPOCH) // _SECOND
        except TypeError:  # naive, or a tzinfo without an offset
            return format_time(value, zone)
        offset = offsets.get(seconds // 3600)
        if offset is None:
            if len(offsets) >= _CACHE_ENTRIES:
                offsets.clear()
            offset = offsets[seconds // 3600] = offset_of(seconds // 3600)
        if offset == _MIXED:
            return format_time(value, zone)
        local = seconds + offset
        hour_text = hours.get(local // 3600)
        if hour_text is None:
            day, hour = divmod(local // 3600, 24)
            try:
                hour_text = date.fromordinal(day + _EPOCH_ORDINAL).isoformat() + _HOUR_TEXT[hour]
            except (ValueError, OverflowError):  # beyond year 9999 in the zone
                return format_time(value, zone)
            if len(hours) >= _CACHE_ENTRIES:
                hours.clear()
            hours[local // 3600] = hour_text
        return hour_text + _MINUTE_SECOND_TEXT[local % 3600]

    return format_local


class RowBuilder:
    """Builds the rows of one form. Reuse one per layout: the setup is done once."""

    __slots__ = (
        "_blank",
        "_cell_limit",
        "_cells",
        "_decrypt",
        "_format_time",
        "_ignored",
        "_slots",
        "_width",
        "_zone",
        "layout",
    )

    def __init__(
        self,
        layout: FormLayout,
        settings: Settings | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        settings = settings or get_settings()
        self.layout = layout
        self._zone = ZoneInfo(settings.timezone)
        self._format_time = time_formatter(self._zone)
        self._cell_limit = settings.cell_chars_max
        self._width = width = FIXED_COLUMNS + len(layout.columns)
        self._ignored = layout.ignored_question_ids
        # Question id -> cell index, negated for PERSONAL_INFO (indexes start at 3, so
        # the sign is unambiguous): one dict lookup per answer item tells both.
        self._slots: dict[str, int] = {
            column.question_id: -index if column.type is QuestionType.PERSONAL_INFO else index
            for index, column in enumerate(layout.columns, start=FIXED_COLUMNS)
        }
        # The question cells :meth:`build` starts each row with, and where its answers
        # go. The extra cell at the end takes the answers to ignored questions (so they
        # need no test of their own) and is cut off.
        self._blank = [""] * (width - FIXED_COLUMNS + 1)
        self._cells = dict.fromkeys(self._ignored, width) | self._slots
        # Resolved now so a missing key fails before the first row, not inside it.
        self._decrypt: Callable[[str], str] = _no_personal_info
        if layout.has_personal_info:
            self._decrypt = (keyring or default_keyring()).decrypt

    def build(
        self,
        answer_id: str,
        user_name: str | None,
        submitted_at: datetime,
        answer_items: Iterable[Mapping[str, Any]],
    ) -> list[str]:
        """One row: the fixed cells, then one cell per column ("" when unanswered).

        Raises :class:`ValidationError` for an answer to a question the form does not
        have, and :class:`CryptoError` for a personal-info value that cannot be
        decrypted. Both name the answer and the question, never the value.
        """
        # The fast path assumes well-formed items. Anything unexpected (an error, an
        # item without "questionId" or "value", an unknown question, a value that is
        # not JSON-shaped) sends the whole row to _build_checked, the reference, which
        # gives the result or the error: this path never decides one on its own.
        if type(answer_items) is not list:
            answer_items = list(answer_items)
        limit = self._cell_limit
        cells = self._cells
        decrypt = self._decrypt
        row = [answer_id, user_name or "", self._format_time(submitted_at), *self._blank]
        if user_name and len(user_name) > limit:
            row[1] = fit_cell(user_name, limit)
        try:
            for item in answer_items:
                index = cells[item["questionId"]]
                value = item["value"]
                if index < 0:
                    index = -index
                    if value:  # None, "" and [] have nothing to decrypt
                        value = (
                            decrypt(value)
                            if type(value) is str
                            else [decrypt(part) for part in value]
                        )
                if type(value) is str:
                    row[index] = value if len(value) <= limit else fit_cell(value, limit)
                elif value is None:
                    row[index] = ""
                else:  # choices (a non-string one raises: checked path), or a stray number
                    cell = _join_choices(value) if type(value) is list else _text(value)
                    row[index] = cell if len(cell) <= limit else fit_cell(cell, limit)
        except Exception:
            return self._build_checked(answer_id, user_name, submitted_at, answer_items)
        del row[-1]
        return row

    def _build_checked(
        self,
        answer_id: str,
        user_name: str | None,
        submitted_at: datetime,
        answer_items: Iterable[Mapping[str, Any]],
    ) -> list[str]:
        """The reference implementation of :meth:`build`, item by item with every check."""
        limit = self._cell_limit
        slots = self._slots
        decrypt = self._decrypt
        row = [""] * self._width
        row[0] = answer_id
        if user_name:
            row[1] = user_name if len(user_name) <= limit else fit_cell(user_name, limit)
        row[2] = format_time(submitted_at, self._zone)
        question_id: Any = None
        try:
            for item in answer_items:
                if not isinstance(item, Mapping):
                    raise _unknown_question(answer_id, None)
                question_id = item.get("questionId")
                if not isinstance(question_id, str):
                    raise _unknown_question(answer_id, question_id)
                index = slots.get(question_id)
                if index is None:
                    if question_id in self._ignored:
                        continue
                    raise _unknown_question(answer_id, question_id)
                value = item.get("value")
                if index < 0:
                    index = -index
                    if value:  # None, "" and [] have nothing to decrypt
                        value = (
                            decrypt(value)
                            if type(value) is str
                            else [decrypt(part) for part in value]
                        )
                if type(value) is str:
                    cell = value
                elif type(value) is list:
                    cell = _join(value)
                else:
                    cell = _text(value)
                row[index] = cell if len(cell) <= limit else fit_cell(cell, limit)
        except CryptoError as exc:
            raise CryptoError(
                f"answer {answer_id}, question {question_id}: {exc.message}",
                answer_id=answer_id,
                question_id=question_id,
            ) from None
        return row


def _no_personal_info(token: str) -> str:
    raise AssertionError("the layout has no PERSONAL_INFO column")


def _unknown_question(answer_id: str, question_id: Any) -> ValidationError:
    if not isinstance(question_id, str):
        return ValidationError(
            f"answer {answer_id} has an item without a questionId", answer_id=answer_id
        )
    return ValidationError(
        f"answer {answer_id} has a value for question {question_id}, which is not in the form",
        answer_id=answer_id,
        question_id=question_id,
    )


def _join(values: list[Any]) -> str:
    try:
        return MULTI_VALUE_SEPARATOR.join(values)
    except TypeError:  # a stray non-string choice
        return MULTI_VALUE_SEPARATOR.join([_text(value) for value in values])


def _text(value: Any) -> str:
    # JSON gives str, int, float, bool or None; a stray number still becomes its digits.
    if value is None:
        return ""
    if type(value) is bool:
        return "TRUE" if value else "FALSE"
    return str(value)

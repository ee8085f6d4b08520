"""Sheet rows from a form's layout (:mod:`sheetsync.flush.layout`): the header row, and
each answer's row.

Cells are sent RAW, so they are passed through as typed: a respondent's
``=HYPERLINK(...)`` or ``0012`` stays text.

The flush builds up to 5000 rows per batch, so :class:`RowBuilder` resolves each
question id to its column and kind once per layout, and does only a dict lookup and a
type check per cell. A personal-info token decrypts only as the value of its own answer
and question (:func:`sheetsync.crypto.encrypt_answer_value`): the answer's part of that
context is built once per row, the question's once per layout.

Whatever is wrong with one answer is that answer's :class:`AnswerError` alone, whose
message is ``answer <id>, question <id or ->: <what> (<error class>)``, never the value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo

from sheetsync.crypto import Keyring, answer_context, default_keyring, question_context
from sheetsync.errors import AnswerError, ConfigError, CryptoError, VersionOneTokenError
from sheetsync.flush.cells import fit_cell
from sheetsync.flush.hydrate import MalformedAnswer
from sheetsync.flush.layout import FIXED_COLUMNS, FormLayout
from sheetsync.flush.times import format_time
from sheetsync.flush.typed import Cell, serial_date_time, typed_columns
from sheetsync.models import ID_LENGTH, QuestionType
from sheetsync.settings import Settings, get_settings

#: What makes a cell a formula in a program that opens the sheet's CSV export (OWASP's
#: list): with the link's ``escape_formulas``, such text is written after an apostrophe.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: Joins the choices of a multi-choice answer.
MULTI_VALUE_SEPARATOR = ", "
_join_choices = MULTI_VALUE_SEPARATOR.join


def header_row(layout: FormLayout, settings: Settings | None = None) -> list[str]:
    """``["Answer ID", "Submitter", "Submitted at", <question titles>]``, labels from settings."""
    settings = settings or get_settings()
    limit = settings.cell_chars_max
    cells = [""] * layout.width
    cells[:FIXED_COLUMNS] = [
        settings.header_answer_id,
        settings.header_submitter,
        settings.header_submitted_at,
    ]
    for index, question in zip(layout.cell_indexes, layout.questions, strict=True):
        cells[index] = question.title
    return [fit_cell(text, limit) for text in cells]


def _text_cell(value: str, limit: int) -> str:
    """A text cell; the fast test first (most cells are short, many ASCII)."""
    return value if value.isascii() and len(value) <= limit else fit_cell(value, limit)


#: Where a question's answer goes: its cell index, and the question's part of the
#: decryption context when it is PERSONAL_INFO (None for any other column).
_Slot = tuple[int, bytes | None]


class RowBuilder:
    """Builds the rows of one form. Reuse one per layout: the setup is done once."""

    __slots__ = (
        "_blank",
        "_cell_limit",
        "_cells",
        "_decrypt",
        "_ignored",
        "_personal",
        "_slots",
        "_typed",
        "_width",
        "layout",
        "zone",
    )

    def __init__(
        self,
        layout: FormLayout,
        settings: Settings | None = None,
        keyring: Keyring | None = None,
        *,
        zone: tzinfo | None = None,
        typed: bool = False,
    ) -> None:
        settings = settings or get_settings()
        self.layout = layout
        self.zone = zone or ZoneInfo(settings.timezone)
        self._cell_limit = settings.cell_chars_max
        self._width = width = layout.width
        self._ignored = layout.ignored_question_ids
        indexes = layout.cell_indexes
        self._personal = layout.has_personal_info
        # Question id -> (cell index, the question's part of a PERSONAL_INFO column's
        # context, or None for any other column): one dict lookup per answer item tells
        # both where it goes and whether it is a token to decrypt.
        self._slots: dict[str, _Slot] = {
            question.question_id: (
                index,
                question_context(question.question_id)
                if question.type is QuestionType.PERSONAL_INFO
                else None,
            )
            for index, question in zip(indexes, layout.questions, strict=True)
        }
        # With typed cells: (cell index, parser) of NUMBER and DATE columns; a value
        # that does not parse stays text (see typed_cells).
        self._typed: tuple[tuple[int, Callable[[str], Cell]], ...] | None = None
        if typed:
            kinds = (question.type for question in layout.questions)
            self._typed = typed_columns(zip(indexes, kinds, strict=True), self.zone)
        # The question cells :meth:`build` starts each row with, and where its answers
        # go. The extra cell at the end takes the answers to ignored questions (so they
        # need no test of their own) and is cut off.
        self._blank = [""] * (width - FIXED_COLUMNS + 1)
        ignored: _Slot = (width, None)
        self._cells = dict.fromkeys(self._ignored, ignored) | self._slots
        # Resolved now so a missing key fails before the first row, not inside it.
        self._decrypt: Callable[[str, bytes], str] = _no_personal_info
        if self._personal:
            self._decrypt = (keyring or default_keyring()).decrypt

    def build(
        self,
        answer_id: str,
        user_name: str | None,
        submitted_at: datetime,
        answer_items: object,
    ) -> list[Cell]:
        """One row: the fixed cells, then one cell per column ("" when unanswered).

        ``answer_items`` is the answer's document as decoded (a list of items, by
        contract), or a :class:`MalformedAnswer`. Raises :class:`AnswerError` for
        anything wrong with this answer: a document that is not a list of items, an
        answer to a question the form does not have, personal info that is not a token
        (or a list of them) or does not decrypt, a value no cell can show, or any other
        error while building the row. A :class:`ConfigError` (a :class:`MissingKeyError`,
        say) is the configuration's fault and propagates unchanged.
        """
        # The fast path assumes well-formed items. Anything unexpected (an error, an
        # item without "questionId" or "value", an unknown question, a value that is
        # not a string, a list of strings, a number or null) sends the whole row to
        # _build_checked, the reference, which gives the result or the error: this path
        # never decides one on its own.
        if type(answer_items) is not list:
            return self._typed_row(
                self._build_checked(answer_id, user_name, submitted_at, answer_items),
                submitted_at,
            )
        limit = self._cell_limit
        width = self._width
        cells = self._cells
        decrypt = self._decrypt
        try:
            answer = answer_context(answer_id) if self._personal else b""
            row = [answer_id, user_name or "", format_time(submitted_at, self.zone), *self._blank]
            if user_name and not (user_name.isascii() and len(user_name) <= limit):
                row[1] = fit_cell(user_name, limit)
            for item in answer_items:
                index, question = cells[item["questionId"]]
                value = item["value"]
                if question is not None:  # PERSONAL_INFO
                    if type(value) is str:
                        if value:
                            value = decrypt(value, answer + question)
                    elif type(value) is list:
                        context = answer + question
                        value = [decrypt(part, context) for part in value]
                    elif value is not None:
                        raise TypeError
                if type(value) is str:
                    ok = value.isascii() and len(value) <= limit
                    row[index] = value if ok else fit_cell(value, limit)
                elif value is None:
                    row[index] = ""
                elif index != width:  # choices, or a stray number; anything when ignored
                    cell = _join_choices(value) if type(value) is list else _scalar_text(value)
                    row[index] = _text_cell(cell, limit)
        except Exception:
            row = self._build_checked(answer_id, user_name, submitted_at, answer_items)
            return self._typed_row(row, submitted_at)
        del row[-1]
        return self._typed_row(row, submitted_at)

    def _typed_row(self, row: list[str], submitted_at: datetime) -> list[Cell]:
        """With typed cells: "Submitted at" and DATE answers as serial dates, NUMBER
        answers as numbers (those that parse); everything else is text, sent RAW, with
        an apostrophe before formula-like text when the link escapes formulas."""
        cells: list[Cell] = list(row)
        if self._typed is not None:
            cells[2] = serial_date_time(submitted_at, self.zone)
            for index, parse in self._typed:
                if row[index]:
                    cells[index] = parse(row[index])
        if self.layout.escape_formulas:
            limit = self._cell_limit
            for index in range(1, len(cells)):  # column A is the answer id: never
                cell = cells[index]
                if type(cell) is str and cell.startswith(FORMULA_STARTS):
                    cells[index] = fit_cell("'" + cell, limit)
        return cells

    def _build_checked(
        self,
        answer_id: str,
        user_name: str | None,
        submitted_at: datetime,
        answer_items: object,
    ) -> list[str]:
        """The reference implementation of :meth:`build`, item by item with every check."""
        limit = self._cell_limit
        question_id: str | None = None
        try:
            if isinstance(answer_items, MalformedAnswer):
                raise _RowError(
                    f"column {answer_items.column} cannot be read", answer_items.error_class
                )
            if not isinstance(answer_items, Iterable) or isinstance(
                answer_items, str | bytes | bytearray | Mapping
            ):
                raise _RowError(f"the answer is {_kind(answer_items)}, not a list of items")
            row = [""] * self._width
            row[0] = answer_id
            if user_name:
                row[1] = _text_cell(user_name, limit)
            row[2] = format_time(submitted_at, self.zone)
            for position, item in enumerate(answer_items):
                question_id = None
                if not isinstance(item, Mapping):
                    raise _RowError(f"answer[{position}] is {_kind(item)}, not an object")
                if "questionId" not in item:
                    raise _RowError(f"answer[{position}] has no questionId", "KeyError")
                if not isinstance(item["questionId"], str):
                    kind = _kind(item["questionId"])
                    raise _RowError(f"answer[{position}] has a questionId that is {kind}")
                question_id = item["questionId"]
                slot = self._slots.get(question_id)
                if slot is None:
                    if question_id in self._ignored:
                        continue
                    raise _RowError("the form has no such question", "KeyError")
                index, question = slot
                value = item.get("value")
                if question is not None:  # PERSONAL_INFO
                    context = answer_context(answer_id) + question
                    cell = self._personal_cell(value, context)
                else:
                    cell = _cell(value)
                row[index] = _text_cell(cell, limit)
        except _RowError as refused:
            raise _answer_error(
                answer_id, question_id, refused.description, refused.error_class
            ) from None
        except ConfigError:
            raise
        except VersionOneTokenError as exc:
            what = (
                "the personal-info token is version 1, bound to no answer: refused unless "
                "SHEETSYNC_PII_ACCEPT_V1_TOKENS=true"
            )
            raise _answer_error(answer_id, question_id, what, type(exc).__name__) from None
        except CryptoError as exc:
            what = (
                "the personal-info token fails authentication: tampered, corrupt, or made "
                "for another answer or question"
            )
            raise _answer_error(answer_id, question_id, what, type(exc).__name__) from None
        except Exception as exc:
            what = "unexpected error while building the row"
            raise _answer_error(answer_id, question_id, what, type(exc).__name__) from None
        return row

    def _personal_cell(self, value: object, context: bytes) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return self._decrypt(value, context) if value else ""
        if isinstance(value, list):
            for part in value:
                if not isinstance(part, str):
                    kind = f"a list with {_kind(part)} in it"
                    raise _RowError(f"personal info is {kind}, not a token or a list of tokens")
            return _join_choices([self._decrypt(part, context) for part in value])
        raise _RowError(f"personal info is {_kind(value)}, not a token or a list of tokens")


class _RowError(Exception):
    """Why :meth:`RowBuilder._build_checked` refuses an answer, and the error class named."""

    def __init__(self, description: str, error_class: str = "TypeError") -> None:
        super().__init__(description)
        self.description = description
        self.error_class = error_class


def _answer_error(
    answer_id: str, question_id: str | None, description: str, error_class: str
) -> AnswerError:
    # A question id comes from the answer and may be anything: keep the reason short.
    if question_id is not None and len(question_id) > ID_LENGTH:
        question_id = question_id[:ID_LENGTH] + "…"
    return AnswerError(
        f"answer {answer_id}, question {question_id or '-'}: {description} ({error_class})",
        answer_id=answer_id,
        question_id=question_id,
        error_class=error_class,
    )


def _no_personal_info(token: str, context: bytes) -> str:
    raise AssertionError("the layout has no PERSONAL_INFO column")


def _cell(value: object) -> str:
    """A non-personal value's cell: a string, choices, a JSON scalar; nothing else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif part is None or isinstance(part, int | float):
                parts.append(_scalar_text(part))
            else:
                kind = f"a list with {_kind(part)} in it"
                raise _RowError(f"the value is {kind}, which a cell cannot show")
        return _join_choices(parts)
    if value is None or isinstance(value, int | float):
        return _scalar_text(value)
    raise _RowError(f"the value is {_kind(value)}, which a cell cannot show")


def _scalar_text(value: object) -> str:
    # A stray number still becomes its digits; bool before int (it is one).
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return str(value)
    raise TypeError("not a JSON scalar")


def _kind(value: object) -> str:
    """What ``value`` is, in JSON's words where it has one: never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"

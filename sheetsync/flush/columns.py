"""A link's column map: which column of its sheet each question's answers go to, for good.

The map lives in the database (:class:`SheetColumn`), one row per column: the three
fixed columns (ids starting with ``#``), then one per question the form has had since
the link's first write. It is matched against row 1 of the sheet by the titles we wrote
there, never rebuilt from the form's order (docs/ARCHITECTURE.md, "Columns"):

- a new question is a column with no position yet; the header check gives it the next
  free column on the right and writes its title into row 1 before any row uses it;
- a deleted question keeps its column (its answers still land there);
- reordering the form moves nothing; a renamed question gets its header cell rewritten;
- JUMBOTRON questions never get a column.

This module is the database side and the pure matching of row 1; the Sheets side (read
row 1, write titles and number formats) is :mod:`sheetsync.flush.header`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sheetsync.errors import SheetSyncError
from sheetsync.flush.layout import FIXED_COLUMNS, FormLayout, FormQuestion, question_type
from sheetsync.models import QuestionType, SheetColumn, SpreadSheet, utcnow
from sheetsync.redis_keys import BufferKey
from sheetsync.settings import Settings

#: The fixed columns' ids and types, in their order (columns A, B, C).
ANSWER_ID, SUBMITTER, SUBMITTED_AT = "#answer_id", "#submitter", "#submitted_at"
FIXED_IDS = (ANSWER_ID, SUBMITTER, SUBMITTED_AT)
#: Number formats set once on a column when it is created (Sheets' type and pattern).
DATE_FORMAT = ("DATE", "yyyy-mm-dd")
DATE_TIME_FORMAT = ("DATE_TIME", "yyyy-mm-dd hh:mm:ss")


class LinkPaused(SheetSyncError):  # noqa: N818 (reads as the condition it is)
    """The link is paused: row 1 does not match its column map. Nothing is written."""


def fixed_titles(settings: Settings) -> tuple[str, str, str]:
    return (settings.header_answer_id, settings.header_submitter, settings.header_submitted_at)


def number_format(question_id: str, type_name: str) -> tuple[str, str] | None:
    """The number format a column gets when it is created, if any."""
    if question_id == SUBMITTED_AT:
        return DATE_TIME_FORMAT
    if type_name == QuestionType.DATE.value:
        return DATE_FORMAT
    return None


def is_fixed(column: SheetColumn) -> bool:
    """One of the three fixed columns (its id starts with ``#``, never a question's)."""
    return column.question_id.startswith("#")


def settled(column: SheetColumn) -> bool:
    """Placed, its title in row 1, its format set: nothing for row 1 to do."""
    return (
        column.position is not None
        and column.written_title == column.title
        and (column.formatted or number_format(column.question_id, column.type) is None)
    )


@dataclass
class HeaderPlan:
    """What row 1 says: each column's position and the cells to write, or a problem."""

    positions: dict[str, int] = field(default_factory=dict)
    writes: dict[int, str] = field(default_factory=dict)
    problem: str | None = None


# -- the database side ----------------------------------------------------------------


def link_of(session: Session, key: BufferKey) -> SpreadSheet:
    """The buffer's link (``links.check`` has just found it); :class:`LinkPaused` if
    it is paused."""
    link = session.scalars(
        select(SpreadSheet).where(
            SpreadSheet.submission_id == key.submission_id,
            SpreadSheet.spread_sheet_id == key.spread_sheet_id,
            SpreadSheet.sheet_id == key.sheet_id,
        )
    ).one()
    if link.paused_reason is not None:
        raise LinkPaused(f"link {link.id} is paused: {link.paused_reason}")
    return link


def sync_with_form(session: Session, link_id: int, layout: FormLayout, settings: Settings) -> bool:
    """Add the form's new questions (and the fixed columns) to the map, unplaced, and
    note renamed titles. Returns whether row 1 has anything to do.

    Adding takes the link's lock first (:func:`lock`), and reads the map again under it:
    two runs of one link never both add a column."""
    existing = {column.question_id: column for column in column_map(session, link_id)}
    known = set(existing) | set(FIXED_IDS)
    if any(q.question_id not in known for q in layout.questions) or not existing:
        lock(session, link_id)
        existing = {column.question_id: column for column in column_map(session, link_id)}
    fixed = zip(FIXED_IDS, fixed_titles(settings), strict=True)
    wanted: list[tuple[str, str, str, int | None]] = [
        (fixed_id, fixed_id[1:].upper(), title, position)
        for position, (fixed_id, title) in enumerate(fixed)
    ]
    wanted += [(q.question_id, _type_name(q), q.title, None) for q in layout.questions]
    for question_id, type_name, title, position in wanted:
        row = existing.get(question_id)
        if row is None:
            row = SheetColumn(
                link_id=link_id,
                question_id=question_id,
                type=type_name,
                title=title,
                position=position,
                written_title=None,
                formatted=False,
            )
            session.add(row)
            existing[question_id] = row
            continue
        if row.title != title:
            row.title = title
        if row.type != type_name:  # a question whose type changed: its format follows
            row.type, row.formatted = type_name, False
    session.flush()
    return not all(settled(column) for column in existing.values())


def lock(session: Session, link_id: int) -> None:
    """Serialize changes of one link's map: a no-op UPDATE of the link's row holds its
    row lock (PostgreSQL) or the write lock (SQLite) until the transaction ends."""
    session.execute(
        update(SpreadSheet)
        .where(SpreadSheet.id == link_id)
        .values(paused_reason=SpreadSheet.paused_reason)
    )


def column_map(session: Session, link_id: int) -> list[SheetColumn]:
    """The link's map, one :class:`SheetColumn` per column, in the order they were added."""
    return list(
        session.scalars(
            select(SheetColumn).where(SheetColumn.link_id == link_id).order_by(SheetColumn.id)
        )
    )


def save(session: Session, link_id: int, plan: HeaderPlan, formatted: set[str]) -> None:
    """Record a header check that was written to row 1. Positions move in two steps so
    the unique (link, position) constraint never sees two columns in one place."""
    rows = {row.question_id: row for row in column_map(session, link_id)}
    moving = [r for r in rows.values() if r.position != plan.positions.get(r.question_id)]
    for row in moving:
        row.position = None
    session.flush()
    for row in rows.values():
        row.position = plan.positions.get(row.question_id)
        if row.position is not None:
            row.written_title = row.title
        if row.question_id in formatted:
            row.formatted = True
    session.flush()


def pause(session: Session, link_id: int, reason: str) -> None:
    session.execute(
        update(SpreadSheet)
        .where(SpreadSheet.id == link_id)
        .values(paused_reason=reason[:500], paused_at=utcnow())
    )


def layout_of(
    session: Session,
    link_id: int,
    form: FormLayout,
    *,
    escape_formulas: bool = False,
    blank_on_delete: bool = False,
) -> FormLayout:
    """The layout rows are built with: every placed column of the map at its position
    (deleted questions too), typed as the form says now (or as stored, once deleted), and
    the link's ``escape_formulas`` and ``blank_on_delete``."""
    current = {q.question_id: q for q in form.questions}
    questions: list[FormQuestion] = []
    positions: list[int] = []
    for row in column_map(session, link_id):
        if row.position is None or is_fixed(row):
            continue
        now = current.get(row.question_id)
        questions.append(now or FormQuestion(row.question_id, row.title, question_type(row.type)))
        positions.append(row.position)
    mapped = {q.question_id for q in questions}
    return FormLayout(
        form.submission_id,
        tuple(questions),
        form.ignored_question_ids - mapped,
        positions=tuple(positions),
        escape_formulas=escape_formulas,
        blank_on_delete=blank_on_delete,
    )


def _type_name(question: FormQuestion) -> str:
    return question.type.value if isinstance(question.type, QuestionType) else str(question.type)


# -- matching row 1 ---------------------------------------------------------------------


def plan_header(first_row: Sequence[str], columns: Sequence[SheetColumn]) -> HeaderPlan:
    """Match the map against row 1 by the titles we wrote there.

    - An empty row 1 (a new or cleared sheet) gets every title back where it was.
    - A column whose cell holds its written (or new) title stays; one found in exactly
      one other unclaimed cell moved there (a person moved it), and is followed.
    - A new column adopts an unclaimed cell holding its title (a header written before
      a crash, or by the version before column maps), else takes the next free column.
    - Anything else (a fixed column not in A-C, a title gone or found twice) is a
      problem: the link must pause rather than write under the wrong heading.
    """
    cells = [str(cell) for cell in first_row]

    def at(index: int) -> str:
        return cells[index] if index < len(cells) else ""

    plan = HeaderPlan()
    claimed: set[int] = set()
    cleared = not any(cell.strip() for cell in cells)
    moved: list[SheetColumn] = []
    for column in columns:
        if column.position is None:
            continue
        cell = at(column.position)
        mine = cell in (column.written_title, column.title)
        if cleared or mine or (is_fixed(column) and cell == "" and column.written_title is None):
            plan.positions[column.question_id] = column.position
            claimed.add(column.position)
        elif is_fixed(column):
            plan.problem = (
                f"column {column_letters(column.position)} of row 1 should be "
                f"{column.written_title or column.title!r}"
            )
            return plan
        else:
            moved.append(column)
    for column in moved:
        titles = {column.written_title, column.title} - {None}
        found = [i for i, cell in enumerate(cells) if i >= FIXED_COLUMNS and cell in titles]
        found = [i for i in found if i not in claimed]
        if len(found) != 1:
            where = "is no longer in row 1" if not found else f"is in row 1 {len(found)} times"
            plan.problem = (
                f"the column {column.written_title!r} (question {column.question_id}, "
                f"was {column_letters(column.position or 0)}) {where}"
            )
            return plan
        plan.positions[column.question_id] = found[0]
        claimed.add(found[0])
    used = [i for i, cell in enumerate(cells) if cell.strip()]
    next_free = max([*claimed, *used, FIXED_COLUMNS - 1]) + 1
    for column in columns:
        if column.position is not None:
            continue
        adopt = [
            i
            for i, cell in enumerate(cells)
            if i >= FIXED_COLUMNS and i not in claimed and cell == column.title and cell
        ]
        if adopt:
            position = adopt[0]
        else:
            position, next_free = next_free, next_free + 1
        plan.positions[column.question_id] = position
        claimed.add(position)
    for column in columns:
        position = plan.positions[column.question_id]
        if at(position) != column.title:
            plan.writes[position] = column.title
    return plan


def column_letters(index: int) -> str:
    """A column's letters: 0 is A, 26 is AA."""
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters

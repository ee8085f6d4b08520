"""Links as an operator sees them: list them, resume a paused one, escape formulas.

A link pauses when row 1 of its sheet can no longer be matched with its column map
(docs/ARCHITECTURE.md, "Columns"); its answers wait in a PAUSED dead letter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import func, select

from sheetsync.deadletters import store
from sheetsync.errors import NotFoundError
from sheetsync.models import SheetColumn, SpreadSheet
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services


@dataclass(frozen=True)
class LinkRow:
    id: int
    form: str
    spreadsheet: str
    gid: int
    owner: str
    columns: int
    paused_reason: str | None
    paused_at: datetime | None
    #: The tab answers go to (1, or n for "<title> (n)" after a roll-over), and the
    #: cells it holds (rows x header width; see SHEETSYNC_TAB_CELL_LIMIT).
    tab: int = 1
    tab_cells: int = 0
    #: Formula-like text is written after an apostrophe (``sheetsync links
    #: escape-formulas``).
    escape_formulas: bool = False
    #: A deleted answer's personal-info cells are blanked, its row kept (``sheetsync
    #: links on-delete``).
    blank_on_delete: bool = False


@dataclass(frozen=True)
class Resumed:
    link_id: int
    was_paused: bool
    due_dead_letters: int


def list_links(services: Services, *, paused_only: bool = False) -> list[LinkRow]:
    """Every link (or every paused one), with how many columns its map has."""
    counts = (
        select(SheetColumn.link_id, func.count().label("n"))
        .group_by(SheetColumn.link_id)
        .subquery()
    )
    query = (
        select(SpreadSheet, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.link_id == SpreadSheet.id)
        .order_by(SpreadSheet.id)
    )
    if paused_only:
        query = query.where(SpreadSheet.paused_reason.is_not(None))
    with services.sessions() as session:
        return [
            LinkRow(
                link.id,
                link.submission_id,
                link.spread_sheet_id,
                link.sheet_id,
                link.create_user_id,
                int(count),
                link.paused_reason,
                link.paused_at,
                link.tab_number or 1,
                int(link.tab_cells or 0),
                bool(link.escape_formulas),
                bool(link.blank_on_delete),
            )
            for link, count in session.execute(query)
        ]


def resume(services: Services, link_id: int) -> Resumed:
    """Resume a paused link: it writes again after checking row 1 afresh, and its
    PAUSED dead letters are due now (the beat replays them). Resuming a link that is not
    paused changes nothing but the check of row 1."""
    with services.sessions.begin() as session:
        link = session.get(SpreadSheet, link_id, with_for_update=True)
        if link is None:
            raise NotFoundError(f"link {link_id} does not exist")
        was_paused = link.paused_reason is not None
        link.paused_reason = None
        link.paused_at = None
        due = store.make_paused_due(
            session, link.submission_id, link.spread_sheet_id, link.sheet_id
        )
        owner, form = link.create_user_id, link.submission_id
        key = BufferKey(owner, form, link.spread_sheet_id, link.sheet_id)
    services.store.forget_sheet(key, "header_ok")
    return Resumed(link_id, was_paused, due)


def escape_formulas(services: Services, link_id: int, *, on: bool) -> bool:
    """Turn the link's ``escape_formulas`` on or off; returns what it was. Rows written
    from now on follow it; rows already in the sheet stay as they are."""
    return _set_flag(services, link_id, "escape_formulas", on)


def blank_on_delete(services: Services, link_id: int, *, on: bool) -> bool:
    """Make a deleted (or erased) answer's personal-info cells blanked, its row kept (on),
    or its row deleted (off); returns what it was. Deletions from now on follow it."""
    return _set_flag(services, link_id, "blank_on_delete", on)


def _set_flag(
    services: Services, link_id: int, name: Literal["escape_formulas", "blank_on_delete"], on: bool
) -> bool:
    with services.sessions.begin() as session:
        link = session.get(SpreadSheet, link_id, with_for_update=True)
        if link is None:
            raise NotFoundError(f"link {link_id} does not exist")
        was = bool(getattr(link, name))
        setattr(link, name, on)
    return was

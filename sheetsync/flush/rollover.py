"""Full sheets roll over: a link's answers move to a new tab before one is full.

Each link records the tab its answers go to (``tab_number``: 1 is the linked tab,
2 is "<title> (2)", ...; ``tab_sheet_id``: its gid) and the cells sheetsync wrote there
(``tab_cells``: rows x the header's width); a run's :class:`~sheetsync.flush.sheet.ActiveTab`
holds them. Before each append, :meth:`Rollover.fit` cuts the batch to what the tab still
holds under ``SHEETSYNC_TAB_CELL_LIMIT`` (the rest stays in the buffer for the next
batch); when not one more row fits, the link rolls over: one ``batchUpdate`` adds the
next tab, sized to the header alone, with the header in it, the link records it, and the
active tab moves there. The operator is alerted once per link when its tab passes
``SHEETSYNC_TAB_CELL_ALERT_RATIO`` of the limit.

Google's own limit (10,000,000 cells) is per spreadsheet, every tab together, and counts
grid cells, not data: a person's extra columns or rows count too. When Google refuses
an append for it, the link rolls over as well (a tab sized to our columns may still
fit); when the new tab is refused too, or a fresh roll-over tab is refused its first
rows, the buffer waits in a SHEET_FULL dead letter, retried hourly, never FAILED
(docs/ARCHITECTURE.md, "Full sheets roll over").
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence

from sqlalchemy import update
from sqlalchemy.orm import Session

from sheetsync.alerts import send_alert
from sheetsync.errors import ConfigError, PermanentError
from sheetsync.flush.batches import Batch
from sheetsync.flush.header import write_header
from sheetsync.flush.sheet import ActiveTab, Tab
from sheetsync.models import SpreadSheet, utcnow

log = logging.getLogger(__name__)

#: Google refuses a tab title longer than this.
TITLE_CHARS_MAX = 100


def rolled_title(base: str, number: int) -> str:
    """``"<base> (n)"``, the base cut so the whole stays a title Google takes."""
    suffix = f" ({number})"
    return base[: TITLE_CHARS_MAX - len(suffix)] + suffix


class Rollover:
    """Keeps a run's active tab under its cell limit: fits batches to it, rolls the link
    over to a new tab, counts the cells each append wrote."""

    def __init__(self, active: ActiveTab) -> None:
        self.active = active
        self.access = active.access
        #: The header of the last batch fitted (a roll-over after a refusal needs it).
        self.header: list[str] | None = None

    @property
    def limit(self) -> int:
        return self.access.services.settings.tab_cell_limit

    # -- before an append -------------------------------------------------------------

    def fit(self, batch: Batch, header: Sequence[str]) -> Batch:
        """The batch cut to what the active tab still holds; when that is not one row,
        the link rolls over first (a new tab that starts with ``header``, the link's
        column map) and the batch is cut to what a new tab holds."""
        width = max(len(header), 1)
        self.header = list(header)
        rows_per_tab = self.limit // width - 1  # an empty tab holds its header first
        if rows_per_tab < 1:
            raise ConfigError(
                f"SHEETSYNC_TAB_CELL_LIMIT ({self.limit}) cannot hold a header and one row "
                f"of {width} cells"
            )
        # Row 1 (the header, written by flush/header.py) counts on every tab.
        room = (self.limit - max(self.active.tab.cells, width)) // width
        if room >= 1:
            return batch.keep_rows(room)
        self.roll_over()
        return batch.keep_rows(rows_per_tab)

    def fresh(self) -> bool:
        """A roll-over tab holding nothing of ours but its header."""
        width = len(self.header) if self.header else 0
        tab = self.active.tab
        return tab.number > 1 and tab.cells <= width

    def roll_over(self) -> None:
        """Move the link to its next tab, "<title> (n)", made with the header in it (one
        ``batchUpdate``); a tab of that name left by a run that died right after making
        it is taken as it is."""
        header = self.header
        assert header is not None, "fit() runs before any append"
        access, key, link_id = self.access, self.access.key, self.active.tab.link_id
        grid = access.send(
            "spreadsheets.get", lambda client: client.sheet_grid(key.spread_sheet_id)
        )
        base = grid[key.sheet_id][0] if key.sheet_id in grid else None
        if base is None:
            raise PermanentError(
                f"sheet gid {key.sheet_id} not found in spreadsheet {key.spread_sheet_id}",
                status=400,
            )
        number = self.active.tab.number + 1
        title = rolled_title(base, number)
        gid, columns = next(((g, c) for g, (t, c) in grid.items() if t == title), (None, 0))
        if gid is None:
            gid, columns = self._add_tab(title, header), max(len(header), 1)
        else:
            log.info("link of %s: tab %r exists already; continuing there", key.base, title)
        # The map's number formats, as on tab 1; also for a tab a run made before it died
        # (the request is idempotent).
        write_header(access, link_id, gid, columns)
        with access.services.sessions.begin() as session:
            session.execute(
                update(SpreadSheet)
                .where(SpreadSheet.id == link_id)
                .values(tab_number=number, tab_sheet_id=gid, tab_cells=len(header))
            )
        log.warning(
            "link of %s rolled over to tab %d (gid %d): the last one was full",
            key.base,
            number,
            gid,
        )
        self.active.move_to(Tab(link_id, number, gid, len(header)), title)

    def _add_tab(self, title: str, header: Sequence[str]) -> int:
        spreadsheet_id, sheet_id = self.access.key.spread_sheet_id, secrets.randbelow(2**31 - 1) + 1
        return self.access.send(
            "spreadsheets.batchUpdate (addSheet)",
            lambda client: client.add_sheet_with_rows(
                spreadsheet_id, title, sheet_id=sheet_id, rows=[header]
            ),
        )

    # -- in the settle transaction -----------------------------------------------------

    def count(self, session: Session, rows: int, width: int) -> str | None:
        """Add what an append wrote to the tab's count. Returns the alert to send after
        the commit when the link passed the alert share of its limit (once per link)."""
        tab, key, settings = self.active.tab, self.access.key, self.access.services.settings
        # Row 1 of the linked tab was written apart (flush/header.py): counted with
        # the first rows; a roll-over tab starts counted with its header.
        cells = width * (rows + (1 if tab.cells == 0 else 0))
        if not cells:
            return None
        tab.cells += cells
        link = SpreadSheet
        session.execute(
            update(link).where(link.id == tab.link_id).values(tab_cells=link.tab_cells + cells)
        )
        if tab.cells < settings.tab_cell_alert_ratio * self.limit:
            return None
        first = session.execute(
            update(link)
            .where(link.id == tab.link_id, link.cells_alerted_at.is_(None))
            .values(cells_alerted_at=utcnow())
        )
        if not getattr(first, "rowcount", 0):
            return None
        ratio = round(100 * settings.tab_cell_alert_ratio)
        return (
            f"link {tab.link_id} (form {key.submission_id}, spreadsheet "
            f"{key.spread_sheet_id}): tab {tab.number} passed {ratio}% of its "
            f"limit ({tab.cells:,} of {self.limit:,} cells); answers roll over to a new "
            f"tab when it is full. Google allows 10,000,000 cells per spreadsheet, every tab "
            f"together: plan a new spreadsheet for this form"
        )

    def alert(self, text: str | None) -> None:
        if text is not None:
            send_alert(text, settings=self.access.services.settings)

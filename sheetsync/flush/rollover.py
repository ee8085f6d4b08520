"""Full sheets roll over: a link's answers move to a new tab before one is full.

Each link records the tab its answers go to (``tab_number``: 1 is the linked tab,
2 is "<title> (2)", ...; ``tab_sheet_id``: its gid) and the cells sheetsync wrote there
(``tab_cells``: rows x the header's width). Before each append, :meth:`Tabs.fit` cuts
the batch to what the tab still holds under ``SHEETSYNC_TAB_CELL_LIMIT`` (the rest stays
in the buffer for the next batch); when not one more row fits, the link rolls over: one
``batchUpdate`` adds the next tab, sized to the header alone, with the header in it,
and the link records it. The operator is alerted once per link when its tab
passes ``SHEETSYNC_TAB_CELL_ALERT_RATIO`` of the limit.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import update
from sqlalchemy.orm import Session

from sheetsync.alerts import send_alert
from sheetsync.buffers.store import Lease
from sheetsync.errors import ConfigError, PermanentError
from sheetsync.flush.batches import Batch
from sheetsync.flush.header import write_header
from sheetsync.flush.outcomes import Tally
from sheetsync.keys import BufferKey
from sheetsync.models import SpreadSheet, utcnow
from sheetsync.services import Services
from sheetsync.sheets.client import SheetsClient

log = logging.getLogger(__name__)

#: The sheet cache field that says which tab number the cached title belongs to.
CACHE_TAB_FIELD = "tab"


@dataclass
class Tab:
    """The tab a link's answers go to now."""

    link_id: int
    number: int
    gid: int
    cells: int


def tab_of(link: SpreadSheet) -> Tab:
    """The active tab of a link row (as ``links.check`` read it)."""
    gid = link.sheet_id if link.tab_sheet_id is None else link.tab_sheet_id
    return Tab(link.id, link.tab_number or 1, int(gid), int(link.tab_cells or 0))


#: Google refuses a tab title longer than this.
TITLE_CHARS_MAX = 100


def rolled_title(base: str, number: int) -> str:
    """``"<base> (n)"``, the base cut so the whole stays a title Google takes."""
    suffix = f" ({number})"
    return base[: TITLE_CHARS_MAX - len(suffix)] + suffix


class Tabs:
    """The active tab of one run's link: fitting batches, rolling over, counting cells."""

    def __init__(
        self,
        services: Services,
        key: BufferKey,
        client: SheetsClient,
        tally: Tally,
        renew: Callable[[], Lease],
        tab: Tab,
    ) -> None:
        self.services = services
        self.key = key
        self.client = client
        self.tally = tally
        self._renew = renew
        self.tab = tab
        #: The header of the last batch fitted (a roll-over after a refusal needs it).
        self.header: list[str] | None = None
        self._sync_cache()

    @property
    def limit(self) -> int:
        return self.services.settings.tab_cell_limit

    def _sync_cache(self) -> None:
        """The cached title, header flag and last row describe the active tab only."""
        cached = self.services.store.redis.hget(self.key.sheet, CACHE_TAB_FIELD)
        if cached is not None and int(cached) == self.tab.number:
            return
        self.services.store.forget_sheet(self.key, "title", "header_ok", "last_row")
        self.services.store.remember_sheet(self.key, **{CACHE_TAB_FIELD: self.tab.number})

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
        room = (self.limit - max(self.tab.cells, width)) // width
        if room >= 1:
            return batch.keep_rows(room)
        self.roll_over()
        return batch.keep_rows(rows_per_tab)

    def fresh(self) -> bool:
        """A roll-over tab holding nothing of ours but its header."""
        width = len(self.header) if self.header else 0
        return self.tab.number > 1 and self.tab.cells <= width

    def roll_over(self) -> None:
        """Move the link to its next tab, "<title> (n)", made with the header in it (one
        ``batchUpdate``); a tab of that name left by a run that died right after making
        it is taken as it is."""
        header = self.header
        assert header is not None, "fit() runs before any append"
        self._renew()
        titles = self.client.sheet_titles(self.key.spread_sheet_id)
        self.tally.requests.append("spreadsheets.get")
        base = titles.get(self.key.sheet_id)
        if base is None:
            raise PermanentError(
                f"sheet gid {self.key.sheet_id} not found in spreadsheet "
                f"{self.key.spread_sheet_id}",
                status=400,
            )
        number = self.tab.number + 1
        title = rolled_title(base, number)
        gid = next((g for g, t in titles.items() if t == title), None)
        if gid is None:
            gid = self._add_tab(title, header)
        else:
            log.info("link of %s: tab %r exists already; continuing there", self.key.base, title)
        # The map's number formats, as on tab 1; also for a tab a run made before it died
        # (both requests are idempotent).
        with self.services.sessions() as session:
            write_header(
                session, self.client, self.tab.link_id, self.key.spread_sheet_id, gid, title
            )
        self.tally.requests += ["values.update", "spreadsheets.batchUpdate"]
        with self.services.sessions.begin() as session:
            session.execute(
                update(SpreadSheet)
                .where(SpreadSheet.id == self.tab.link_id)
                .values(tab_number=number, tab_sheet_id=gid, tab_cells=len(header))
            )
        log.warning(
            "link of %s rolled over to tab %d (gid %d): the last one was full",
            self.key.base,
            number,
            gid,
        )
        self.tab = Tab(self.tab.link_id, number, gid, len(header))
        self.services.store.forget_sheet(self.key, "last_row")
        self.services.store.remember_sheet(
            self.key, title=title, header_ok=1, **{CACHE_TAB_FIELD: number}
        )

    def _add_tab(self, title: str, header: Sequence[str]) -> int:
        self._renew()
        gid = self.client.add_sheet_with_rows(
            self.key.spread_sheet_id,
            title,
            sheet_id=secrets.randbelow(2**31 - 1) + 1,
            rows=[header],
        )
        self.tally.requests.append("spreadsheets.batchUpdate (addSheet)")
        return gid

    # -- in the settle transaction -----------------------------------------------------

    def count(self, session: Session, rows: int, width: int) -> str | None:
        """Add what an append wrote to the tab's count. Returns the alert to send after
        the commit when the link passed the alert share of its limit (once per link)."""
        # Row 1 of the linked tab was written apart (flush/header.py): counted with
        # the first rows; a roll-over tab starts counted with its header.
        cells = width * (rows + (1 if self.tab.cells == 0 else 0))
        if not cells:
            return None
        self.tab.cells += cells
        link = SpreadSheet
        session.execute(
            update(link).where(link.id == self.tab.link_id).values(tab_cells=link.tab_cells + cells)
        )
        if self.tab.cells < self.services.settings.tab_cell_alert_ratio * self.limit:
            return None
        first = session.execute(
            update(link)
            .where(link.id == self.tab.link_id, link.cells_alerted_at.is_(None))
            .values(cells_alerted_at=utcnow())
        )
        if not getattr(first, "rowcount", 0):
            return None
        ratio = round(100 * self.services.settings.tab_cell_alert_ratio)
        return (
            f"link {self.tab.link_id} (form {self.key.submission_id}, spreadsheet "
            f"{self.key.spread_sheet_id}): tab {self.tab.number} passed {ratio}% of its "
            f"limit ({self.tab.cells:,} of {self.limit:,} cells); answers roll over to a new "
            f"tab when it is full. Google allows 10,000,000 cells per spreadsheet, every tab "
            f"together: plan a new spreadsheet for this form"
        )

    def alert(self, text: str | None) -> None:
        if text is not None:
            send_alert(text, settings=self.services.settings)

"""One run's sheet: what the run reaches it with (:class:`SheetAccess`) and the tab its
answers go to (:class:`ActiveTab`).

The active tab has one owner, :class:`ActiveTab`: its gid, number, cells and title. The
writer appends to it, the header check writes its row 1, and a roll-over
(:mod:`sheetsync.flush.rollover`) moves it to the next tab; none of them keeps a copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sheetsync.buffers.store import Lease
from sheetsync.flush.outcomes import Tally
from sheetsync.keys import BufferKey
from sheetsync.models import SpreadSheet
from sheetsync.services import Services
from sheetsync.sheets.client import SheetFacts, SheetsClient

#: The sheet cache field that says which tab number the cached title belongs to.
CACHE_TAB_FIELD = "tab"


@dataclass(frozen=True)
class SheetAccess:
    """What one run reaches its sheet with: the services, its buffer, the Sheets client
    of the owner's account, the tally of requests, and ``renew``, which renews the run's
    lease before each Sheets request (a run that lost its buffer: StaleRunError)."""

    services: Services
    key: BufferKey
    client: SheetsClient
    tally: Tally
    renew: Callable[[], Lease]


@dataclass
class Tab:
    """A tab of a link: 1 is the linked tab, n its roll-over "<title> (n)"; ``cells`` are
    those sheetsync wrote there (rows x the header's width)."""

    link_id: int
    number: int
    gid: int
    cells: int


def tab_of(link: SpreadSheet) -> Tab:
    """The active tab of a link row (as ``links.check`` read it)."""
    gid = link.sheet_id if link.tab_sheet_id is None else link.tab_sheet_id
    return Tab(link.id, link.tab_number or 1, int(gid), int(link.tab_cells or 0))


class ActiveTab:
    """The tab one run's answers go to, and its title (cached in ``…:sheet``)."""

    def __init__(self, access: SheetAccess, tab: Tab) -> None:
        self.access = access
        self.tab = tab
        #: Whether the title came from the cache, not from Google this run (a 400 may
        #: then mean the tab was renamed).
        self.title_from_cache = False
        self._looked_up = False
        self._sync_cache()

    @property
    def gid(self) -> int:
        return self.tab.gid

    def title(self) -> str:
        return self.sheet()[0]

    def sheet(self) -> tuple[str, str]:
        """The tab's title and the spreadsheet's time zone ("" if it has none), read
        together once (:meth:`look_up`) and cached."""
        cache = self.access.services.store.sheet_cache(self.access.key)
        if cache.title is not None and cache.time_zone is not None:
            # Looked up this run: a 400 then is not a renamed tab's stale title.
            self.title_from_cache = not self._looked_up
            return cache.title, cache.time_zone
        facts = self.look_up()
        return facts.title, facts.time_zone or ""

    def look_up(self) -> SheetFacts:
        """The tab's title, the spreadsheet's time zone, and the tab's row 1 and width,
        in one read; the title and time zone are cached. (The header check looks up
        through here, under the link's lock, so a first write reads once.)"""
        access = self.access
        access.renew()
        facts = access.client.sheet_facts(access.key.spread_sheet_id, self.tab.gid)
        self._looked_up = True
        self.title_from_cache = False
        access.tally.requests.append("spreadsheets.getByDataFilter")
        access.services.store.remember_sheet(
            access.key, title=facts.title, time_zone=facts.time_zone or ""
        )
        return facts

    def title_of(self, gid: int | None) -> str:
        """The title of tab ``gid``: this one's, or another's read now (an intent's
        append went to a tab the link has rolled over from since). None: the active tab."""
        if gid is None or gid == self.tab.gid:
            return self.title()
        access = self.access
        access.renew()
        title = access.client.sheet_title(access.key.spread_sheet_id, gid)
        access.tally.requests.append("spreadsheets.get")
        return title

    def move_to(self, tab: Tab, title: str) -> None:
        """Answers go to ``tab`` from now on (a roll-over made it, its header in row 1)."""
        self.tab = tab
        store, key = self.access.services.store, self.access.key
        store.forget_sheet(key, "last_row")
        store.remember_sheet(key, title=title, header_ok=1, **{CACHE_TAB_FIELD: tab.number})

    def _sync_cache(self) -> None:
        """The cached title, header flag and last row describe the active tab only."""
        store, key = self.access.services.store, self.access.key
        cached = store.redis.hget(key.sheet, CACHE_TAB_FIELD)
        if cached is not None and int(cached) == self.tab.number:
            return
        store.forget_sheet(key, "title", "header_ok", "last_row")
        store.remember_sheet(key, **{CACHE_TAB_FIELD: self.tab.number})

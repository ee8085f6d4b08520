"""One run's sheet: what the run reaches it with (:class:`SheetAccess`) and the tab its
answers go to (:class:`ActiveTab`).

Every Sheets request of a run goes through :meth:`SheetAccess.send`: it renews the
run's lease (which fences a run that lost its buffer and sets the client's deadline,
which bounds the whole request), runs the caller's step between the renewal and the
request (the writer's intent), sends the request, and counts it in the run's tally,
only when it was really sent. Nothing else renews the lease or counts a request.

The active tab has one owner, :class:`ActiveTab`: its gid, number, cells and title. The
writer appends to it, the header check writes its row 1, and a roll-over
(:mod:`sheetsync.flush.rollover`) moves it to the next tab; none of them keeps a copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sheetsync.buffers.store import Lease
from sheetsync.errors import ContentRefusedError, StaleRunError
from sheetsync.flush.outcomes import Tally
from sheetsync.models import SpreadSheet
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.sheets.client import SheetFacts, SheetsClient

#: The sheet cache field that says which tab number the cached title belongs to.
CACHE_TAB_FIELD = "tab"
#: Every request ends this long (or a tenth of the lease, if shorter) before the lease
#: does. The deadline is counted from before the renewal was sent, so it already falls
#: before the lease's end; the margin covers hosts whose clocks run at different rates.
#: A successor never reads the sheet while this run's append may still land.
DEFAULT_LEASE_MARGIN_S = 1.0

T = TypeVar("T")


class SheetAccess:
    """What one run reaches its sheet with: the services, its buffer, the Sheets client
    of the owner's account, the run's lease and the tally of its requests. Every Sheets
    request of the run is sent through :meth:`send`."""

    def __init__(
        self, services: Services, key: BufferKey, client: SheetsClient, tally: Tally, lease: Lease
    ) -> None:
        self.services = services
        self.key = key
        self.client = client
        self.tally = tally
        #: The run's lease as last renewed (the run reads it from here once its sheet is
        #: open).
        self.lease = lease

    def send(
        self,
        kind: str,
        call: Callable[[SheetsClient], T],
        *,
        before: Callable[[Lease], None] | None = None,
    ) -> T:
        """Renew the lease (a run that lost its buffer: StaleRunError; the client's
        deadline moves with it), run ``before`` with the fresh lease (it may raise: then
        nothing is sent), send ``call(client)``, and count ``kind`` in the run's tally
        (``"<kind> (refused)"`` when Google refused the content). A request that failed
        otherwise, or was never sent, is not counted."""
        lease = self._renew()
        if before is not None:
            before(lease)
        try:
            result = call(self.client)
        except ContentRefusedError:
            self.tally.requests.append(f"{kind} (refused)")
            raise
        self.tally.requests.append(kind)
        return result

    def _renew(self) -> Lease:
        """Extend the lease (or find the run fenced); every Sheets request from here on
        must end before it does."""
        renewing_at = time.monotonic()
        lease = self.services.store.renew(self.key, self.lease)
        if lease is None:
            raise fenced(self.lease.token)
        self.lease = lease
        self.client.deadline = request_deadline(renewing_at, lease, self.services.settings.lease_s)
        return lease


def request_deadline(renewing_at: float, lease: Lease, lease_s: float) -> float:
    """The monotonic time every Sheets request of a run must end by, for a lease whose
    renewal was sent at ``renewing_at``."""
    return renewing_at + lease.left_s - min(DEFAULT_LEASE_MARGIN_S, lease_s / 10)


def fenced(token: str) -> StaleRunError:
    return StaleRunError(f"{token} no longer holds its buffer")


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
        access, gid = self.access, self.tab.gid
        facts = access.send(
            "spreadsheets.getByDataFilter",
            lambda client: client.sheet_facts(access.key.spread_sheet_id, gid),
        )
        self._looked_up = True
        self.title_from_cache = False
        access.services.store.remember_sheet(
            access.key, title=facts.title, time_zone=facts.time_zone or ""
        )
        return facts

    def title_of(self, gid: int | None) -> str:
        """The title of tab ``gid``: this one's, or another's read now (an intent's
        append went to a tab the link has rolled over from since). None: the active tab."""
        if gid is None or gid == self.tab.gid:
            return self.title()
        spreadsheet_id = self.access.key.spread_sheet_id
        return self.access.send(
            "spreadsheets.get", lambda client: client.sheet_title(spreadsheet_id, gid)
        )

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

"""One flush run of one buffer: drain the list into the sheet, exactly once.

A run claims the buffer under a new epoch, then: **prepare** (the link still exists,
the owner's credential, resolving intents an earlier run left open), then per batch
**build** (rate-limit slot, hydrate, rows; an answer that cannot become a row fails
alone), **write** (:mod:`sheetsync.flush.writer`: durable intent, then ``values.append``)
and **settle** (ledger and intent in one transaction, then LTRIM). A crash between any
two steps loses and duplicates nothing (docs/ARCHITECTURE.md, "Crash safety").

The task's entry point is :func:`sheetsync.flush.entry.flush`; how a run that raised ends
is one table, in :mod:`sheetsync.flush.failures`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import redis

from sheetsync import crypto, ledger, links
from sheetsync.buffers.push import push
from sheetsync.buffers.scripts import FORGET_LAST_ROW
from sheetsync.buffers.store import Lease
from sheetsync.deadletters.replay_end import ReplaysInFlight
from sheetsync.dispatch import QUEUE_DEFAULT, is_priority_plan
from sheetsync.errors import CredentialError, RateLimited, WaitForIntent
from sheetsync.flush import debounce, header, intents, stopping
from sheetsync.flush.batches import Batch, BatchBuilder
from sheetsync.flush.changes import ROW_MOVED, ChangeWriter, Followed
from sheetsync.flush.layout import FormLayout
from sheetsync.flush.outcomes import Outcome, Tally
from sheetsync.flush.rollover import Rollover
from sheetsync.flush.rows import header_row
from sheetsync.flush.sheet import ActiveTab, SheetAccess, Tab, fenced, tab_of
from sheetsync.flush.typed import link_zone
from sheetsync.flush.writer import SheetWriter
from sheetsync.metrics import events
from sheetsync.metrics.names import BATCH_SIZE
from sheetsync.models import CredentialStatus, GoogleCredential, TransactionType, User
from sheetsync.redis_keys import BufferKey, is_account_id
from sheetsync.services import Services
from sheetsync.sheets.client import SheetsClient, quote_title
from sheetsync.sheets.limiter import FREE_WEIGHT, Acquire

log = logging.getLogger(__name__)

#: Batches one run appends before it hands the buffer to a fresh task (fairness).
DEFAULT_BATCHES_PER_RUN = 20
#: A run whose rate-limit slot is further off reschedules the task, timed to wake this
#: much before the slot frees, and waits the rest in-process.
DEFAULT_SLOT_LEAD_S = 0.75
#: A run woken for its turn still waits in-process when the turn moved this much later
#: since: the windows slide with the writes actually sent, so a turn drifts by tens of
#: milliseconds while its run sleeps, and rescheduling for that would wake it once more
#: for nothing.
DEFAULT_SLOT_SLIP_S = 0.5


@dataclass(frozen=True)
class OpenedSheet:
    """A run's sheet once it is open (the owner's credential was good): every Sheets
    request goes through ``access``; ``tab`` is the link's active tab, ``writer`` appends
    to it and ``rollover`` keeps it under its cell limit; ``acquire`` takes the owner's
    rate-limit slots (``google_account``'s)."""

    access: SheetAccess
    tab: ActiveTab
    writer: SheetWriter
    rollover: Rollover
    changes: ChangeWriter
    acquire: Acquire
    google_account: str

    @classmethod
    def open(
        cls, access: SheetAccess, tab: Tab, acquire: Acquire, google_account: str
    ) -> OpenedSheet:
        active = ActiveTab(access, tab)
        return cls(
            access,
            active,
            SheetWriter(active),
            Rollover(active),
            ChangeWriter(active),
            acquire,
            google_account,
        )


class FlushRun:
    """One claimed run of one buffer."""

    def __init__(self, services: Services, key: BufferKey, lease: Lease) -> None:
        self.services = services
        self.key = key
        self._lease = lease
        self.tally = Tally()
        #: The run's sheet, once opened (:meth:`prepare`).
        self.sheet: OpenedSheet | None = None
        self._batches = BatchBuilder(services.settings, key)
        self._header_checked = False
        #: The credential's ``updated_at`` as this run read it: a reconnect changes it,
        #: and marking the credential INVALID is a compare-and-set on it.
        self.credential_version: datetime | None = None
        #: The quota of the owner's OAuth client's project (known once the sheet opens).
        self.limiter = services.limiter
        #: Replays of this sheet's answers that the run's transactions saw in flight.
        self.replays = ReplaysInFlight(key)

    @property
    def lease(self) -> Lease:
        """The run's lease as last renewed (renewals go through the sheet's access)."""
        return self._lease if self.sheet is None else self.sheet.access.lease

    def leave_rate_queues(self) -> None:
        """The run ends without waiting for a slot: its buffer keeps no place. Best
        effort: a place nobody comes for is dropped a second after it was due."""
        try:
            self.limiter.leave(self.key.base)
        except redis.RedisError as exc:
            log.info(
                "flush %s kept its place at the quota: %s", self.lease.token, type(exc).__name__
            )

    @property
    def rollover(self) -> Rollover:
        """The opened sheet's roll-over (read by the failure table once
        :attr:`sheet_open` says there is one)."""
        if self.sheet is None:
            raise LookupError("the run has not opened its sheet")
        return self.sheet.rollover

    @property
    def sheet_open(self) -> bool:
        """Whether the run opened its sheet (the owner's credential was good)."""
        return self.sheet is not None

    @property
    def title_from_cache(self) -> bool:
        """Whether the tab's title came from the cache (a 400 may mean it changed)."""
        return self.sheet is not None and self.sheet.tab.title_from_cache

    # -- the run ---------------------------------------------------------------------

    def drain(self) -> None:
        """Prepare, then build, write and settle batches until the buffer is drained (or
        for :data:`DEFAULT_BATCHES_PER_RUN` batches, or until what is left is short of
        the threshold, not yet due and still growing: new arrivals wait for their
        debounce like any new burst). What is left of a burst that arrived before this
        run began (the tail of a batch cut at the request cap) goes now. A run whose
        worker is stopping starts no batch (:mod:`sheetsync.flush.stopping`).
        """
        started_ms = self.services.store.redis_now_ms()
        if stopping.ends_run(self.lease.token, 0):
            return
        debounce.hold_for_a_fuller_batch(self.services, self.key)
        sheet = self.prepare()
        for written in range(DEFAULT_BATCHES_PER_RUN):
            if stopping.ends_run(self.lease.token, written):
                return
            laid_out = self.next_batch(sheet)
            if laid_out is None:
                return
            left, oldest_age_s = self.write_and_settle(sheet, *laid_out)
            if not left:
                return
            settings = self.services.settings
            short = left < settings.flush_threshold and oldest_age_s < settings.flush_delay_s
            if short and self.services.store.arrivals(self.key).arrived_after(started_ms):
                return

    def finish(self, countdown_s: float | None = None, *, hold: bool = False) -> Outcome:
        """Hand the buffer to its next task (or delete the job when the list is empty)."""
        next_task = self.services.store.finish(
            self.key, self.lease, countdown_s=countdown_s, hold=hold
        )
        return Outcome("again" if next_task else "done", self.tally, next=next_task)

    # -- prepare -----------------------------------------------------------------------

    def prepare(self) -> OpenedSheet:
        with self.services.sessions() as session:
            tab = tab_of(links.check(session, self.key))
        sheet = self.sheet = self._open_sheet(tab)
        self._resolve_intents(sheet)
        return sheet

    def _open_sheet(self, tab: Tab) -> OpenedSheet:
        with self.services.sessions() as session:
            credential = session.get(GoogleCredential, self.key.user_id)
            if credential is None:
                raise CredentialError(f"owner {self.key.user_id} has no Google credential")
            # Read before the status check, so parking for a broken credential is a
            # compare-and-set against what this run saw (a reconnect since wins).
            self.credential_version = credential.updated_at
            if credential.status is not CredentialStatus.VALID:
                raise CredentialError(
                    f"owner {self.key.user_id}'s credential is {credential.status.value}"
                )
            if not is_account_id(credential.google_account_id):
                # Written by the web app when the owner connected: a reconnect mends it.
                raise CredentialError(f"owner {self.key.user_id}'s Google account id is malformed")
            google_account = credential.google_account_id
            # Its client's Cloud project paces it (a client not configured: ConfigError).
            self.limiter = self.services.limiter.for_client(credential.google_client)
            refresh_token = crypto.decrypt_refresh_token(
                credential.refresh_token, user_id=credential.user_id
            )
            owner = session.get(User, self.key.user_id)
            paying = owner is not None and is_priority_plan(owner.plan)
            weight = self.services.settings.rate_priority_weight if paying else FREE_WEIGHT
        acquire = self.limiter.acquirer(
            google_account,
            DEFAULT_SLOT_LEAD_S + DEFAULT_SLOT_SLIP_S,
            waiter=self.key.base,
            weight=weight,
        )
        client = SheetsClient(
            refresh_token,
            settings=self.services.settings,
            acquire=acquire,
            google_client=self.limiter.google_client,
        )
        access = SheetAccess(self.services, self.key, client, self.tally, self._lease)
        return OpenedSheet.open(access, tab, acquire, google_account)

    def _resolve_intents(self, sheet: OpenedSheet) -> None:
        """Intents left open by an earlier run: whatever of them is in the sheet is
        COMPLETED, the rest stays ENQUEUED (and in the list, or the reconciler's)."""
        with self.services.sessions() as session:
            pending = intents.open_for(session, self.key)
        if not pending:
            return
        now_ms = self.services.store.redis_now_ms()
        # The earlier run gave its append up by the deadline; Google may take a little
        # longer to apply one it received, so the sheet is read a request timeout later.
        settle_ms = int(self.services.settings.google_timeout_s * 1000)
        for intent in pending:
            if intent.deadline_ms and intent.deadline_ms + settle_ms > now_ms:
                raise WaitForIntent(
                    "an earlier append may still land",
                    retry_after_s=(intent.deadline_ms + settle_ms - now_ms) / 1000,
                )
        for intent in pending:
            title = sheet.tab.title_of(intent.tab_sheet_id)
            column = self._id_column(sheet, title, intent.after_row, set(intent.answer_ids))
            in_sheet = {row[0] for row in column if row}
            landed = [answer_id for answer_id in intent.answer_ids if answer_id in in_sheet]
            log.info(
                "flush %s resolved an intent: %d of %d ids had landed",
                self.lease.token,
                len(landed),
                len(intent.answer_ids),
            )
            with self.services.sessions.begin() as session:
                self.replays.note(session)
                ledger.record(
                    session,
                    landed,
                    self.key.spread_sheet_id,
                    self.key.sheet_id,
                    TransactionType.COMPLETED,
                )
                intents.resolve(session, intent.id)
        self.trim(0, FORGET_LAST_ROW)  # the sheet's end is re-learned from the next append

    def _id_column(
        self, sheet: OpenedSheet, title: str, after_row: int | None, ids: set[str]
    ) -> list[list[str]]:
        """The id column below ``after_row``; the whole column when that window does not
        hold every id (a person deleted or sorted rows above it)."""
        quoted, spreadsheet_id = quote_title(title), self.key.spread_sheet_id
        if after_row:
            window = sheet.access.send(
                "values.get",
                lambda client: client.read_values(spreadsheet_id, f"{quoted}!A{after_row + 1}:A"),
            )
            if ids <= {row[0] for row in window if row}:
                return window
        return sheet.access.send(
            "values.get", lambda client: client.read_values(spreadsheet_id, f"{quoted}!A:A")
        )

    # -- one batch: build, write, settle --------------------------------------------------

    def next_batch(self, sheet: OpenedSheet) -> tuple[Batch, FormLayout] | None:
        """The head of the list as rows, with the column layout they were built with (its
        header starts a new tab), or None when the list is empty."""
        if not self.services.store.buffer_length(self.key):
            return None
        debounce.linger(self.services, self.key)
        # Row 1 unchecked: the header is likely written before the append (two writes).
        header_pending = not self._header_checked and not (
            self.services.store.sheet_cache(self.key).header_ok
        )
        wait = self.limiter.reserve(
            sheet.google_account,
            self.key.base,
            weight=sheet.acquire.weight,
            lead_s=DEFAULT_SLOT_LEAD_S,
            cost=2 if header_pending else 1,
        )
        if wait > DEFAULT_SLOT_LEAD_S + DEFAULT_SLOT_SLIP_S:
            # The buffer keeps its place in the queue: wake up a little before its turn,
            # build the batch meanwhile, and the append waits the rest (see acquirer).
            raise RateLimited(
                "no slot for the next append", retry_after_s=wait - DEFAULT_SLOT_LEAD_S
            )
        ids = self.services.store.read_batch(self.key, self.services.settings.batch_size)
        if not ids:
            return None
        with self.services.sessions() as session:
            links.check(session, self.key)  # removed since the run started: write nothing
            form = self._batches.layout(session)
        layout = header.columns_for_batch(sheet.tab, form)
        self._header_checked = True
        zone = link_zone(self.services.settings, sheet.tab.sheet()[1])
        with self.services.sessions() as session:
            return self._batches.build(session, ids, layout=layout, zone=zone), layout

    def write_and_settle(
        self, sheet: OpenedSheet, batch: Batch, layout: FormLayout
    ) -> tuple[int, float]:
        """Append the batch (built with ``layout``) and settle it. Returns the ids left in
        the list and the oldest one's age (s)."""
        batch = batch.cut(self.services.settings.request_bytes_max)
        if batch.has_changes:  # before the append: it finds rows by column A alone
            sheet.changes.apply(
                batch.updates,
                batch.deletions,
                layout,
                self.services.settings.request_bytes_max,
                record=lambda part: self.record_followed(batch, part),
            )
        if not batch.rows:
            return self.settle(batch, [], {}, last_row=None, intent_id=None, sheet=sheet)
        batch = sheet.rollover.fit(batch, header_row(layout, self.services.settings))
        cache = self.services.store.sheet_cache(self.key)
        intent_id, appended = sheet.writer.append(
            batch.rows,
            batch.appended_ids,
            after_row=cache.last_row,
        )
        if appended.landed:
            events.observe(BATCH_SIZE, len(appended.landed))
        last_row: int | str | None = appended.last_row
        if appended.landed and last_row is None:
            last_row = FORGET_LAST_ROW  # landed, but Google's reply did not say where
        return self.settle(
            batch,
            appended.landed,
            appended.refused,
            last_row=last_row,
            intent_id=intent_id,
            sheet=sheet,
            width=layout.width,
        )

    def settle(
        self,
        batch: Batch,
        landed: list[str],
        refused: dict[str, str],
        *,
        last_row: int | str | None,
        intent_id: int | None,
        sheet: OpenedSheet,
        width: int = 0,
    ) -> tuple[int, float]:
        """Record the batch (and the ``width`` cells per row it took in the tab) and drop
        its intent in one transaction, then trim the list. Returns the ids left and the
        oldest one's age. (Its edits and deletions were recorded as they were sent.)"""
        failed = {**batch.failed, **refused}
        deleted = dict.fromkeys(batch.deleted, ledger.DELETED_NEVER_WRITTEN)
        not_written = {**batch.failed_updates, **failed}
        seen = [*landed, *batch.moot, *not_written]
        seqs = {i: batch.seqs[i] for i in seen if i in batch.seqs}
        alert: str | None = None
        with self.services.sessions.begin() as session:
            self.replays.note(session)
            if landed:
                alert = sheet.rollover.count(session, len(landed), width)
            ledger.record(
                session,
                landed,
                self.key.spread_sheet_id,
                self.key.sheet_id,
                TransactionType.COMPLETED,
            )
            ledger.record_many(
                session, failed, self.key.spread_sheet_id, self.key.sheet_id, TransactionType.FAILED
            )
            ledger.followed(
                session, seqs, self.key.spread_sheet_id, self.key.sheet_id, errors=not_written
            )
            ledger.record_deleted(session, deleted, self.key.spread_sheet_id, self.key.sheet_id)
            if intent_id is not None:
                intents.resolve(session, intent_id)
        if alert is not None:
            sheet.rollover.alert(alert)
        self.tally.appended += len(landed)
        self.tally.failed += len(failed)
        self.tally.deleted += len(deleted)
        return self.trim(len(batch.consumed), last_row)

    def record_followed(self, batch: Batch, part: Followed) -> None:
        """Record what a request of the batch's edits and deletions settled (or finding no
        row for them did), clearing each edit by compare-and-set on its ``change_seq``."""
        key = self.key
        settled = [*part.updated, *part.not_found, *part.refused]
        seqs = {i: batch.seqs[i] for i in settled if i in batch.seqs}
        with self.services.sessions.begin() as session:
            self.replays.note(session)
            ledger.followed(session, seqs, key.spread_sheet_id, key.sheet_id, part.refused)
            ledger.record_deleted(session, part.deleted, key.spread_sheet_id, key.sheet_id)
            ledger.note_pending(session, part.unplaced, key.spread_sheet_id, key.sheet_id)
            reopened = ledger.reopen(session, part.restored, key.spread_sheet_id, key.sheet_id)
        again = [*reopened, *(i for i, why in part.unplaced.items() if why == ROW_MOVED)]
        if again:  # the next run appends or deletes them (finish sees the list is not empty)
            queue = self.services.store.job_state(key).get("queue") or QUEUE_DEFAULT
            push(self.services.store, [(key, queue)], again)
        self.tally.updated += len(part.updated)
        self.tally.deleted += len(part.deleted)

    def trim(self, count: int, last_row: int | str | None) -> tuple[int, float]:
        left, oldest_age_s = self.services.store.trim(self.key, self.lease, count, last_row)
        if left < 0:
            raise fenced(self.lease.token)
        return left, oldest_age_s

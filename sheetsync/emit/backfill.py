"""Backfill: send a form's existing answers to its (newly linked) sheets, exactly once.

The answers take the path every answer takes: the ledger claim of an emit
(:func:`sheetsync.ledger.claim_for_links`, ENQUEUED only where the answer was never
emitted to that sheet), the link's buffer, the limiter and the flush. So a backfill
that runs twice, or alongside live answers, or after a crash, sends nothing twice.

It must not hold the web app's tables, nor starve live answers (docs/ARCHITECTURE.md,
"Backfill"):
- answers are read in keyset-paginated chunks (``submitted_at``, ``id``), each chunk
  read and recorded in its own short transaction;
- the flushes of a backfill go to the scheduled queue (with replays and repairs), never
  the plan queues of live answers;
- at most ``SHEETSYNC_BACKFILL_AHEAD`` ids wait in a link's buffer: the next chunk waits
  for the workers to drain it. A buffer is flushed by one run at a time, one append per
  rate-limit slot it waits its turn for, so a backfill holds one buffer's share of the
  workers and of the limiter, and live buffers get their slots in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from sheetsync import ledger
from sheetsync.dispatch import QUEUE_SCHEDULED
from sheetsync.emit.answers import push_recorded, record_backfill
from sheetsync.emit.push_thread import Pushes
from sheetsync.errors import BackfillStalled, NotFoundError, ValidationError
from sheetsync.models import SpreadSheet, Submission, SubmissionAnswer
from sheetsync.redis_keys import BufferKey, check_id
from sheetsync.services import Services, get_services

log = logging.getLogger(__name__)

#: How often a backfill looks at a buffer it waits for.
DEFAULT_POLL_S = 0.1


@dataclass
class BackfillProgress:
    """Where a backfill stands; handed to the caller's ``on_progress`` as it moves."""

    #: The links it fills, one after the other.
    links: list[int] = field(default_factory=list)
    #: Answers read so far, once per link (the ones already in the sheet included).
    read: int = 0
    #: (answer, sheet) pairs recorded and pushed by this backfill.
    sent: int = 0
    #: Of those, how many the workers have taken out of the buffers.
    drained: int = 0
    done: bool = False


@dataclass(frozen=True)
class BackfillResult:
    form_id: str
    read: int
    sent: int
    #: Whether it waited until the workers had drained what it sent.
    drained: bool


OnProgress = Callable[[BackfillProgress], None]


def backfill(
    form_id: str,
    *,
    link_id: int | None = None,
    since: datetime | None = None,
    wait: bool = True,
    services: Services | None = None,
    on_progress: OnProgress | None = None,
) -> BackfillResult:
    """Send the existing answers of ``form_id`` (submitted at or after ``since``) to
    its links, or to link ``link_id`` only, where they are not yet. Safe to run again:
    a second run (or one resumed after a crash) sends only what the first did not.

    With ``wait`` (the default) it returns once the workers drained every id it pushed;
    without, as soon as everything is recorded and pushed (the pacing still applies).
    Raises :class:`BackfillStalled` when a buffer does not drain for
    ``SHEETSYNC_BACKFILL_STALL_S`` (no workers?); run it again to resume.
    """
    check_id(form_id, "form id")
    if since is not None and since.utcoffset() is None:
        raise ValidationError("since must be an aware datetime (say its time zone)")
    services = services or get_services()
    progress = BackfillProgress(links=_links_to_fill(services, form_id, link_id))
    pacer = _Pacer(services, progress, on_progress)
    for number, target in enumerate(progress.links, start=1):
        _fill_one_link(services, form_id, target, since, pacer)
        if wait or number < len(progress.links):
            pacer.drain()  # one buffer at a time
    progress.done = True
    pacer.report()
    log.info("backfill of form %s: %d answers read, %d sent", form_id, progress.read, progress.sent)
    return BackfillResult(form_id, progress.read, progress.sent, drained=wait)


def _fill_one_link(
    services: Services, form_id: str, link_id: int, since: datetime | None, pacer: _Pacer
) -> None:
    """Every answer of the form (since ``since``) to one link, a chunk at a time."""
    settings = services.settings
    progress = pacer.progress
    cursor: tuple[datetime, str] | None = None
    while True:
        with services.sessions() as session:  # a short read: one chunk, then commit
            chunk = _next_chunk(session, form_id, since, cursor, settings.backfill_chunk)
        if not chunk:
            return
        cursor = chunk[-1]
        with services.sessions.begin() as session:
            pushes = record_backfill(
                session,
                form_id,
                [answer_id for _, answer_id in chunk],
                services,
                only_link_ids=[link_id],
                queue=QUEUE_SCHEDULED,
            )
        progress.read += len(chunk)
        if pushes:
            pacer.make_room(pushes)
            # Recorded ENQUEUED and committed: if this push is lost (Redis down, a crash
            # here), the reconciler pushes the ids later.
            push_recorded(services, pushes)
            progress.sent += sum(map(len, pushes.values()))
        pacer.report()


def _links_to_fill(services: Services, form_id: str, link_id: int | None) -> list[int]:
    """The links to fill, one after the other: a backfill keeps one buffer busy at a
    time, so it holds one worker, however many links the form has."""
    with services.sessions() as session:
        if session.get(Submission, form_id) is None:
            raise NotFoundError(f"form {form_id} does not exist")
        if link_id is None:
            return [
                int(i)
                for i in session.scalars(
                    select(SpreadSheet.id)
                    .where(SpreadSheet.submission_id == form_id)
                    .order_by(SpreadSheet.id)
                )
            ]
        link = session.get(SpreadSheet, link_id)
        if link is None or link.submission_id != form_id:
            raise NotFoundError(f"link {link_id} is not a link of form {form_id}")
        return [link_id]


def _next_chunk(
    session: Session,
    form_id: str,
    since: datetime | None,
    after: tuple[datetime, str] | None,
    size: int,
) -> list[tuple[datetime, str]]:
    """The next ``size`` (submitted_at, id) of the form after ``after``, oldest first."""
    answer = SubmissionAnswer
    query = select(answer.submitted_at, answer.id).where(answer.submission_id == form_id)
    if since is not None:
        query = query.where(answer.submitted_at >= since)
    if after is not None:
        at, last_id = after
        query = query.where(
            or_(answer.submitted_at > at, and_(answer.submitted_at == at, answer.id > last_id))
        )
    query = query.order_by(answer.submitted_at, answer.id).limit(size)
    return [(submitted_at, str(answer_id)) for submitted_at, answer_id in session.execute(query)]


class _Pacer:
    """Keeps at most ``SHEETSYNC_BACKFILL_AHEAD`` ids waiting per buffer, and counts
    what the workers have drained from the buffers' lengths (the ledger is never
    counted; at the end, one id's row is read)."""

    def __init__(
        self, services: Services, progress: BackfillProgress, on_progress: OnProgress | None
    ) -> None:
        self.services = services
        self.progress = progress
        self.on_progress = on_progress
        #: Ids this backfill pushed to each buffer that may still be in it.
        self._waiting: dict[BufferKey, int] = {}
        #: The last id pushed to each buffer.
        self._last: dict[BufferKey, str] = {}

    def make_room(self, pushes: Pushes) -> None:
        """Wait until every buffer ``pushes`` goes to has room for its ids."""
        adding = max(map(len, pushes.values()))
        ahead = max(self.services.settings.backfill_ahead, adding)
        self._wait_until({key for key, _ in pushes}, lambda _key, length: length + adding <= ahead)
        for (key, _), ids in pushes.items():
            self._waiting[key] = self._waiting.get(key, 0) + len(ids)
            self._last[key] = ids[-1]

    def drain(self) -> None:
        """Wait until the workers settled every id this backfill pushed: the buffer is
        empty, or the last id pushed is settled (a buffer is FIFO; live answers behind
        it do not count)."""
        self._wait_until(
            set(self._waiting), lambda key, length: length == 0 or self._last_settled(key)
        )
        self._waiting = dict.fromkeys(self._waiting, 0)
        self.progress.drained = self.progress.sent

    def _last_settled(self, key: BufferKey) -> bool:
        last = self._last[key]
        with self.services.sessions() as session:
            state = ledger.states(session, [last], key.spread_sheet_id, key.sheet_id).get(last)
        return state in ledger.SETTLED

    def report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)

    def _wait_until(self, keys: set[BufferKey], ready: Callable[[BufferKey, int], bool]) -> None:
        stall_s = self.services.settings.backfill_stall_s
        moved_at = time.monotonic()
        last: dict[BufferKey, int] = {}
        pending = set(keys)
        while True:
            lengths = {key: self.services.store.buffer_length(key) for key in pending}
            self._count_drained(lengths)
            pending = {key for key, length in lengths.items() if not ready(key, length)}
            if not pending:
                return
            if any(lengths[key] < last.get(key, lengths[key] + 1) for key in pending):
                moved_at = time.monotonic()
            last = {key: lengths[key] for key in pending}
            if time.monotonic() - moved_at > stall_s:
                raise BackfillStalled(
                    f"backfill: the buffer of {next(iter(pending)).base} did not drain for "
                    f"{stall_s:g} s (are workers running?); run it again to resume"
                )
            self.report()
            time.sleep(DEFAULT_POLL_S)

    def _count_drained(self, lengths: dict[BufferKey, int]) -> None:
        """A buffer is FIFO: of our ids, at most its length can still be in it."""
        for key, length in lengths.items():
            if key in self._waiting:
                self._waiting[key] = min(self._waiting[key], length)
        self.progress.drained = self.progress.sent - sum(self._waiting.values())

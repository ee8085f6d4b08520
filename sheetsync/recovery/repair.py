"""Periodic repairs: the sweeper and the reconciler (docs/ARCHITECTURE.md, "Repairs").

The sweeper keeps invariant I1 (a non-empty buffer has one live task) when a process
dies between a script and its ``apply_async``, or a worker dies mid-run: it does not
wait for the broker's visibility timeout. The reconciler re-pushes ENQUEUED answers
whose buffer vanished (Redis lost its data), using the DB row as the outbox.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.orm import Session

from sheetsync import ledger, links
from sheetsync.buffers.push import push, send_tasks
from sheetsync.dispatch import QUEUE_DEFAULT, FlushTask, get_dispatcher, queue_for_plan
from sheetsync.errors import ConfigError
from sheetsync.flush import intents
from sheetsync.flush.batches import MISSING_ANSWER
from sheetsync.models import (
    AnswerChange,
    DeadLetter,
    DeadLetterAnswer,
    DeadLetterStatus,
    SheetIntent,
    SheetTransaction,
    SpreadSheet,
    SubmissionAnswer,
    TransactionType,
    User,
    utcnow,
)
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services

log = logging.getLogger(__name__)


def sweep(services: Services) -> list[FlushTask]:
    """Re-dispatch every job that is stuck, and drop empty buffers from the index.

    The rule is sweep.lua's; this reads only the buffers the due index says are due (a
    job past its due time and grace, or past its lease), and sends what it returns.
    """
    buffers = services.store.due_buffers()
    if not buffers:
        return []
    tasks = services.store.sweep(buffers, QUEUE_DEFAULT, _busy_queues())
    for task in tasks:
        log.warning("sweeper re-dispatches %s (replacing %s)", task.token, task.superseded)
    send_tasks(services.store, tasks)
    return tasks


@dataclass(frozen=True)
class ReconcileReport:
    buffers: int
    answers: int


#: ENQUEUED ids of one buffer checked per pass (a larger backlog is checked in parts).
DEFAULT_IDS_PER_BUFFER = 50_000
#: Ids per LRANGE when a buffer's list is read whole.
LIST_CHUNK = 10_000


@dataclass(frozen=True)
class _Group:
    """The old ENQUEUED rows of one (sheet, form, link owner): None where gone."""

    spread_sheet_id: str
    sheet_id: int
    submission_id: str | None
    user_id: str | None
    plan: Any
    #: Its ENQUEUED rows older than the cutoff (the ones to check), and all of them.
    old: int
    enqueued: int

    @property
    def key(self) -> BufferKey | None:
        if self.submission_id is None or self.user_id is None:
            return None
        return BufferKey(self.user_id, self.submission_id, self.spread_sheet_id, self.sheet_id)


def reconcile(
    services: Services, *, ids_per_buffer: int = DEFAULT_IDS_PER_BUFFER
) -> ReconcileReport:
    """Push again the ENQUEUED answers older than ``reconcile_after_s`` that are not in
    their buffer: their ids were lost from Redis (a restart, a failover, a push that
    never ran).

    It costs what is lost, not what is waiting: one grouped query counts the ENQUEUED
    ids per buffer that has old ones, and one pipelined round trip compares each count
    with the buffer's length. Only a buffer with fewer ids than that, or no job, is read
    whole and compared id by id. Every ENQUEUED id is counted, not only the old ones: a
    busy buffer's newer ids would otherwise hide older ones that never reached it (the
    pushes a web app dropped). (A list that also holds ids settled but not yet trimmed
    can hide a loss for a while; once the buffer drains, the loss shows and is
    repaired.)
    Every buffer is looked at in every pass, so a large backlog in one cannot hide a
    loss in another.

    Ids an open intent covers are left alone until a flush resolves the intent (it may
    have landed); a buffer whose intent nothing would resolve gets a flush. An id
    whose answer or link is gone ends FAILED with the reason."""
    cutoff = utcnow() - timedelta(seconds=services.settings.reconcile_after_s)
    with services.sessions() as session:
        open_intents = intents.all_open(session)
        groups = [_Group(*row) for row in session.execute(_lost_groups(cutoff)).all()]
    _flush_stale_intents(services, open_intents)
    covered = {
        (intent.spread_sheet_id, intent.sheet_id, answer_id)
        for intent in open_intents
        for answer_id in intent.answer_ids
    }
    _fail_orphans(services, [g for g in groups if g.key is None], cutoff)
    buffers = answers = 0
    for group in _short_buffers(services, [g for g in groups if g.key is not None]):
        key = group.key
        assert key is not None
        with services.sessions() as session:
            ids = _old_ids(session, group, cutoff, ids_per_buffer)
        ids = [i for i in ids if (key.spread_sheet_id, key.sheet_id, i) not in covered]
        missing = _missing_from_buffer(services, key, ids)
        if missing and push(services.store, [(key, queue_for_plan(group.plan))], missing):
            buffers += 1
            answers += len(missing)
    changed_buffers, changed = _repush_changes(services, cutoff, covered, ids_per_buffer)
    buffers, answers = buffers + changed_buffers, answers + changed
    if answers:
        log.warning("reconciler re-pushed %d answers to %d buffers", answers, buffers)
    return ReconcileReport(buffers, answers)


def _short_buffers(services: Services, groups: list[_Group]) -> list[_Group]:
    """The groups whose buffer holds fewer ids than are ENQUEUED for it, or has no job
    (one pipelined round trip for all of them)."""
    pipe = services.redis.pipeline(transaction=False)
    for group in groups:
        key = group.key
        assert key is not None
        pipe.llen(key.buf)
        pipe.exists(key.job)
    replies = pipe.execute()
    short = []
    for n, group in enumerate(groups):
        length, has_job = replies[2 * n], replies[2 * n + 1]
        if length < group.enqueued or not has_job:
            short.append(group)
    return short


def _repush_changes(
    services: Services,
    cutoff: datetime,
    covered: set[tuple[str, int, str]],
    limit: int,
) -> tuple[int, int]:
    """Push again the edits and deletions older than the cutoff that are not in their
    buffer (an ENQUEUED answer's edit goes with its append, above). A deleted answer's
    row may be gone: its sheet's links say which buffers to push to. Returns (buffers,
    answers) pushed."""
    tx = SheetTransaction
    pending = (
        select(tx.submission_answer_id, SpreadSheet.submission_id, SpreadSheet.create_user_id)
        .add_columns(tx.spread_sheet_id, tx.sheet_id, User.plan)
        .join(
            SpreadSheet,
            and_(
                SpreadSheet.spread_sheet_id == tx.spread_sheet_id,
                SpreadSheet.sheet_id == tx.sheet_id,
            ),
        )
        .outerjoin(SubmissionAnswer, SubmissionAnswer.id == tx.submission_answer_id)
        .outerjoin(User, User.id == SpreadSheet.create_user_id)
        .where(
            tx.change.is_not(None),
            tx.updated_at < cutoff,
            or_(tx.type != TransactionType.ENQUEUED, tx.change == AnswerChange.DELETE),
            or_(
                SubmissionAnswer.id.is_(None),
                SubmissionAnswer.submission_id == SpreadSheet.submission_id,
            ),
            ~_held_by_a_dead_letter(),
        )
        .order_by(tx.updated_at)
        .limit(limit)
    )
    by_buffer: dict[tuple[BufferKey, str], list[str]] = {}
    with services.sessions() as session:
        for answer_id, form_id, owner, spreadsheet, gid, plan in session.execute(pending):
            if (spreadsheet, gid, answer_id) in covered:
                continue
            key = BufferKey(owner, form_id, spreadsheet, gid)
            by_buffer.setdefault((key, queue_for_plan(plan)), []).append(answer_id)
    buffers = answers = 0
    for (key, queue), ids in by_buffer.items():
        missing = _missing_from_buffer(services, key, ids)
        if missing and push(services.store, [(key, queue)], missing):
            buffers += 1
            answers += len(missing)
    return buffers, answers


def _held_by_a_dead_letter() -> Any:
    """The (answer, sheet) waits in a PENDING dead letter: its replay pushes it. (A
    REPLAYING one's ids are back in circulation: a push of them Redis lost is ours.)"""
    tx = SheetTransaction
    return (
        select(DeadLetterAnswer.answer_id)
        .join(DeadLetter, DeadLetter.id == DeadLetterAnswer.dead_letter_id)
        .where(
            DeadLetterAnswer.answer_id == tx.submission_answer_id,
            DeadLetter.spread_sheet_id == tx.spread_sheet_id,
            DeadLetter.sheet_id == tx.sheet_id,
            DeadLetter.status == DeadLetterStatus.PENDING,
        )
        .exists()
    )


def _missing_from_buffer(services: Services, key: BufferKey, ids: list[str]) -> list[str]:
    """The ids that are not in the buffer's list (read whole, in chunks).

    Pushing an id twice is harmless (a flush skips what the ledger says is settled), so
    this only avoids needless work."""
    client = services.redis
    length, has_job = client.llen(key.buf), client.exists(key.job)
    if not length:
        return ids
    if not has_job:
        # Ids with no task (Redis lost some keys): enqueue only makes a job for an empty
        # list, so give this one its job here.
        send_tasks(services.store, services.store.sweep([key], QUEUE_DEFAULT))
    pipe = client.pipeline(transaction=False)
    for start in range(0, length, LIST_CHUNK):
        pipe.lrange(key.buf, start, start + LIST_CHUNK - 1)
    present = {raw.decode() for chunk in pipe.execute() for raw in chunk}
    return [answer_id for answer_id in ids if answer_id not in present]


def _lost_groups(cutoff: datetime) -> Any:
    """ENQUEUED rows counted per (sheet, form, link owner) that has old ones (old, and
    all), with the owner's plan; the form or owner is None where the answer or the link
    is gone."""
    tx = SheetTransaction
    old = func.sum(case((tx.updated_at < cutoff, 1), else_=0))
    return (
        select(
            tx.spread_sheet_id,
            tx.sheet_id,
            SubmissionAnswer.submission_id,
            SpreadSheet.create_user_id,
            User.plan,
            old,
            func.count(),
        )
        .outerjoin(SubmissionAnswer, SubmissionAnswer.id == tx.submission_answer_id)
        .outerjoin(
            SpreadSheet,
            and_(
                SpreadSheet.submission_id == SubmissionAnswer.submission_id,
                SpreadSheet.spread_sheet_id == tx.spread_sheet_id,
                SpreadSheet.sheet_id == tx.sheet_id,
            ),
        )
        .outerjoin(User, User.id == SpreadSheet.create_user_id)
        .where(tx.type == TransactionType.ENQUEUED, _not_deleted())
        .group_by(
            tx.spread_sheet_id,
            tx.sheet_id,
            SubmissionAnswer.submission_id,
            SpreadSheet.create_user_id,
            User.plan,
        )
        .having(old > 0)
    )


def _not_deleted() -> Any:
    """Not a deletion: a deleted answer is pushed as one (:func:`_repush_changes`), never
    failed for its answer being gone."""
    tx = SheetTransaction
    return or_(tx.change.is_(None), tx.change != AnswerChange.DELETE)


def _old_ids(session: Session, group: _Group, cutoff: datetime, limit: int) -> list[str]:
    """The group's old ENQUEUED ids, oldest first."""
    tx = SheetTransaction
    query = (
        select(tx.submission_answer_id)
        .where(
            tx.type == TransactionType.ENQUEUED,
            _not_deleted(),
            tx.updated_at < cutoff,
            tx.spread_sheet_id == group.spread_sheet_id,
            tx.sheet_id == group.sheet_id,
        )
        .order_by(tx.updated_at, tx.submission_answer_id)
        .limit(limit)
    )
    if group.submission_id is None:
        query = query.where(
            ~select(SubmissionAnswer.id)
            .where(SubmissionAnswer.id == tx.submission_answer_id)
            .exists()
        )
    else:
        query = query.join(SubmissionAnswer, SubmissionAnswer.id == tx.submission_answer_id).where(
            SubmissionAnswer.submission_id == group.submission_id
        )
    return list(session.scalars(query))


def _fail_orphans(services: Services, groups: list[_Group], cutoff: datetime) -> None:
    """ENQUEUED ids whose answer or link is gone: FAILED with the reason."""
    failed = 0
    with services.sessions.begin() as session:
        for group in groups:
            reason = MISSING_ANSWER if group.submission_id is None else links.LINK_REMOVED
            ids = _old_ids(session, group, cutoff, DEFAULT_IDS_PER_BUFFER)
            ledger.record(
                session, ids, group.spread_sheet_id, group.sheet_id, TransactionType.FAILED, reason
            )
            failed += len(ids)
    if failed:
        log.warning("reconciler failed %d answers whose answer or link is gone", failed)


def _busy_queues() -> frozenset[str]:
    try:
        return get_dispatcher().waiting_queues() or frozenset()
    except ConfigError:
        return frozenset()  # no dispatcher: nobody is busy


def _flush_stale_intents(services: Services, open_intents: list[SheetIntent]) -> None:
    """An intent whose buffer has no job (Redis lost it) would never be resolved: give
    that buffer a flush, which resolves it before anything else (waiting, if the append
    may still land, until its deadline has passed)."""
    if not open_intents:
        return
    tasks = []
    for intent in open_intents:
        key = BufferKey(
            intent.user_id, intent.submission_id, intent.spread_sheet_id, intent.sheet_id
        )
        if services.redis.exists(key.job):
            continue
        task = services.store.adopt(key, QUEUE_DEFAULT, even_empty=True)
        if task is not None:
            tasks.append(task)
    send_tasks(services.store, tasks)

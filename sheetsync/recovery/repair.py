"""Periodic repairs: the sweeper and the reconciler (docs/ARCHITECTURE.md, "Repairs").

The sweeper keeps invariant I1 (a non-empty buffer has one live task) when a process
dies between a script and its ``apply_async``, or a worker dies mid-run: it does not
wait for the broker's visibility timeout. The reconciler re-pushes ENQUEUED answers
whose buffer vanished (Redis lost its data), using the DB row as the outbox.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, select

from sheetsync.buffers.push import push
from sheetsync.dispatch import QUEUE_DEFAULT, FlushTask, queue_for_plan, send_all
from sheetsync.keys import BufferKey
from sheetsync.models import (
    SheetTransaction,
    SpreadSheet,
    SubmissionAnswer,
    TransactionType,
    User,
    utcnow,
)
from sheetsync.pipeline import Pipeline

log = logging.getLogger(__name__)


def sweep(pipeline: Pipeline) -> list[FlushTask]:
    """Re-dispatch every job that is stuck, and drop empty buffers from the index.

    The rule is sweep.lua's; this walks the buffer index and sends what it returns.
    """
    buffers = [key for key, _ in pipeline.store.indexed_buffers()]
    tasks = pipeline.store.sweep(buffers, QUEUE_DEFAULT)
    for task in tasks:
        log.warning("sweeper re-dispatches %s (replacing %s)", task.token, task.superseded)
    send_all(tasks)
    return tasks


def _missing_from_buffer(pipeline: Pipeline, key: BufferKey, ids: list[str]) -> list[str]:
    """The ids that are not in the buffer's list.

    Pushing an id twice is harmless (a flush skips what the ledger says is settled, and
    an id twice in one batch once), so this only avoids needless work: an empty buffer
    with no job lost everything; a busy one is checked id by id.
    """
    client = pipeline.redis
    length, has_job = client.llen(key.buf), client.exists(key.job)
    if not length and not has_job:
        return ids
    if length and not has_job:
        # Ids with no task and no index entry (Redis lost some keys): enqueue only makes
        # a job for an empty list, so give this one its job here.
        send_all(pipeline.store.sweep([key], QUEUE_DEFAULT))
    pipe = client.pipeline(transaction=False)
    for answer_id in ids:
        pipe.lpos(key.buf, answer_id)
    return [
        answer_id for answer_id, found in zip(ids, pipe.execute(), strict=True) if found is None
    ]


@dataclass(frozen=True)
class ReconcileReport:
    buffers: int
    answers: int


def reconcile(pipeline: Pipeline, *, limit: int = 50_000) -> ReconcileReport:
    """Push again the ENQUEUED answers older than ``reconcile_after_s`` that are not in
    their buffer: their ids were lost from Redis (a restart, a failover, a push that
    never ran). An empty buffer with no job lost everything; a busy buffer that lost a
    few ids is covered too, by checking each id with LPOS."""
    cutoff = utcnow() - timedelta(seconds=pipeline.settings.reconcile_after_s)
    tx = SheetTransaction
    query = (
        select(
            SpreadSheet.create_user_id,
            SubmissionAnswer.submission_id,
            tx.spread_sheet_id,
            tx.sheet_id,
            User.plan,
            tx.submission_answer_id,
        )
        .join(SubmissionAnswer, SubmissionAnswer.id == tx.submission_answer_id)
        .join(
            SpreadSheet,
            and_(
                SpreadSheet.submission_id == SubmissionAnswer.submission_id,
                SpreadSheet.spread_sheet_id == tx.spread_sheet_id,
                SpreadSheet.sheet_id == tx.sheet_id,
            ),
        )
        .join(User, User.id == SpreadSheet.create_user_id)
        .where(tx.type == TransactionType.ENQUEUED, tx.updated_at < cutoff)
        .order_by(SubmissionAnswer.submitted_at, tx.submission_answer_id)
        .limit(limit)
    )
    grouped: dict[tuple[BufferKey, str], list[str]] = defaultdict(list)
    with pipeline.sessions() as session:
        for user_id, submission_id, spread_sheet_id, sheet_id, plan, answer_id in session.execute(
            query
        ):
            key = BufferKey(user_id, submission_id, spread_sheet_id, sheet_id)
            grouped[(key, queue_for_plan(plan))].append(answer_id)
    if not grouped:
        return ReconcileReport(0, 0)
    buffers = answers = 0
    for (key, queue), candidates in grouped.items():
        ids = _missing_from_buffer(pipeline, key, list(dict.fromkeys(candidates)))
        if ids and push(pipeline.store, [(key, queue)], ids):
            buffers += 1
            answers += len(ids)
    if answers:
        log.warning("reconciler re-pushed %d answers to %d buffers", answers, buffers)
    return ReconcileReport(buffers, answers)

"""The web app's side: record an answer for its linked sheets and push its id.

The SheetTransaction row (ENQUEUED) is the outbox: it is written in the caller's
transaction, and the Redis push runs only after that transaction commits. If Redis is
down the push is skipped and the reconciler pushes the id later; the caller's request
never fails because of Redis or the broker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from sheetsync import ledger
from sheetsync.alerts import send_alert_once
from sheetsync.buffers.push import push
from sheetsync.dispatch import queue_for_plan
from sheetsync.errors import NotFoundError, ValidationError
from sheetsync.keys import BufferKey, check_id
from sheetsync.models import (
    CredentialStatus,
    DeadLetterReason,
    GoogleCredential,
    Plan,
    SpreadSheet,
    SubmissionAnswer,
    TransactionType,
    User,
)
from sheetsync.pipeline import Pipeline, get_pipeline
from sheetsync.recovery import deadletters

log = logging.getLogger(__name__)

_PENDING = "sheetsync.pending_pushes"


@dataclass(frozen=True)
class EmitResult:
    answer_id: str
    #: Buffers the id was (or, inside a caller's transaction, will be) pushed to.
    enqueued: tuple[BufferKey, ...] = ()
    #: Buffers whose owner's credential is broken: the id went to their dead letter.
    dead_lettered: tuple[BufferKey, ...] = ()
    #: One message per malformed link (VALIDATION_FAILED).
    invalid: tuple[str, ...] = ()
    #: Whether the push to Redis happened (False inside an open transaction, or when
    #: Redis was unreachable: the reconciler then pushes later).
    pushed: bool = False


@dataclass
class _Routing:
    """Where one answer goes: buffers to push to, owners' dead letters, broken links."""

    targets: list[tuple[BufferKey, str]] = field(default_factory=list)
    dead_lettered: list[BufferKey] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


def emit_answer_submitted(
    answer_id: str, *, session: Session | None = None, pipeline: Pipeline | None = None
) -> EmitResult:
    """Queue a submitted answer for every sheet its form is linked to."""
    check_id(answer_id, "answer id")
    pipeline = pipeline or get_pipeline()
    if session is not None:
        routing = _record(session, answer_id, pipeline)
        if routing.targets:
            _push_after_commit(session, pipeline, answer_id, routing.targets)
        return _result(answer_id, routing, pushed=False)
    with pipeline.sessions.begin() as own:
        routing = _record(own, answer_id, pipeline)
    pushed = push(pipeline.store, routing.targets, [answer_id]) if routing.targets else False
    return _result(answer_id, routing, pushed=pushed)


def _result(answer_id: str, routing: _Routing, *, pushed: bool) -> EmitResult:
    return EmitResult(
        answer_id=answer_id,
        enqueued=tuple(key for key, _ in routing.targets),
        dead_lettered=tuple(routing.dead_lettered),
        invalid=tuple(routing.invalid),
        pushed=pushed,
    )


def _record(session: Session, answer_id: str, pipeline: Pipeline) -> _Routing:
    submission_id = session.scalar(
        select(SubmissionAnswer.submission_id).where(SubmissionAnswer.id == answer_id)
    )
    if submission_id is None:
        raise NotFoundError(f"answer {answer_id} does not exist")
    links = session.scalars(
        select(SpreadSheet).where(SpreadSheet.submission_id == submission_id)
    ).all()
    routing = _Routing()
    if not links:
        return routing
    owners = {link.create_user_id for link in links}
    credentials = {
        c.user_id: c
        for c in session.scalars(
            select(GoogleCredential).where(GoogleCredential.user_id.in_(owners))
        )
    }
    owner_plans: dict[str, Plan] = {
        user_id: plan
        for user_id, plan in session.execute(select(User.id, User.plan).where(User.id.in_(owners)))
    }
    settings = pipeline.settings
    for link in links:
        try:
            key = BufferKey(
                link.create_user_id, link.submission_id, link.spread_sheet_id, link.sheet_id
            )
        except ValidationError as exc:
            _invalid(
                session, pipeline, routing, answer_id, link, f"link {link.id} is malformed: {exc}"
            )
            continue
        credential = credentials.get(link.create_user_id)
        if credential is None:
            message = f"link {link.id}: owner {link.create_user_id} has no Google credential"
            _invalid(session, pipeline, routing, answer_id, link, message)
            continue
        if credential.status is not CredentialStatus.VALID:
            deadletters.park(
                session,
                key,
                [answer_id],
                DeadLetterReason.CREDENTIAL,
                f"owner's credential is {credential.status.value}",
                delay_s=settings.dlq_delay_s,
            )
            routing.dead_lettered.append(key)
            continue
        ledger.record(
            session, [answer_id], key.spread_sheet_id, key.sheet_id, TransactionType.ENQUEUED
        )
        routing.targets.append((key, queue_for_plan(owner_plans.get(link.create_user_id))))
    return routing


def _invalid(
    session: Session,
    pipeline: Pipeline,
    routing: _Routing,
    answer_id: str,
    link: SpreadSheet,
    message: str,
) -> None:
    routing.invalid.append(message)
    if isinstance(link.sheet_id, int) and isinstance(link.spread_sheet_id, str):
        ledger.record(
            session,
            [answer_id],
            link.spread_sheet_id[:128],
            link.sheet_id,
            TransactionType.VALIDATION_FAILED,
            message,
        )
    send_alert_once(
        pipeline.redis,
        f"link:{link.id}",
        f"VALIDATION_FAILED: {message}",
        settings=pipeline.settings,
    )


def _push_after_commit(
    session: Session, pipeline: Pipeline, answer_id: str, targets: list[tuple[BufferKey, str]]
) -> None:
    pending: list[tuple[Pipeline, str, list[tuple[BufferKey, str]]]] | None = session.info.get(
        _PENDING
    )
    if pending is None:
        pending = []
        session.info[_PENDING] = pending
        event.listen(session, "after_commit", _flush_pending)
        event.listen(session, "after_soft_rollback", _drop_pending)
    pending.append((pipeline, answer_id, targets))


def _flush_pending(session: Session) -> None:
    pending = session.info.get(_PENDING) or []
    session.info[_PENDING] = []
    for pipeline, answer_id, targets in pending:
        push(pipeline.store, targets, [answer_id])


def _drop_pending(session: Session, _previous_transaction: object) -> None:
    if session.in_transaction():
        return  # a savepoint rolled back; the outer transaction may still commit
    session.info[_PENDING] = []

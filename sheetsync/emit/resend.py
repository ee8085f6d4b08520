"""Send FAILED answers again, on purpose: after the cause was fixed (a key restored, a
question put back, a sheet shared again). An answer is never resent on its own."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, update

from sheetsync import links
from sheetsync.buffers.push import push
from sheetsync.errors import ValidationError
from sheetsync.models import (
    SheetTransaction,
    SpreadSheet,
    SubmissionAnswer,
    TransactionType,
    utcnow,
)
from sheetsync.redis_keys import BufferKey, check_id
from sheetsync.services import Services, get_services


@dataclass(frozen=True)
class ResendResult:
    #: (answer, sheet) pairs recorded ENQUEUED again and pushed to their buffer.
    resent: int
    #: FAILED pairs whose link is gone (they stay FAILED).
    unlinked: int


def resend_failed(
    answer_ids: Sequence[str] | None = None,
    *,
    submission_id: str | None = None,
    spread_sheet_id: str | None = None,
    sheet_id: int | None = None,
    services: Services | None = None,
) -> ResendResult:
    """Record FAILED answers ENQUEUED again and push them to their link's buffer.

    Choose them by ``answer_ids``, by form (``submission_id``), or both; ``spread_sheet_id``
    (and ``sheet_id``) narrows to one sheet. Only FAILED rows change: an answer that is in
    the sheet, waiting, or in a dead letter is left as it is.
    """
    if not answer_ids and submission_id is None:
        raise ValidationError("say which answers to resend: answer ids, a form, or both")
    for answer_id in answer_ids or ():
        check_id(answer_id, "answer id")
    services = services or get_services()
    tx = SheetTransaction
    query = (
        select(tx.submission_answer_id, tx.spread_sheet_id, tx.sheet_id, SpreadSheet.create_user_id)
        .join(SubmissionAnswer, SubmissionAnswer.id == tx.submission_answer_id)
        .outerjoin(
            SpreadSheet,
            (SpreadSheet.submission_id == SubmissionAnswer.submission_id)
            & (SpreadSheet.spread_sheet_id == tx.spread_sheet_id)
            & (SpreadSheet.sheet_id == tx.sheet_id),
        )
        .add_columns(SubmissionAnswer.submission_id)
        .where(tx.type == TransactionType.FAILED)
    )
    if answer_ids:
        query = query.where(tx.submission_answer_id.in_(list(answer_ids)))
    if submission_id is not None:
        query = query.where(SubmissionAnswer.submission_id == submission_id)
    if spread_sheet_id is not None:
        query = query.where(tx.spread_sheet_id == spread_sheet_id)
    if sheet_id is not None:
        query = query.where(tx.sheet_id == sheet_id)
    targets: dict[tuple[BufferKey, str], list[str]] = defaultdict(list)
    unlinked = 0
    with services.sessions.begin() as session:
        for answer_id, spreadsheet, gid, owner, form in session.execute(query).all():
            if owner is None:
                unlinked += 1
                continue
            key = BufferKey(owner, form, spreadsheet, gid)
            moved = session.execute(
                update(tx)
                .where(
                    tx.submission_answer_id == answer_id,
                    tx.spread_sheet_id == spreadsheet,
                    tx.sheet_id == gid,
                    tx.type == TransactionType.FAILED,
                )
                .values(type=TransactionType.ENQUEUED, error_message=None, updated_at=utcnow())
            )
            if moved.rowcount:  # type: ignore[attr-defined]
                targets[(key, links.queue_of(session, owner))].append(answer_id)
    for (key, queue), ids in targets.items():
        push(services.store, [(key, queue)], ids)
    return ResendResult(resent=sum(map(len, targets.values())), unlinked=unlinked)

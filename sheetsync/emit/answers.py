"""The web app's side: record an answer for its linked sheets and push its id.

The SheetTransaction row (ENQUEUED) is the outbox: it is written in the caller's
transaction, and the Redis push runs only after that transaction commits. Nothing in
the caller's transaction touches Redis (a malformed link's alert goes to the alert
thread whole). If Redis is down the push is skipped and the reconciler pushes the id
later; the caller's request never fails because of Redis or the broker, and waits for
Redis only without a session (its own push, bounded by the client's timeouts).

One SQL statement per emit in the steady state (docs/ARCHITECTURE.md, "Emit"): an
``INSERT ... SELECT`` over the form's links as they are (:func:`ledger.claim_for_links`),
given the answer object (or two, given only its id: the form is looked up first). Which
buffer and queue each link's answers take comes from the routes cache
(:mod:`sheetsync.emit.routing`). Emit does not look at credentials: a flush parks the
answers of an owner whose credential is broken, without calling Google.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import event, select, update
from sqlalchemy.orm import Session

from sheetsync import ledger
from sheetsync.alerts import queue_alert_once
from sheetsync.buffers.push import push
from sheetsync.emit.push_thread import Pushes, push_thread
from sheetsync.emit.routing import FormRoutes, Route, RoutingCache
from sheetsync.errors import NotFoundError
from sheetsync.metrics import events as metric_events
from sheetsync.models import SheetTransaction, SubmissionAnswer, TransactionType
from sheetsync.redis_keys import BufferKey, check_id
from sheetsync.services import Services, get_services

log = logging.getLogger(__name__)

_PENDING = "sheetsync.pending_pushes"
#: Answers per statement of a batch emit (keeps bind parameters under SQLite's limit).
BATCH_CHUNK = 500


@dataclass(frozen=True)
class EmitResult:
    answer_id: str
    #: Buffers the id was (or, inside a caller's transaction, will be) pushed to.
    enqueued: tuple[BufferKey, ...] = ()
    #: One message per link that cannot take the answer (malformed, or refused).
    invalid: tuple[str, ...] = ()
    #: Whether the push to Redis happened (False inside an open transaction, or when
    #: Redis was unreachable: the reconciler then pushes later).
    pushed: bool = False


@dataclass
class Recorded:
    """What one emit call recorded, per answer."""

    enqueued: dict[str, list[BufferKey]] = field(default_factory=lambda: defaultdict(list))
    invalid: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    pushes: Pushes = field(default_factory=lambda: defaultdict(list))


_routes: RoutingCache | None = None


def routes_cache(services: Services) -> RoutingCache:
    global _routes  # noqa: PLW0603 (one cache per process, like the services)
    if _routes is None or _routes.ttl_s != services.settings.routing_cache_s:
        _routes = RoutingCache(services.settings.routing_cache_s)
    return _routes


def links_changed(form_id: str | None = None) -> None:
    """Forget this process's cached routes of ``form_id`` (of every form when None).

    Emit always sees a form's links as they are; the cache only holds who owns each
    link and their plan, for at most ``SHEETSYNC_ROUTING_CACHE_S``. Call this after
    changing a link's owner or an owner's plan to apply it at once in this process."""
    if _routes is not None:
        _routes.forget(form_id)


def emit_answer_submitted(
    answer: str | SubmissionAnswer,
    *,
    session: Session | None = None,
    services: Services | None = None,
) -> EmitResult:
    """Queue a submitted answer for every sheet its form is linked to.

    ``answer`` is the answer's id, or the ``SubmissionAnswer`` the caller just added
    (then no statement is spent looking up its form)."""
    [result] = emit_answers_submitted([answer], session=session, services=services)
    return result


def emit_answers_submitted(
    answers: Iterable[str | SubmissionAnswer],
    *,
    session: Session | None = None,
    services: Services | None = None,
) -> list[EmitResult]:
    """Queue many answers (a bulk import): one statement per :data:`BATCH_CHUNK`
    answers, one push per buffer. Results are in the order given."""
    forms = forms_given(answers)
    services = services or get_services()
    if session is not None:
        recorded = _record(session, forms, services)
        if recorded.pushes:
            push_after_commit(session, services, recorded.pushes)
        return results_of(forms, recorded, pushed=False)
    with services.sessions.begin() as own:
        recorded = _record(own, forms, services)
    pushed = push_now(services, recorded.pushes)
    return results_of(forms, recorded, pushed=pushed)


def record_backfill(
    session: Session,
    form_id: str,
    answer_ids: Sequence[str],
    services: Services,
    *,
    only_link_ids: Sequence[int] | None,
    queue: str,
) -> Pushes:
    """Record existing answers of one form ENQUEUED for its links (or ``only_link_ids``)
    where they never were, exactly as an emit does, and return the pushes to make after
    the caller's transaction commits, each on ``queue`` (:mod:`sheetsync.emit.backfill`)."""
    forms: dict[str, str | None] = {check_id(a, "answer id"): form_id for a in answer_ids}
    recorded = _record(session, forms, services, only_link_ids=only_link_ids, queue=queue)
    return dict(recorded.pushes)


def push_recorded(services: Services, pushes: Pushes) -> bool:
    """Push what :func:`record_backfill` recorded, once its transaction committed."""
    return push_now(services, pushes)


def forms_given(answers: Iterable[str | SubmissionAnswer]) -> dict[str, str | None]:
    """Answer id -> its form when the caller gave the object, else None (validated)."""
    forms: dict[str, str | None] = {}
    for answer in answers:
        if isinstance(answer, SubmissionAnswer):
            forms[check_id(answer.id, "answer id")] = answer.submission_id
        else:
            forms.setdefault(check_id(answer, "answer id"), None)
    return forms


def _record(
    session: Session,
    forms: dict[str, str | None],
    services: Services,
    *,
    only_link_ids: Sequence[int] | None = None,
    queue: str | None = None,
) -> Recorded:
    unknown = [answer_id for answer_id, form in forms.items() if form is None]
    if unknown:
        found = dict(
            session.execute(
                select(SubmissionAnswer.id, SubmissionAnswer.submission_id).where(
                    SubmissionAnswer.id.in_(unknown)
                )
            ).all()
        )
        missing = [answer_id for answer_id in unknown if answer_id not in found]
        if missing:
            raise NotFoundError(f"answer {missing[0]} does not exist")
        forms.update(found)
    cache = routes_cache(services)
    routes = {form: cache.get(session, form) for form in {f for f in forms.values() if f}}
    allowed = [link for entry in routes.values() for link in entry.allowed_link_ids]
    recorded = Recorded()
    answer_ids = list(forms)
    for start in range(0, len(answer_ids), BATCH_CHUNK):
        chunk = answer_ids[start : start + BATCH_CHUNK]
        claimed = ledger.claim_for_links(session, chunk, allowed, only_link_ids=only_link_ids)
        for answer_id, spreadsheet, gid, state in claimed:
            form_id = forms[answer_id]
            assert form_id is not None
            route = _route_for(session, cache, routes, form_id, (spreadsheet, gid))
            if route is not None and queue is not None:
                route = dataclasses.replace(route, queue=queue)
            _take(session, services, recorded, answer_id, route, state, (spreadsheet, gid))
    order = {answer_id: n for n, answer_id in enumerate(forms)}
    for ids in recorded.pushes.values():
        ids.sort(key=order.__getitem__)  # rows land in the order the answers were given
    return recorded


def _route_for(
    session: Session,
    cache: RoutingCache,
    routes: dict[str, FormRoutes],
    form_id: str,
    sheet: tuple[str, int],
) -> Route | None:
    route = routes[form_id].routes.get(sheet)
    if route is None:  # a link made since the routes were read
        routes[form_id] = cache.load(session, form_id)
        route = routes[form_id].routes.get(sheet)
    return route


def _take(
    session: Session,
    services: Services,
    recorded: Recorded,
    answer_id: str,
    route: Route | None,
    state: TransactionType,
    sheet: tuple[str, int],
) -> None:
    """Where one recorded (answer, sheet) goes, correcting the row where the routes know
    better than the statement could (a malformed link, or one the authorizer allows)."""
    if route is None:
        return  # the link was removed within this very transaction: nothing to send
    if route.problem is not None:
        if state is TransactionType.ENQUEUED:  # malformed: the statement cannot tell
            _correct(session, answer_id, sheet, TransactionType.VALIDATION_FAILED, route.problem)
        recorded.invalid[answer_id].append(route.problem)
        queue_alert_once(  # decided and sent by the alert thread: no Redis in this transaction
            services.redis,
            f"link:{route.link_id}",
            f"VALIDATION_FAILED: {route.problem}",
            settings=services.settings,
        )
        return
    if state is TransactionType.VALIDATION_FAILED:  # allowed by the authorizer
        _correct(session, answer_id, sheet, TransactionType.ENQUEUED, None)
    assert route.key is not None
    recorded.enqueued[answer_id].append(route.key)
    recorded.pushes[(route.key, route.queue)].append(answer_id)


def _correct(
    session: Session,
    answer_id: str,
    sheet: tuple[str, int],
    state: TransactionType,
    message: str | None,
) -> None:
    tx = SheetTransaction
    session.execute(
        update(tx)
        .where(
            tx.submission_answer_id == answer_id,
            tx.spread_sheet_id == sheet[0],
            tx.sheet_id == sheet[1],
        )
        .values(type=state, error_message=message)
    )


def results_of(
    forms: dict[str, str | None], recorded: Recorded, *, pushed: bool
) -> list[EmitResult]:
    return [
        EmitResult(
            answer_id=answer_id,
            enqueued=tuple(recorded.enqueued.get(answer_id, ())),
            invalid=tuple(recorded.invalid.get(answer_id, ())),
            pushed=pushed and bool(recorded.enqueued.get(answer_id)),
        )
        for answer_id in forms
    ]


def push_now(services: Services, pushes: Pushes) -> bool:
    """Push each buffer's ids, one round trip per set of buffers that take the same ids
    (one answer's sheets: one call); True when every push reached Redis."""
    by_ids: dict[tuple[str, ...], list[tuple[BufferKey, str]]] = defaultdict(list)
    for target, answer_ids in pushes.items():
        by_ids[tuple(answer_ids)].append(target)
    ok = True
    for same_ids, targets in by_ids.items():
        ok = ok and push(services.store, targets, same_ids)  # Redis is down: stop waiting
    if ok:  # else the counts wait in the tally for the next publish
        metric_events.publish_soon(services.redis)  # the ledger transitions of the emit
    return ok


def push_after_commit(session: Session, services: Services, pushes: Pushes) -> None:
    _listen_to_every_session()
    session.info.setdefault(_PENDING, []).append((services, pushes))


@functools.cache
def _listen_to_every_session() -> None:
    """Listen once on the Session class (every app session, subclasses included): a
    listener per session instance would cost more than the emit's SQL statement. A
    session with nothing pending pays one dict lookup per commit."""
    event.listen(Session, "after_commit", _flush_pending)
    event.listen(Session, "after_soft_rollback", _drop_pending)


def _flush_pending(session: Session) -> None:
    pending = session.info.pop(_PENDING, None)
    if not pending:
        return
    sender = push_thread(push_now)  # off the request's path (emit/push_thread.py)
    for services, pushes in pending:
        sender.submit(services, pushes)


def _drop_pending(session: Session, _previous_transaction: object) -> None:
    if session.in_transaction():
        return  # a savepoint rolled back; the outer transaction may still commit
    session.info.pop(_PENDING, None)

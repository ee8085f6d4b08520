"""Where a form's answers go: its links, each with its buffer and queue, cached.

Emit records an answer for every link of its form in one statement that reads the links
themselves (:func:`sheetsync.ledger.claim_for_links`), so whether a link exists is never
stale. What the statement cannot say is kept here per form: each link's owner (whose
buffer), that owner's plan (which queue), whether a link made by someone other than the
form's owner is allowed, and whether its ids are malformed. An entry lives
``ROUTING_CACHE_S``; a link the statement returns that the entry does not know reloads
it at once, and :func:`links_changed` drops it in this process. A stale entry can only
send a flush to a lower-priority queue, or to the buffer of an owner the link no longer
has (whose flush hands the ids to the link's current owner: ``links.check``); it never
sends answers where no link is.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from sheetsync.dispatch import queue_for_plan
from sheetsync.errors import ValidationError
from sheetsync.links import may_send
from sheetsync.models import SpreadSheet, Submission, User
from sheetsync.redis_keys import BufferKey


@dataclass(frozen=True, slots=True)
class Route:
    """One link of a form, as emit needs it."""

    link_id: int
    #: The buffer its answers go to; None when the link's ids are malformed.
    key: BufferKey | None
    queue: str
    #: Whether the link may send the form's answers (its creator is the owner, or the
    #: authorizer allows it).
    allowed: bool
    #: Why the link cannot take answers (malformed, or refused), for the ledger.
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class FormRoutes:
    form_id: str
    #: (spreadsheet id, gid) -> the link to that sheet.
    routes: dict[tuple[str, int], Route]
    loaded_at: float

    @property
    def allowed_link_ids(self) -> list[int]:
        """The links known to be allowed to send (the emit statement also allows every
        link made by the form's owner, known here or not)."""
        return [r.link_id for r in self.routes.values() if r.allowed and r.problem is None]


class RoutingCache:
    """Per-process routes of forms, each entry living ``ttl_s``."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, FormRoutes] = {}
        self._lock = threading.Lock()

    def get(self, session: Session, form_id: str) -> FormRoutes:
        entry = self._entries.get(form_id)
        if entry is None or time.monotonic() - entry.loaded_at > self.ttl_s:
            entry = self.load(session, form_id)
        return entry

    def load(self, session: Session, form_id: str) -> FormRoutes:
        """Read the form's links now (one statement) and keep them."""
        rows = session.execute(
            select(SpreadSheet, Submission, User.plan)
            .join(Submission, Submission.id == SpreadSheet.submission_id)
            .outerjoin(User, User.id == SpreadSheet.create_user_id)
            .where(SpreadSheet.submission_id == form_id)
        ).all()
        routes = {}
        for link, form, plan in rows:
            sheet = (str(link.spread_sheet_id), int(link.sheet_id))
            routes[sheet] = _route(session, link, form, queue_for_plan(plan))
        entry = FormRoutes(form_id, routes, time.monotonic())
        with self._lock:
            if len(self._entries) > MAX_CACHED_FORMS:
                self._entries.clear()
            self._entries[form_id] = entry
        return entry

    def forget(self, form_id: str | None = None) -> None:
        with self._lock:
            if form_id is None:
                self._entries.clear()
            else:
                self._entries.pop(form_id, None)


#: Forms whose routes one process keeps (the cache starts over beyond it).
MAX_CACHED_FORMS = 10_000


def _route(session: Session, link: SpreadSheet, form: Submission, queue: str) -> Route:
    allowed = may_send(session, link, form)
    try:
        key = BufferKey(
            link.create_user_id, link.submission_id, link.spread_sheet_id, link.sheet_id
        )
    except ValidationError as exc:
        return Route(link.id, None, queue, allowed, f"link {link.id} is malformed: {exc}")
    if not allowed:
        problem = (
            f"link {link.id} refused: its creator {link.create_user_id} is not the owner of "
            f"form {form.id} (SHEETSYNC_LINK_AUTHORIZER decides who else may link)"
        )
        return Route(link.id, key, queue, False, problem)
    return Route(link.id, key, queue, True)

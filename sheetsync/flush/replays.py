"""A flush run's part in finishing replays: a replay of dead letters is DONE once none of
its ids is ENQUEUED, and the run that settles the last of them says so when it ends, not
beat's next dispatch (which stays the backstop, for a run that dies first too).
"""

from __future__ import annotations

import logging

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import deadletters
from sheetsync.keys import BufferKey

log = logging.getLogger(__name__)


class ReplaysInFlight:
    """Whether a transaction of one run that settled or parked ids saw a replay of its
    sheet's answers in flight; the run then completes those replays when it ends."""

    def __init__(self, key: BufferKey) -> None:
        self.key = key
        self.seen = False

    def note(self, session: Session) -> None:
        """In a transaction that settles or parks ids: is a replay of this sheet's answers
        in flight? (One indexed read per run, until one is found.)"""
        if not self.seen:
            self.seen = deadletters.replaying(session, self.key.spread_sheet_id, self.key.sheet_id)

    def complete(self, sessions: sessionmaker[Session], token: str) -> None:
        """When the run ends: the entries with no id ENQUEUED any more are DONE now."""
        if not self.seen:
            return
        try:
            done = deadletters.complete_replays(
                sessions, sheet=(self.key.spread_sheet_id, self.key.sheet_id)
            )
        except SQLAlchemyError as exc:
            log.warning(
                "flush %s could not mark finished replays DONE (%s); beat's dead-letter "
                "dispatch will",
                token,
                type(exc).__name__,
            )
            return
        if done:
            log.info("flush %s finished the replay of dead letters %s", token, done)

"""The ledger's one rule that every writer relies on: COMPLETED is terminal."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker
from support.databases import BOTH_DATABASES

from sheetsync import ledger
from sheetsync.models import TransactionType

SHEET = ("spreadsheet", 0)


@BOTH_DATABASES
def test_no_state_replaces_completed(engine):
    sessions = sessionmaker(engine)
    with sessions.begin() as session:
        ledger.record(session, ["a1", "a2"], *SHEET, TransactionType.COMPLETED)
        ledger.record(session, ["a3"], *SHEET, TransactionType.DEAD_LETTERED)
    for later in (TransactionType.ENQUEUED, TransactionType.DEAD_LETTERED, TransactionType.FAILED):
        with sessions.begin() as session:
            ledger.record(session, ["a1", "a2", "a3"], *SHEET, later, "why")
        with sessions() as session:
            states = ledger.states(session, ["a1", "a2", "a3"], *SHEET)
        assert states["a1"] is states["a2"] is TransactionType.COMPLETED
        assert states["a3"] is later


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_replay_that_read_an_older_state_cannot_undo_a_completion(engine):
    # A dead-letter replay reads its ids DEAD_LETTERED; meanwhile a flush resolving an
    # open intent finds them in the sheet and records them COMPLETED. The replay's
    # write comes last: it must not make them ENQUEUED (they would be appended again).
    sessions = sessionmaker(engine)
    with sessions.begin() as session:
        ledger.record(session, ["a1"], *SHEET, TransactionType.DEAD_LETTERED)
    replay: Session = sessions()
    try:
        replay.begin()
        assert ledger.states(replay, ["a1"], *SHEET)["a1"] is TransactionType.DEAD_LETTERED
        with sessions.begin() as flush:
            ledger.record(flush, ["a1"], *SHEET, TransactionType.COMPLETED)
        ledger.record(replay, ["a1"], *SHEET, TransactionType.ENQUEUED)
        replay.commit()
    finally:
        replay.close()
    with sessions() as session:
        assert ledger.states(session, ["a1"], *SHEET)["a1"] is TransactionType.COMPLETED

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


@BOTH_DATABASES
def test_the_claim_reads_each_link_and_records_an_answer_once(engine):
    # The emit's one statement (claim_for_links), on PostgreSQL as the driver's own SQL:
    # a link made by the form's owner or allowed takes the answer, another is refused.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from sheetsync.crypto import Keyring
    from sheetsync.dev.seed import link_sheet, seed_answers, seed_form, seed_user

    sessions = sessionmaker(engine)
    keyring = Keyring([AESGCM.generate_key(bit_length=256)])
    with sessions.begin() as session:
        form = seed_form(session, owner_id="owner", pii=0, keyring=keyring)
        seed_user(session, "stranger", keyring=keyring)
        link_sheet(session, form, "owners-sheet")
        allowed = link_sheet(session, form, "allowed-sheet", create_user_id="stranger").id
        link_sheet(session, form, "refused-sheet", create_user_id="stranger")
        first, second = seed_answers(session, form, 2, keyring=keyring)
    with sessions.begin() as session:
        claimed = ledger.claim_for_links(session, [first], [allowed])
    assert sorted((sheet, state) for _, sheet, _, state in claimed) == [
        ("allowed-sheet", TransactionType.ENQUEUED),
        ("owners-sheet", TransactionType.ENQUEUED),
        ("refused-sheet", TransactionType.VALIDATION_FAILED),
    ]
    with sessions.begin() as session:
        assert ledger.claim_for_links(session, [first], [allowed]) == [
            (first, "refused-sheet", 0, TransactionType.VALIDATION_FAILED)
        ]  # already ENQUEUED where it may go; refused again where it may not
        both = ledger.claim_for_links(session, [first, second], [])
    assert sorted((answer, sheet) for answer, sheet, _, _ in both) == [
        (first, "refused-sheet"),
        (second, "allowed-sheet"),
        (second, "owners-sheet"),
        (second, "refused-sheet"),
    ]

"""The ledger's one rule that every writer relies on: COMPLETED is terminal."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker
from support.databases import BOTH_DATABASES

from sheetsync import ledger
from sheetsync.ledger import claim
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


@BOTH_DATABASES
def test_reopen_takes_back_only_completed_answers_of_the_sheet(engine):
    sessions = sessionmaker(engine)
    with sessions.begin() as session:
        ledger.record(session, ["a1"], *SHEET, TransactionType.COMPLETED)
        ledger.record(session, ["a2"], *SHEET, TransactionType.DEAD_LETTERED)
        ledger.record(session, ["a3"], "other", 0, TransactionType.COMPLETED)
    with sessions.begin() as session:
        reopened = ledger.reopen(session, ["a1", "a2", "a3", "a person's note"], *SHEET)
    assert reopened == ["a1"]
    with sessions() as session:
        assert ledger.states(session, ["a1", "a2"], *SHEET) == {
            "a1": TransactionType.ENQUEUED,
            "a2": TransactionType.DEAD_LETTERED,
        }
        assert ledger.states(session, ["a3"], "other", 0) == {"a3": TransactionType.COMPLETED}


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


@BOTH_DATABASES
def test_the_claims_driver_sql_writes_and_returns_what_the_statement_does(
    engine, db_url, monkeypatch
):
    # The claim exists twice: the statement object (the reference) and the driver's SQL
    # compiled from it (an emit's one answer, on a driver taking named parameters). Both
    # run here on the same inputs, each from the same ledger (rolled back after each):
    # the same rows returned, the same rows left. SQLite's driver takes qmark, so an
    # engine made to take named parameters runs the driver's SQL there.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from sqlalchemy import select

    from sheetsync.crypto import Keyring
    from sheetsync.db import is_postgres, make_engine
    from sheetsync.dev.seed import link_sheet, seed_answers, seed_form, seed_user
    from sheetsync.models import SheetTransaction, utcnow

    sessions = sessionmaker(engine)
    keyring = Keyring([AESGCM.generate_key(bit_length=256)])
    with sessions.begin() as session:
        form = seed_form(session, owner_id="owner", pii=0, keyring=keyring)
        other = seed_form(session, owner_id="owner2", pii=0, keyring=keyring)
        seed_user(session, "stranger", keyring=keyring)
        owners = link_sheet(session, form, "owners-sheet").id
        second = link_sheet(session, form, "owners-sheet", 7).id
        allowed = link_sheet(session, form, "allowed-sheet", create_user_id="stranger").id
        refused = link_sheet(session, form, "refused-sheet", create_user_id="stranger").id
        elsewhere = link_sheet(session, other, "other-sheet").id
        answers = seed_answers(session, form, 5, keyring=keyring)
        [other_answer] = seed_answers(session, other, 1, prefix="other", keyring=keyring)
        # Where each answer stands already: emittable (none, INIT, VALIDATION_FAILED) or not.
        for answer, sheet, gid, state in [
            (answers[1], "owners-sheet", 0, TransactionType.ENQUEUED),
            (answers[1], "refused-sheet", 0, TransactionType.VALIDATION_FAILED),
            (answers[2], "owners-sheet", 0, TransactionType.COMPLETED),
            (answers[2], "owners-sheet", 7, TransactionType.INIT),
            (answers[2], "allowed-sheet", 0, TransactionType.DEAD_LETTERED),
            (answers[3], "allowed-sheet", 0, TransactionType.VALIDATION_FAILED),
            (answers[3], "refused-sheet", 0, TransactionType.FAILED),
        ]:
            ledger.record(session, [answer], sheet, gid, state, "earlier")
    driver_engine = engine if is_postgres(engine) else make_engine(db_url, paramstyle="named")
    link_lists = [[], [allowed], [allowed, refused, elsewhere]]
    only_lists = [None, [], [refused], [owners, second, allowed], [elsewhere]]
    ids = [[a] for a in [*answers, other_answer, "no-such-answer"]]
    ids += [answers[:3], [answers[0], other_answer]]

    def run(on, claim_by, lists):
        started = utcnow()
        with on.connect() as connection, connection.begin() as transaction:
            session = Session(bind=connection)
            returned = sorted(tuple(row) for row in claim_by(session, lists))
            tx = SheetTransaction
            left = sorted(
                (row[0], row[1], row[2], row[3], row[4], row[5] >= started)
                for row in session.execute(
                    select(
                        tx.submission_answer_id,
                        tx.spread_sheet_id,
                        tx.sheet_id,
                        tx.type,
                        tx.error_message,
                        tx.updated_at,
                    )
                )
            )
            transaction.rollback()
        return returned, left

    try:
        compared = 0
        for answer_ids in ids:
            for allowed_ids in link_lists:
                for only_ids in only_lists:
                    lists = {"answer_ids": answer_ids}
                    if allowed_ids:
                        lists["allowed_link_ids"] = allowed_ids
                    if only_ids is not None:
                        lists["only_link_ids"] = only_ids
                    reference = run(engine, claim._claim_by_statement, lists)
                    driver = run(driver_engine, claim._claim_by_driver_sql, lists)
                    assert driver == reference, lists
                    compared += bool(reference[0])
        assert compared > 30  # most inputs write rows: the comparison is not of nothing
    finally:
        if driver_engine is not engine:
            driver_engine.dispose()

    # claim_for_links runs one answer's claim as the driver's SQL where the driver takes
    # named parameters (psycopg), and as the statement otherwise (several answers, qmark).
    calls = []
    for name in ("_claim_by_driver_sql", "_claim_by_statement"):
        real = getattr(claim, name)
        monkeypatch.setattr(
            claim,
            name,
            lambda s, lists, real=real, name=name: calls.append(name) or real(s, lists),
        )
    with sessions.begin() as session:
        ledger.claim_for_links(session, [answers[4]], [])
        ledger.claim_for_links(session, answers[:2], [])
    one = "_claim_by_driver_sql" if is_postgres(engine) else "_claim_by_statement"
    assert calls == [one, "_claim_by_statement"]

"""Dead-letter replays: claimed once under concurrency, replayed on the scheduled queue,
DONE once their last answer lands."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update
from support.waiting import wait_until

from sheetsync import ledger
from sheetsync.deadletters import replay, replay_end, store
from sheetsync.models import (
    CredentialStatus,
    DeadLetter,
    DeadLetterReason,
    DeadLetterStatus,
    GoogleCredential,
    TransactionType,
    utcnow,
)
from sheetsync.redis_keys import BufferKey

SHEETSYNC = str(Path(sys.executable).with_name("sheetsync"))


def park(world, form, sheet, ids, reason=DeadLetterReason.CREDENTIAL, delay_s=0.0):
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    with world.pipeline.sessions.begin() as session:
        entry = store.park(session, key, ids, reason, "test", delay_s=delay_s)
        return entry.id


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_concurrent_dispatchers_claim_each_entry_once(world, db_url):
    pipeline = world.pipeline
    form = world.form()
    sheets = [world.sheet(form, f"T{n}") for n in range(30)]
    ids = world.answers(form, 2)
    for sheet in sheets:
        park(world, form, sheet, ids)
        park(world, form, sheet, ids, reason=DeadLetterReason.TRANSIENT_EXHAUSTED)
    claimed: list[int] = []
    lock = threading.Lock()

    def dispatcher() -> None:
        while True:
            got = replay.claim_due(pipeline.sessions, limit=7)
            if not got:
                return
            with lock:
                claimed.extend(got)

    threads = [threading.Thread(target=dispatcher) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claimed) == 60 and len(set(claimed)) == 60
    assert {e.status for e in world.dead_letters()} == {DeadLetterStatus.REPLAYING}


def test_beat_dispatch_replays_on_the_scheduled_queue(world, worker, admin):
    from celery.signals import task_postrun

    runs = []

    def record(task=None, **_):
        runs.append((task.name, (task.request.delivery_info or {}).get("routing_key")))

    task_postrun.connect(record, weak=False)
    try:
        form = world.form()
        sheet = world.sheet(form)
        ids = world.answers(form, 3)
        park(world, form, sheet, ids)
        from sheetsync.celery.tasks import dispatch_dead_letters

        dispatch_dead_letters.delay()
        wait_until(lambda: world.ids_in(sheet) == ids)
        # The next beat sees every id settled: the entry is DONE.
        wait_until(
            lambda: (
                world.complete_replays() and world.dead_letters()[0].status is DeadLetterStatus.DONE
            )
        )
    finally:
        task_postrun.disconnect(record)
    assert ("sheetsync.dispatch_dead_letters", "sheetsync_scheduled") in runs
    assert ("sheetsync.replay_dead_letter", "sheetsync_scheduled") in runs
    assert world.ledger_counts() == {"COMPLETED": 3}


def test_replay_with_a_credential_google_still_refuses_waits_seven_more_days(
    world, worker, admin, alerts
):
    """The owner's credential is VALID in the database but Google refuses it: the ids go
    back to their buffer, the flush parks them in the same entry again (one attempt
    more, 7 days), marks the credential INVALID and alerts."""
    pipeline = world.pipeline
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    entry_id = park(world, form, sheet, ids)
    admin.revoke(f"google-{form.owner_id}")
    [claimed] = replay.claim_due(pipeline.sessions)
    result = replay.replay(pipeline, claimed)
    assert result.requeued == 3
    wait_until(lambda: world.dead_letters()[0].status is DeadLetterStatus.PENDING)
    [entry] = world.dead_letters()
    assert entry.id == entry_id and entry.attempts == 1
    assert entry.next_attempt_at - utcnow() > timedelta(days=6.9)
    assert world.ids_of(entry) == sorted(ids)
    with pipeline.sessions() as session:
        assert session.get(GoogleCredential, form.owner_id).status is CredentialStatus.INVALID
    # The alert follows the ledger's commit: wait for it too.
    wait_until(lambda: any(text.startswith("[sheetsync] CREDENTIAL") for text in alerts.texts))
    assert world.ids_in(sheet) == []


def test_replay_waits_while_the_owner_has_not_reconnected(world, pipeline):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 2)
    entry_id = park(world, form, sheet, ids)
    with pipeline.sessions.begin() as session:
        session.get(GoogleCredential, form.owner_id).status = CredentialStatus.INVALID
    [claimed] = replay.claim_due(pipeline.sessions)
    result = replay.replay(pipeline, claimed)
    assert result.requeued == 0 and "still INVALID" in result.summary
    [entry] = world.dead_letters()
    assert entry.id == entry_id and entry.status is DeadLetterStatus.PENDING
    assert entry.attempts == 1
    assert entry.next_attempt_at - utcnow() > timedelta(days=6.9)
    assert world.ledger_counts() == {"DEAD_LETTERED": 2}


def test_replay_into_a_deleted_spreadsheet_fails_permanently(world, worker, admin, alerts):
    pipeline = world.pipeline
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    park(world, form, sheet, ids, reason=DeadLetterReason.TRANSIENT_EXHAUSTED)
    admin.delete_spreadsheet(sheet.spreadsheet_id)
    with pipeline.sessions.begin() as session:
        session.execute(update(DeadLetter).values(next_attempt_at=utcnow()))
    [claimed] = replay.claim_due(pipeline.sessions)
    replay.replay(pipeline, claimed)
    wait_until(lambda: world.ledger_counts() == {"FAILED": 3})
    # The flush that parked them FAILED (settled for the replay) completed it: no beat.
    wait_until(lambda: world.dead_letters()[0].status is DeadLetterStatus.DONE)
    replayed, permanent = world.dead_letters()
    assert replayed.id == claimed
    assert replayed.status is DeadLetterStatus.DONE
    assert (permanent.reason, permanent.status) == (
        DeadLetterReason.PERMANENT,
        DeadLetterStatus.FAILED,
    )
    assert world.ids_of(permanent) == sorted(ids)
    wait_until(lambda: any(text.startswith("[sheetsync] PERMANENT") for text in alerts.texts))


def test_a_replay_is_done_when_its_last_answer_lands_without_beat(world, worker, pipeline_env):
    """`sheetsync dlq replay --user` with workers and no beat: the flush run that lands
    the entry's last answers marks it DONE (it used to stay REPLAYING until beat)."""
    env = pipeline_env()
    form = world.form("owner_d")
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    park(world, form, sheet, ids)
    result = subprocess.run(
        [SHEETSYNC, "dlq", "replay", "--user", "owner_d"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    wait_until(lambda: world.dead_letters()[0].status is DeadLetterStatus.DONE, timeout=30)
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 5}


def test_a_replay_with_every_answer_in_the_sheet_is_done_at_once(world):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    entry_id = park(world, form, sheet, ids)
    with world.pipeline.sessions.begin() as session:
        ledger.record(session, ids, sheet.spreadsheet_id, sheet.gid, TransactionType.COMPLETED)
    assert replay.claim_due(world.pipeline.sessions) == [entry_id]
    result = replay.replay(world.pipeline, entry_id)
    assert (result.requeued, result.key) == (0, None)
    assert world.dead_letters()[0].status is DeadLetterStatus.DONE
    assert not world.leftover_keys()  # nothing pushed


def test_completing_a_sheets_replays_waits_for_every_id_and_leaves_others(world):
    """A flush completes the replays of its own sheet only, once no id of an entry is
    ENQUEUED (whichever buffer its ids went through), and never an entry claimed anew."""
    form = world.form()
    sheet, other = world.sheet(form, "A"), world.sheet(form, "B")
    ids = world.answers(form, 4)
    first = park(world, form, sheet, ids)
    second = park(world, form, other, ids)
    sessions = world.pipeline.sessions
    assert sorted(replay.claim_due(sessions)) == sorted([first, second])
    for entry_id in (first, second):
        replay.replay(world.pipeline, entry_id)  # ids ENQUEUED, entries requeued

    def settle(target, chosen):
        with sessions.begin() as session:
            ledger.record(
                session, chosen, target.spreadsheet_id, target.gid, TransactionType.COMPLETED
            )

    def status(entry_id):
        with sessions() as session:
            return session.get(DeadLetter, entry_id).status

    settle(sheet, ids[:2])  # one run settled part of the entry
    assert replay_end.complete_replays(sessions, sheet=(sheet.spreadsheet_id, sheet.gid)) == []
    settle(sheet, ids[2:])  # another run (another buffer) the rest
    settle(other, ids)
    assert replay_end.complete_replays(sessions, sheet=(sheet.spreadsheet_id, sheet.gid)) == [first]
    assert (status(first), status(second)) == (DeadLetterStatus.DONE, DeadLetterStatus.REPLAYING)

    # Claimed anew before the completion: it waits for its own requeue.
    with sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id == second)
            .values(updated_at=utcnow() - timedelta(hours=1))
        )
    assert replay.claim_due(sessions) == [second]
    assert replay_end.complete_replays(sessions, sheet=(other.spreadsheet_id, other.gid)) == []
    assert status(second) is DeadLetterStatus.REPLAYING

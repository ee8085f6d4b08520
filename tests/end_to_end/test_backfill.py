"""Backfill on real worker processes, Redis and the emulator: a form's existing answers
land once, alongside an answer emitted meanwhile and live answers of another form."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import datetime

import pytest
from sqlalchemy import select
from support.waiting import wait_until

from sheetsync import backfill, emit_answer_submitted, emit_answers_submitted
from sheetsync.dev.seed import DEFAULT_ANSWER_SPACING, DEFAULT_FIRST_SUBMITTED_AT
from sheetsync.emit.backfill import BackfillProgress
from sheetsync.errors import NotFoundError, ValidationError
from sheetsync.models import SpreadSheet

#: Existing answers of the backfilled form.
EXISTING = 20_000
FLUSH_DELAY_S = 0.5
#: The promise for live answers while a backfill runs.
LIVE_BOUND_S = FLUSH_DELAY_S + 2


@pytest.mark.slow
@pytest.mark.timing
def test_backfill_lands_every_existing_answer_once_without_starving_live_answers(
    world, worker_processes, pipeline_env
):
    env = {
        "flush_delay_s": FLUSH_DELAY_S,
        "batch_size": 1000,
        "flush_threshold": 500,
        "backfill_chunk": 1000,
        "backfill_ahead": 4000,
        "backfill_stall_s": 60,
    }
    worker_processes(**env).start(1, concurrency=2)
    big = world.form("owner1", steps=1, questions_per_step=3, pii=1, jumbotrons=0)
    world.answers(big, EXISTING, prefix="old")
    already = world.answers(big, 50, prefix="early", start=EXISTING + 1)
    live_form = world.form("owner2", steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    live_sheet = world.sheet(live_form)

    # A link made earlier, which already has a few answers; then the new link. (The
    # two flushes also start both worker children: a cold start is not starvation.)
    old_sheet = world.sheet(big, "Old link")
    warm_up = world.answers(live_form, 1, prefix="warm")
    emit_answers_submitted(already)
    emit_answers_submitted(warm_up)
    wait_until(lambda: len(world.ids_in(old_sheet)) == len(already))
    wait_until(lambda: world.ids_in(live_sheet) == warm_up)
    new_sheet = world.sheet(big, "New link")

    seen: list[BackfillProgress] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            backfill(big.submission_id, on_progress=seen.append)
        except BaseException as exc:  # reported by the test thread
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    during = world.answers(big, 1, prefix="during", start=1)
    emit_answer_submitted(during[0])
    latencies = _live_answers_while(world, live_form, live_sheet, thread)
    thread.join(timeout=120)
    assert not thread.is_alive() and not failure, failure

    everything = [*(f"old_{n}" for n in range(1, EXISTING + 1)), *already, *during]
    wait_until(lambda: len(world.ids_in(new_sheet)) >= len(everything), timeout=30)
    wait_until(lambda: len(world.ids_in(old_sheet)) >= len(everything), timeout=30)
    for sheet in (new_sheet, old_sheet):
        landed = Counter(world.ids_in(sheet))
        assert set(landed) == set(everything)
        assert max(landed.values()) == 1
    # The backfill sent the new link everything but the answer emitted live; the old
    # link only what it lacked.
    # The live answer went with the emit or with the backfill, whichever claimed it.
    final = seen[-1]
    assert final.done and 2 * (EXISTING + len(already)) <= final.read <= 2 * len(everything)
    assert 2 * EXISTING + len(already) <= final.sent <= 2 * EXISTING + len(already) + 2
    assert final.drained == final.sent
    assert world.ledger_counts() == {"COMPLETED": 2 * len(everything) + 1 + len(latencies)}
    assert len(latencies) >= 3
    assert max(latencies) <= LIVE_BOUND_S, latencies


def _live_answers_while(world, form, sheet, thread: threading.Thread) -> list[float]:
    """Emit one answer of ``form`` at a time while ``thread`` runs; each one's time to
    reach the sheet."""
    latencies: list[float] = []
    number = 0
    while thread.is_alive() or len(latencies) < 3:
        number += 1
        [answer_id] = world.answers(form, 1, prefix="live", start=number)
        emitted = time.monotonic()
        emit_answer_submitted(answer_id)
        wait_until(lambda: answer_id in world.ids_in(sheet), timeout=LIVE_BOUND_S + 5, interval=0.1)
        latencies.append(time.monotonic() - emitted)
    return latencies


def test_backfill_to_one_link_since_a_date_and_a_second_run_sends_nothing(world, worker):
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    answers = world.answers(form, 30)
    other = world.sheet(form, "Other")
    sheet = world.sheet(form)
    link_id = _link_of(world, sheet)
    since = DEFAULT_FIRST_SUBMITTED_AT + DEFAULT_ANSWER_SPACING * 10  # answers 11 onwards
    result = backfill(form.submission_id, link_id=link_id, since=since)
    assert (result.read, result.sent) == (20, 20)
    assert world.ids_in(sheet) == answers[10:]
    assert world.ids_in(other) == []

    again = backfill(form.submission_id, link_id=link_id)
    assert (again.read, again.sent) == (30, 10)
    wait_until(lambda: len(world.ids_in(sheet)) == 30)
    assert sorted(world.ids_in(sheet)) == sorted(answers)


def _link_of(world, sheet) -> int:
    with world.pipeline.sessions() as session:
        return session.scalars(
            select(SpreadSheet.id).where(
                SpreadSheet.spread_sheet_id == sheet.spreadsheet_id,
                SpreadSheet.sheet_id == sheet.gid,
            )
        ).one()


def test_backfill_names_what_does_not_exist(world):
    form = world.form()
    with pytest.raises(NotFoundError, match="form nope does not exist"):
        backfill("nope")
    with pytest.raises(NotFoundError, match="link 999 is not a link of form"):
        backfill(form.submission_id, link_id=999)
    with pytest.raises(ValidationError, match="aware datetime"):
        backfill(form.submission_id, since=datetime(2026, 1, 1))


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_backfill_never_holds_the_answers_table_on_postgres(world, worker_processes, engine):
    """A web app's migration (an ACCESS EXCLUSIVE lock) gets the answers table within
    moments, again and again, while a backfill reads it: no transaction stays open."""
    worker_processes(backfill_chunk=200, backfill_ahead=1000, batch_size=500).start(1)
    form = world.form(steps=1, questions_per_step=2, pii=0, jumbotrons=0)
    answers = world.answers(form, 5000)
    sheet = world.sheet(form)
    waits: list[float] = []
    failures: list[BaseException] = []
    done = threading.Event()

    def lock_again_and_again() -> None:
        while not done.is_set():
            try:
                with engine.connect() as connection:
                    connection.exec_driver_sql("SET lock_timeout = '1s'")
                    started = time.monotonic()
                    connection.exec_driver_sql(
                        "LOCK TABLE submission_answer IN ACCESS EXCLUSIVE MODE"
                    )
                    waits.append(time.monotonic() - started)
                    connection.commit()
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)
                return
            time.sleep(0.02)

    locker = threading.Thread(target=lock_again_and_again)
    locker.start()
    try:
        result = backfill(form.submission_id)
    finally:
        done.set()
        locker.join()
    assert not failures, failures
    assert result.sent == len(answers)
    assert len(waits) >= 10 and max(waits) < 1.0, (len(waits), max(waits))
    assert sorted(world.ids_in(sheet)) == sorted(answers)

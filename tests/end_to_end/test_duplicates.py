"""Nothing twice: re-emits, duplicate links, second deliveries and Redis losing an intent."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.recovery import repair
from sheetsync.redis_keys import BufferKey


class Crash(Exception):
    """Stands for the process dying at this point."""


def test_emitting_an_answer_again_does_not_append_it_again(world, worker):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: world.ids_in(sheet) == ids and not world.leftover_keys())
    for answer_id in ids:  # a web retry, a double submit
        result = emit_answer_submitted(answer_id)
        assert result.enqueued == ()
    wait_until(lambda: not world.leftover_keys())
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 3}


def test_a_second_link_to_the_same_sheet_is_refused(world):
    from sheetsync.dev.seed import link_sheet

    form = world.form()
    sheet = world.sheet(form)
    with pytest.raises(IntegrityError), world.pipeline.sessions.begin() as session:
        link_sheet(session, form, sheet.spreadsheet_id, sheet.gid)


@pytest.mark.slow  # 7-8 s of the whole stack: make test runs it, test-fast does not
def test_a_second_delivery_after_the_lease_expired_appends_nothing_twice(
    world, worker_processes, admin
):
    """A run stalls in an append past its lease; the same token is delivered again.
    The second delivery fences the first (a new epoch), the first gives its request up
    before its lease ends, and whoever reads the sheet next waits until that append can
    no longer land: every row once."""
    from sheetsync.celery import app as celery_app

    workers = worker_processes(lease_s=2, google_timeout_s=3, flush_delay_s=0.2, retry_base_s=0.1)
    workers.start(2)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 20)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    admin.add_fault("values.append", 1, "hang", seconds=2.5)  # commits after the lease
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: admin.stats()["faults_fired"], timeout=30)
    token = world.pipeline.store.job_state(key)["token"]
    # The broker delivers the same task again once the first run's lease has expired.
    celery_app.send_task(
        "sheetsync.flush", args=[token], task_id=token, queue="sheetsync_priority", countdown=2.2
    )
    wait_until(lambda: world.ledger_counts() == {"COMPLETED": 20}, timeout=60)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert sorted(world.ids_in(sheet)) == sorted(ids)
    assert len(world.ids_in(sheet)) == 20


@pytest.mark.slow  # 7-8 s of the whole stack: make test runs it, test-fast does not
def test_redis_losing_the_intent_around_an_append_appends_nothing_twice(
    world, pipeline_env, monkeypatch
):
    """The append lands, the run dies before COMPLETED, Redis loses everything."""
    import redis as redis_lib
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES
    from sheetsync.flush.run import FlushRun

    pipeline_env(flush_delay_s=0.2)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 10)
    fired = []
    original = FlushRun.settle

    def crash(run, batch, *args, **kwargs):
        if batch.rows and not fired:
            fired.append(True)
            raise Crash("the process dies here")
        return original(run, batch, *args, **kwargs)

    monkeypatch.setattr(FlushRun, "settle", crash)
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        for answer_id in ids:
            emit_answer_submitted(answer_id)
        wait_until(lambda: fired)
        wait_until(lambda: world.ids_in(sheet) == ids)  # the append landed
    world.pipeline.redis.flushdb()
    redis_lib.Redis.from_url(world.pipeline.settings.celery_broker_url).flushdb()
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):

        def repaired():  # what beat does, every few seconds
            repair.reconcile(world.pipeline)
            repair.sweep(world.pipeline)
            return world.ledger_counts() == {"COMPLETED": 10}

        wait_until(repaired, timeout=30, interval=0.5)
        wait_until(lambda: not world.leftover_keys())
    assert world.ids_in(sheet) == ids

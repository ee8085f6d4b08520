"""A crash at every step boundary of an emit or a flush: every answer lands exactly once."""

from __future__ import annotations

import pytest
from support.crashes import crash_once
from support.waiting import wait_until

from sheetsync import emit_answer_submitted, emit_answers_submitted
from sheetsync.buffers.store import BufferStore
from sheetsync.flush.run import FlushRun
from sheetsync.recovery import repair
from sheetsync.redis_keys import BufferKey


def open_intents(pipeline):
    from sheetsync.flush import intents

    with pipeline.sessions() as session:
        return intents.all_open(session)


def sweep_until(world, pipeline, sheet, ids, timeout=30):
    """Run the real sweeper (as beat would) until the sheet holds ``ids`` and the
    buffer, its job and its intent are gone."""

    def done():
        repair.sweep(pipeline)
        return world.ids_in(sheet) == ids and not world.leftover_keys()

    wait_until(done, timeout=timeout, interval=0.25)


@pytest.fixture
def scene(world, pipeline_env):
    pipeline_env(lease_s=1.5, sweep_grace_s=0.5)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 30)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    return form, sheet, ids, key


def test_crash_between_enqueue_script_and_apply_async(scene, world, worker, monkeypatch):
    from sheetsync.services import get_services

    _, sheet, ids, key = scene
    # The process dies before it sends the task.
    monkeypatch.setattr("sheetsync.buffers.push.send_tasks", lambda store, tasks: None)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    pipeline = get_services()
    assert pipeline.store.job_state(key)["state"] == "scheduled"
    sweep_until(world, pipeline, sheet, ids)
    wait_until(lambda: not world.leftover_keys())


def test_crash_after_append_before_completed(scene, world, worker, monkeypatch):
    from sheetsync.services import get_services

    _, sheet, ids, _ = scene
    fired = crash_once(monkeypatch, FlushRun, "settle", when=lambda run, batch, *a, **k: batch.rows)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    pipeline = get_services()
    wait_until(lambda: fired)
    sweep_until(world, pipeline, sheet, ids)
    wait_until(lambda: not world.leftover_keys())
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 30}


def test_append_committed_but_response_dropped(scene, world, worker, admin):
    _, sheet, ids, _ = scene
    admin.add_fault("values.append", 1, "drop")
    emit_answers_submitted(ids)
    wait_until(lambda: not world.leftover_keys())
    assert world.ids_in(sheet) == ids
    stats = admin.stats()
    assert stats["requests"]["by_kind"]["values.append"] == 1  # recovery read, no re-append
    assert world.ledger_counts() == {"COMPLETED": 30}


def test_crash_after_completed_before_ltrim(scene, world, worker, monkeypatch, admin):
    from sheetsync.services import get_services

    _, sheet, ids, _ = scene
    fired = crash_once(
        monkeypatch, BufferStore, "trim", when=lambda store, key, lease, count, last: count > 0
    )
    emit_answers_submitted(ids)
    pipeline = get_services()
    wait_until(lambda: fired)
    sweep_until(world, pipeline, sheet, ids)
    wait_until(lambda: not world.leftover_keys())
    assert world.ids_in(sheet) == ids
    assert admin.stats()["requests"]["by_kind"]["values.append"] == 1


@pytest.mark.slow  # 7-8 s of the whole stack: make test runs it, test-fast does not
def test_worker_killed_mid_flush(world, pipeline_env, worker_processes, admin):
    from sheetsync.services import get_services

    workers = worker_processes(lease_s=2, sweep_grace_s=0.5)
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 40)
    [proc] = workers.start(1)
    admin.add_fault("values.append", 1, "hang", seconds=1.0)  # committed after the hang

    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: open_intents(pipeline), timeout=30)
    workers.kill_children(proc)  # SIGKILL the pool process mid-append

    sweep_until(world, pipeline, sheet, ids, timeout=60)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 40}


def test_redis_loss_is_repaired_by_the_reconciler(world, pipeline_env, admin):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES
    from sheetsync.services import get_services

    pipeline_env(flush_delay_s=2)
    pipeline = get_services()
    form = world.form()
    sheets = [world.sheet(form, title=f"T{n}") for n in range(2)]
    ids = world.answers(form, 50)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    import redis as redis_lib

    pipeline.redis.flushdb()
    redis_lib.Redis.from_url(pipeline.settings.celery_broker_url).flushdb()

    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        report = repair.reconcile(pipeline)
        assert report.answers == 100 and report.buffers == 2
        for sheet in sheets:
            wait_until(lambda sheet=sheet: world.ids_in(sheet) == ids)
        wait_until(lambda: not world.leftover_keys())
    assert world.ledger_counts() == {"COMPLETED": 100}


def test_reconciler_restores_ids_lost_from_a_busy_buffer(world, pipeline_env, admin):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES
    from sheetsync.services import get_services

    pipeline_env(flush_delay_s=1)
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 10)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    for lost in ids[2:5]:
        pipeline.redis.lrem(key.buf, 0, lost)

    report = repair.reconcile(pipeline)
    assert report.answers == 3  # only the lost ones, though the buffer is busy
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        wait_until(lambda: sorted(world.ids_in(sheet)) == sorted(ids))
        wait_until(lambda: not world.leftover_keys())
    assert world.ledger_counts() == {"COMPLETED": 10}


def test_reconciler_revives_a_list_whose_job_and_index_entry_were_lost(world, pipeline_env):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES
    from sheetsync.redis_keys import BUFFER_INDEX
    from sheetsync.services import get_services

    pipeline_env(flush_delay_s=1)
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    for answer_id in ids[:3]:
        emit_answer_submitted(answer_id)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    pipeline.redis.delete(key.job, BUFFER_INDEX)  # lost; the list survived
    for answer_id in ids[3:]:
        emit_answer_submitted(answer_id)  # a non-empty list makes no new job
    assert not pipeline.redis.exists(key.job)

    repair.reconcile(pipeline)
    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        wait_until(lambda: world.ids_in(sheet) == ids)
        wait_until(lambda: not world.leftover_keys())

"""A worker told to stop (SIGTERM: Celery's warm shutdown) ends each run after its current
batch and hands the rest of the buffer to a new task at once; what it reserved but did not
start goes back to the broker."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import redis
from celery.signals import worker_shutting_down
from support.redis_dbs import broker_url_for
from support.waiting import wait_until

from sheetsync import emit_answers_submitted
from sheetsync.celery.shutdown import grace_period_s
from sheetsync.dev.local import WORKER_READY_MARKER
from sheetsync.dispatch import QUEUE_SCHEDULED
from sheetsync.flush import intents, stopping
from sheetsync.redis_keys import BufferKey
from sheetsync.settings import get_settings

BATCH = 10


@pytest.fixture
def not_stopping():
    stopping.clear()
    yield
    stopping.clear()


def queued_ids(broker: redis.Redis, queue: str) -> list[tuple[str, object]]:
    """(task id, eta) of each message waiting in ``queue``."""
    messages = [json.loads(raw) for raw in broker.lrange(queue, 0, -1)]
    return [(m["headers"]["id"], m["headers"].get("eta")) for m in messages]


def test_a_stopping_run_ends_after_its_batch_and_hands_the_rest_on_at_once(
    world, pipeline_env, admin, redis_url, not_stopping
):
    from sheetsync.celery.tasks import flush_buffer
    from sheetsync.services import get_services

    # The first append hangs long enough for the test to see it, well within the timeout.
    pipeline_env(batch_size=BATCH, flush_threshold=BATCH, google_timeout_s=6, lease_s=12)
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 3 * BATCH)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    emit_answers_submitted(ids)  # no worker: the first task waits in the broker
    first = pipeline.store.job_state(key)["token"]
    admin.add_fault("values.append", 1, "hang", seconds=2.5)  # committed after the hang

    def open_intents() -> list[object]:
        with pipeline.sessions() as session:
            return list(intents.open_for(session, key))

    def sigterm_during_the_first_append() -> None:
        wait_until(open_intents, timeout=30)
        # What Celery's SIGTERM handler sends in the worker's main process.
        worker_shutting_down.send(sender="test@host", sig="SIGTERM", how="Warm", exitcode=0)

    signaller = threading.Thread(target=sigterm_during_the_first_append)
    signaller.start()
    summary = flush_buffer(first)
    signaller.join()

    assert summary.startswith("again: appended 10,"), summary
    assert world.ids_in(sheet) == ids[:BATCH]
    assert world.ledger_counts() == {"COMPLETED": BATCH, "ENQUEUED": 2 * BATCH}
    job = pipeline.store.job_state(key)
    assert job["state"] == "scheduled" and job["token"] != first
    assert "lease_until" not in job  # handed on now, no lease left to expire
    assert int(job["due_at"]) <= pipeline.store.redis_now_ms()
    broker = redis.Redis.from_url(broker_url_for(redis_url))
    assert (job["token"], None) in queued_ids(broker, job["queue"])  # sent, no countdown

    stopping.clear()  # another worker takes the buffer
    while job := pipeline.store.job_state(key):
        flush_buffer(job["token"])
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 3 * BATCH}
    assert not world.leftover_keys()


def test_a_run_that_starts_on_a_stopping_worker_hands_its_buffer_on(
    world, pipeline_env, admin, not_stopping
):
    from sheetsync.celery.tasks import flush_buffer
    from sheetsync.services import get_services

    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    emit_answers_submitted(ids)
    first = pipeline.store.job_state(key)["token"]
    stopping.request()

    assert flush_buffer(first).startswith("again: appended 0,")
    assert admin.stats()["requests"]["total"] == 0
    job = pipeline.store.job_state(key)
    assert job["state"] == "scheduled" and job["token"] != first
    assert world.ledger_counts() == {"ENQUEUED": 5}


@pytest.mark.timing  # its exit within the grace period
def test_reserved_messages_go_back_to_the_broker_on_sigterm(worker_processes, redis_url):
    from sheetsync.celery import app

    workers = worker_processes()
    [proc] = workers.start(1, concurrency=2)
    broker = redis.Redis.from_url(broker_url_for(redis_url))
    # A countdown the worker holds unacknowledged (acks late) until it is due.
    app.send_task("sheetsync.sweep", countdown=0.8 * get_settings().visibility_timeout_s)
    wait_until(lambda: not broker.llen(QUEUE_SCHEDULED) and broker.hlen("unacked"), timeout=60)

    os.kill(proc.pid, signal.SIGTERM)  # the main process alone, as Kubernetes does
    told = time.monotonic()
    proc.wait(timeout=60)
    took = time.monotonic() - told

    assert proc.returncode == 0
    assert took <= grace_period_s(get_settings())
    assert broker.llen(QUEUE_SCHEDULED) == 1
    assert not broker.hlen("unacked")


@pytest.mark.timing  # its exit within the grace period
@pytest.mark.parametrize(
    ("pool", "banner"),
    [("prefork", "(pool)"), ("threads", "(thread)"), ("solo", "(solo)")],
    ids=["prefork", "threads", "solo"],
)
def test_every_pool_ends_its_runs_after_the_current_batch(
    world, worker_processes, admin, redis_url, pool, banner
):
    from sheetsync.services import get_services

    workers = worker_processes(
        batch_size=BATCH, flush_threshold=BATCH, google_timeout_s=6, lease_s=12
    )
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5 * BATCH)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    [proc] = workers.start(1, concurrency=2, extra_args=("-P", pool))
    wait_until(lambda: WORKER_READY_MARKER in (workers.log_dir / "worker0.log").read_bytes(), 60)
    # The banner's concurrency line names the pool's module (sheetsync's for prefork).
    assert f"concurrency: 2 {banner}" in workers.logs()
    admin.add_fault("values.append", 1, "hang", seconds=2.5)  # committed after the hang
    emit_answers_submitted(ids)

    def open_intents() -> list[object]:
        with pipeline.sessions() as session:
            return list(intents.open_for(session, key))

    wait_until(open_intents, timeout=30)
    os.kill(proc.pid, signal.SIGTERM)  # during the first append
    told = time.monotonic()
    proc.wait(timeout=60)
    took = time.monotonic() - told

    assert proc.returncode == 0
    assert took <= grace_period_s(get_settings())
    assert "handing the buffer on after 1 batches" in workers.logs()
    assert world.ledger_counts() == {"COMPLETED": BATCH, "ENQUEUED": 4 * BATCH}
    job = pipeline.store.job_state(key)
    broker = redis.Redis.from_url(broker_url_for(redis_url))
    assert job["token"] in [task_id for task_id, _ in queued_ids(broker, job["queue"])]

    workers.start(1)  # another worker takes the buffer
    wait_until(lambda: not world.leftover_keys(), timeout=60)
    assert world.ids_in(sheet) == ids
    assert world.ledger_counts() == {"COMPLETED": 5 * BATCH}

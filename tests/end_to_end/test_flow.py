"""End to end on real Redis, a real worker and the emulator: debounce, promotion, tiers."""

from __future__ import annotations

import time

import pytest
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import Plan


def test_one_emit_lands_once_after_the_delay(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)

    started = time.monotonic()
    result = emit_answer_submitted(answer_id)
    assert result.pushed and len(result.enqueued) == 1

    wait_until(lambda: world.ids_in(sheet) == [answer_id])
    elapsed = time.monotonic() - started
    assert elapsed >= 0.5  # FLUSH_DELAY_S in tests
    rows = world.rows(sheet)
    assert rows[0][:3] == ["Answer ID", "Submitter", "Submitted at"]
    assert len(rows) == 2
    wait_until(lambda: not world.leftover_keys())
    assert world.ledger_counts() == {"COMPLETED": 1}


@pytest.fixture
def task_log():
    """(task name, task id, queue, return value) of every task the in-process worker ran."""
    from celery.signals import task_postrun

    runs: list[tuple[str, str, str, object]] = []

    def record(sender=None, task_id=None, task=None, retval=None, **_):
        queue = (task.request.delivery_info or {}).get("routing_key", "")
        runs.append((task.name, task_id, queue, retval))

    task_postrun.connect(record, weak=False)
    yield runs
    task_postrun.disconnect(record)


def flushes(task_log):
    return [run for run in task_log if run[0] == "sheetsync.flush.run"]


def test_second_emit_inside_the_window_joins_the_same_flush(world, worker, admin, task_log):
    form = world.form()
    sheet = world.sheet(form)
    first, second = world.answers(form, 2)

    emit_answer_submitted(first)
    emit_answer_submitted(second)

    wait_until(lambda: world.ids_in(sheet) == [first, second])
    wait_until(lambda: not world.leftover_keys())
    wait_until(lambda: flushes(task_log))  # the postrun signal follows the task's return
    runs = flushes(task_log)
    assert len(runs) == 1, runs
    assert str(runs[0][3]).startswith("done: appended 2")
    assert admin.stats()["requests"]["by_kind"]["values.append"] == 1


@pytest.mark.timing
def test_promotion_at_threshold_replaces_the_delayed_task(world, pipeline_env, admin, task_log):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES
    from sheetsync.flush.entry import flush
    from sheetsync.redis_keys import BufferKey
    from sheetsync.services import get_services

    pipeline_env(flush_delay_s=30, flush_threshold=20)
    pipeline = get_services()
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 20)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)

    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        emit_answer_submitted(ids[0])
        delayed_token = pipeline.store.job_state(key)["token"]
        started = time.monotonic()
        for answer_id in ids[1:]:
            emit_answer_submitted(answer_id)
        assert pipeline.store.job_state(key)["token"] != delayed_token
        wait_until(lambda: world.ids_in(sheet) == ids, timeout=10)
        assert time.monotonic() - started < 5  # far below the 30 s delay
        wait_until(lambda: not world.leftover_keys())

    # The delayed task, if it still fires, is a no-op.
    assert flush(pipeline, delayed_token).status == "superseded"
    assert world.ids_in(sheet) == ids
    assert [r[1] for r in flushes(task_log)] != [] and delayed_token not in [
        r[1] for r in flushes(task_log) if str(r[3]).startswith("done")
    ]


def test_tiers_route_pro_to_priority_and_free_to_default(world, worker, task_log):
    pro = world.form("pro_owner", plan=Plan.PRO)
    free = world.form("free_owner", plan=Plan.FREE)
    pro_sheet, free_sheet = world.sheet(pro), world.sheet(free)
    [pro_answer] = world.answers(pro, 1, prefix="pro")
    [free_answer] = world.answers(free, 1, prefix="free")

    emit_answer_submitted(pro_answer)
    emit_answer_submitted(free_answer)
    wait_until(lambda: world.ids_in(pro_sheet) == [pro_answer])
    wait_until(lambda: world.ids_in(free_sheet) == [free_answer])

    from sheetsync.redis_keys import token_buffer

    def queues() -> dict[str, str]:
        return {token_buffer(run[1]).user_id: run[2] for run in flushes(task_log)}

    # Rows show in the sheet before the task returns and its postrun signal fires.
    wait_until(lambda: len(queues()) == 2)
    assert queues() == {"pro_owner": "sheetsync_priority", "free_owner": "sheetsync_default"}


def test_an_answer_linked_to_three_sheets_lands_in_all_three(world, worker):
    form = world.form()
    sheets = [world.sheet(form, title=f"Tab{n}") for n in range(3)]
    ids = world.answers(form, 5)

    for answer_id in ids:
        result = emit_answer_submitted(answer_id)
        assert len(result.enqueued) == 3

    for sheet in sheets:
        wait_until(lambda sheet=sheet: world.ids_in(sheet) == ids)
    wait_until(lambda: not world.leftover_keys())
    assert world.ledger_counts() == {"COMPLETED": 15}

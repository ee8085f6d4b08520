"""No Celery countdown may reach the broker's visibility timeout (docs/ARCHITECTURE.md,
"Failures and dead letters")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.errors import ConfigError
from sheetsync.models import DeadLetterStatus


@pytest.fixture
def published():
    """(task name, seconds until its eta) of every task message sent."""
    from celery.signals import before_task_publish

    sent: list[tuple[str, float]] = []

    def record(sender=None, headers=None, **_):
        eta = (headers or {}).get("eta")
        delay = 0.0
        if eta:
            delay = (datetime.fromisoformat(eta) - datetime.now(UTC)).total_seconds()
        sent.append((sender, delay))

    before_task_publish.connect(record, weak=False)
    yield sent
    before_task_publish.disconnect(record)


def test_a_long_countdown_is_refused(pipeline_env):
    from sheetsync.celery.dispatcher import checked_countdown

    pipeline_env(visibility_timeout_s=3600)
    assert checked_countdown(30) == 30
    with pytest.raises(ConfigError, match="visibility timeout"):
        checked_countdown(7 * 86400)


def test_rate_limits_retries_and_dead_letters_stay_below_the_visibility_timeout(
    world, pipeline_env, admin, published
):
    from celery.contrib.testing.worker import start_worker

    from sheetsync.celery import app as celery_app
    from sheetsync.dispatch import QUEUES

    visibility = 20.0
    pipeline_env(
        visibility_timeout_s=visibility,
        rate_limit_per_account=2,
        rate_window_s=1.5,
        rate_margin_s=0.05,
        batch_size=5,
    )
    form = world.form()
    sheet = world.sheet(form)
    flaky_form = world.form("flaky")
    world.sheet(flaky_form)
    ids = world.answers(form, 20)
    flaky_ids = world.answers(flaky_form, 3, prefix="flaky")
    admin.add_fault("values.append", 6, "error", status=500, account="google-flaky")

    with start_worker(celery_app, pool="solo", perform_ping_check=False, queues=list(QUEUES)):
        for answer_id in ids + flaky_ids:
            emit_answer_submitted(answer_id)
        wait_until(lambda: world.ids_in(sheet) == ids, timeout=60)
        wait_until(world.dead_letters, timeout=60)
        wait_until(lambda: not world.leftover_keys(), timeout=30)

    [entry] = world.dead_letters()
    assert entry.status is DeadLetterStatus.PENDING  # a 1 h delay lives in the DB
    flush_delays = [delay for name, delay in published if name == "sheetsync.flush.run"]
    assert len(flush_delays) >= 8  # rate-limit reschedules and retries happened
    # A rate-limited run wakes the lead (0.75 s) before its slot, up to a window out.
    assert any(delay > 0.5 for delay in flush_delays)
    assert max(delay for _, delay in published) < visibility

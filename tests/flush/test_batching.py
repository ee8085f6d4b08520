"""Full batches at real emit rates: a steady stream is held for fuller batches (not one
append per promotion), the debounce still holds, and a burst that ends goes at once."""

from __future__ import annotations

import time

import pytest
from support.waiting import wait_until

from sheetsync import emit_answer_submitted, emit_answers_submitted


def emit_steadily(ids: list[str], per_second: float) -> float:
    """Emit at a steady rate, as a web app's requests arrive; returns when the last went."""
    started = time.monotonic()
    for n, answer_id in enumerate(ids):
        delay = started + n / per_second - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        emit_answer_submitted(answer_id)
    return time.monotonic()


@pytest.mark.timing
def test_a_steady_stream_is_sent_in_full_batches_and_its_end_at_once(
    world, pipeline_env, worker, admin
):
    # 150 answers a second for 4 s, a 2 s debounce, promotion at 50: without holding,
    # every promotion would append about 50 rows (12 appends).
    pipeline_env(flush_delay_s=2, flush_threshold=50, flush_linger_s=0.3, flush_idle_s=0.3)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 600)
    admin.reset_stats()

    last_emit = emit_steadily(ids, per_second=150)
    wait_until(lambda: len(world.ids_in(sheet)) == 600, timeout=30, interval=0.05)
    landed_after_s = time.monotonic() - last_emit

    assert world.ids_in(sheet) == ids
    appends = admin.stats()["requests"]["by_kind"]["values.append"]
    assert appends <= 4, appends  # about one per debounce (2 s of the stream)
    assert landed_after_s < 2.0, landed_after_s


@pytest.mark.timing
def test_a_lone_answer_still_lands_a_debounce_after_it_arrived(world, pipeline_env, worker):
    pipeline_env(flush_delay_s=1, flush_idle_s=0.3)
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    emitted = time.monotonic()
    emit_answer_submitted(answer_id)
    wait_until(lambda: world.ids_in(sheet) == [answer_id], timeout=10, interval=0.05)
    assert 0.9 < time.monotonic() - emitted < 3


@pytest.mark.timing
def test_the_tail_of_a_burst_cut_at_the_request_cap_goes_in_the_same_run(
    world, pipeline_env, worker, admin
):
    # 400 answers pushed at once against a 20 kB request cap: batches are cut well
    # short of BATCH_SIZE, and what is left is under the threshold. Those ids arrived
    # before the run began, so they go now, not a 30 s debounce later.
    pipeline_env(flush_delay_s=30, flush_threshold=100, request_bytes_max=20_000)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 400)
    admin.reset_stats()
    pushed = time.monotonic()
    emit_answers_submitted(ids)
    wait_until(lambda: len(world.ids_in(sheet)) == 400, timeout=20, interval=0.05)

    assert time.monotonic() - pushed < 15
    assert world.ids_in(sheet) == ids
    assert admin.stats()["requests"]["by_kind"]["values.append"] > 2  # the cap cut them

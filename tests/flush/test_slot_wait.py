"""A run and its turn at the quota: a turn a little further than the run's lead (it moved
while the run slept) is waited for in the run; a turn further than that reschedules the
run, to wake the lead before it, without building a batch."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sheetsync import emit_answers_submitted
from sheetsync.flush.entry import flush
from sheetsync.flush.run import DEFAULT_SLOT_LEAD_S, DEFAULT_SLOT_SLIP_S
from sheetsync.redis_keys import BufferKey
from sheetsync.services import get_services

#: Writes per window for the account (a new sheet's first run writes a header and an
#: append).
LIMIT = 2


def run_with_a_full_window(
    world: Any, pipeline_env: Callable[..., dict[str, str]], window_s: float, *, refill: bool
) -> tuple[Any, Any, list[str]]:
    """A new sheet's first run (its header and an append: the account's window full),
    then, ``refill`` filling the window again from now, a run for one more answer; returns
    the second run's outcome, the sheet and the answer ids."""
    pipeline_env(
        rate_window_s=window_s,
        rate_margin_s=0,
        rate_limit_per_account=LIMIT,
        flush_threshold=1,  # due at once; no worker here: the test runs each flush itself
    )
    services = get_services()
    form = world.form("slots")
    sheet = world.sheet(form)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    first = world.answers(form, 1, prefix="first")
    emit_answers_submitted(first)
    assert flush(services, services.store.job_state(key)["token"]).tally.appended == 1
    later = world.answers(form, 1, prefix="later")
    emit_answers_submitted(later)
    token = services.store.job_state(key)["token"]
    if refill:  # else the first run's writes fill it, from a moment ago
        time.sleep(window_s)  # they leave the window (the test's setting)
        for _ in range(LIMIT):  # then it is full again, from now: the turn is window_s away
            services.limiter.take("google-slots", "write")
    return flush(services, token), sheet, first + later


def test_a_turn_that_moved_a_little_is_waited_for_in_the_run(world, pipeline_env):
    # Its turn is past the lead but within the slip: the run waits, then appends.
    window_s = DEFAULT_SLOT_LEAD_S + DEFAULT_SLOT_SLIP_S - 0.1
    outcome, sheet, ids = run_with_a_full_window(world, pipeline_env, window_s, refill=True)

    assert outcome.tally.appended == 1, outcome
    assert outcome.tally.requests == ["values.append"]
    assert world.ids_in(sheet) == ids


def test_a_turn_beyond_the_slip_reschedules_the_run_the_lead_before_it(world, pipeline_env):
    window_s = DEFAULT_SLOT_LEAD_S + DEFAULT_SLOT_SLIP_S + 2.75
    outcome, sheet, ids = run_with_a_full_window(world, pipeline_env, window_s, refill=False)

    assert outcome.tally.appended == 0
    assert outcome.tally.requests == []  # no batch built, nothing sent
    assert outcome.status == "again" and outcome.next is not None
    # Woken the lead before its turn, which is more than the lead and the slip away.
    assert DEFAULT_SLOT_SLIP_S < outcome.next.countdown_s <= window_s - DEFAULT_SLOT_LEAD_S
    assert world.ids_in(sheet) == ids[:1]

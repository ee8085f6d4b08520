"""End to end on real Redis, a real worker and the emulator: debounce, promotion, tiers."""

from __future__ import annotations

import time

import pytest
from conftest import wait_until

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

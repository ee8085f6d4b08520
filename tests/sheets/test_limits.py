"""The rate limiter against the emulator's quotas, with real worker processes: reads and
writes each within their own limits, as Google counts them, and most of the binding one
used."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.models import SheetTransaction, TransactionType
from sheetsync.services import get_services

WINDOW_S = 4.0
MARGIN_S = 0.1
PER_ACCOUNT = 48
PER_PROJECT = 120
BUFFERS = 200
ACCOUNTS = 3


@pytest.mark.slow
@pytest.mark.timing  # "most of them" is a rate: it needs the machine to itself
def test_four_workers_never_exceed_the_quotas_and_use_most_of_them(world, worker_processes, admin):
    workers = worker_processes(
        rate_window_s=WINDOW_S,
        rate_margin_s=MARGIN_S,
        rate_limit_per_account=PER_ACCOUNT,
        rate_limit_per_project=PER_PROJECT,
        flush_delay_s=0.2,
        lease_s=10,
    )
    pipeline = get_services()
    # 200 buffers: 100 forms, each linked to two sheets, spread over 3 owners.
    firsts = []
    for n in range(BUFFERS // 2):
        form = world.form(f"acct{n % ACCOUNTS}")
        world.sheet(form, "A")
        world.sheet(form, "B")
        firsts.extend(world.answers(form, 1, prefix=f"f{n}"))
    admin.set_quotas(
        read_per_account=PER_ACCOUNT,
        write_per_account=PER_ACCOUNT,
        read_per_project=PER_PROJECT,
        write_per_project=PER_PROJECT,
        window_s=WINDOW_S,
    )
    admin.reset_stats()
    workers.start(4)
    started = time.monotonic()
    for answer_id in firsts:
        emit_answer_submitted(answer_id)

    def landed() -> bool:
        with pipeline.sessions() as session:
            done = session.scalar(
                select(func.count()).where(SheetTransaction.type == TransactionType.COMPLETED)
            )
        return done == BUFFERS

    wait_until(landed, timeout=180, interval=0.2)
    elapsed = time.monotonic() - started
    stats = admin.stats()

    assert stats["rate_limited"]["total"] == 0
    # Reads and writes each within their own limits, as Google counts them...
    for account, numbers in stats["by_account"].items():
        assert numbers["max_in_window"]["reads"] <= PER_ACCOUNT, (account, numbers)
        assert numbers["max_in_window"]["writes"] <= PER_ACCOUNT, (account, numbers)
    assert stats["max_in_window"]["reads"] <= PER_PROJECT, stats["max_in_window"]
    assert stats["max_in_window"]["writes"] <= PER_PROJECT, stats["max_in_window"]
    # ...and apart: a window held more requests than one limit shared by both allows.
    assert stats["max_in_window"]["all"] > PER_PROJECT, stats["max_in_window"]

    requests = stats["requests"]["total"]
    kinds = ("spreadsheets.getByDataFilter", "spreadsheets.batchUpdate", "values.append")
    assert stats["requests"]["by_kind"] == dict.fromkeys(kinds, BUFFERS), stats["requests"]
    assert requests == 3 * BUFFERS
    # Every buffer needs 3 requests: one read (the tab's title, time zone and row 1) and
    # two writes (row 1's titles with the date columns' formats, then the append). The
    # writes bind: 3 accounts x 48 is more than the project's 120. Writes PER_PROJECT
    # apart may come no closer than the window; how close they come on average is how
    # much of the limit the pipeline used.
    times = admin.stats(times=True)["served_times_by_access"]["write"]
    gaps = [times[i + PER_PROJECT] - times[i] for i in range(len(times) - PER_PROJECT)]
    used = WINDOW_S / (sum(gaps) / len(gaps))
    print(f"{requests} requests in {elapsed:.1f}s: {used:.1%} of the project write limit used")
    assert min(gaps) >= WINDOW_S
    assert used >= 0.9, f"{used:.1%} of the limit used"

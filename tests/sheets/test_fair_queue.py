"""The queue at the project's window (rate_turn.lua) against real Redis: who goes first
when slots are short. Places are read with ``RateLimiter.places``, the view ``sheetsync
status`` shows; the windows are full for the test's length, so nobody takes a slot."""

from __future__ import annotations

import time

import pytest
import redis

from sheetsync.errors import RateLimited
from sheetsync.settings import Settings
from sheetsync.sheets.limiter import QueueTuning, RateLimiter

PRO = 4.0


def limiter_for(redis_url: str, per_project: int) -> RateLimiter:
    """A 30 s window, accounts out of the way, the paying weight PRO."""
    settings = Settings.load(
        rate_window_s=30,
        rate_margin_s=0,
        rate_limit_per_account=100,
        rate_limit_per_project=per_project,
        rate_priority_weight=PRO,
    )
    return RateLimiter(redis.Redis.from_url(redis_url), settings)


@pytest.fixture
def limiter(redis_url: str) -> RateLimiter:
    limiter = limiter_for(redis_url, per_project=3)
    for n in range(3):  # the project's write window, full for 30 s
        limiter.take(f"filler{n}")
    return limiter


def ahead(limiter: RateLimiter, waiter: str) -> int:
    return limiter.places()[waiter].ahead


def test_a_paying_newcomer_goes_before_waiting_free_owners(limiter: RateLimiter) -> None:
    for account in ("free1", "free2", "free3"):
        for sheet in range(4):
            assert limiter.reserve(account, f"{account}-{sheet}") > 20
    limiter.reserve("pro", "pro-sheet", weight=PRO)
    limiter.reserve("small", "small-sheet")
    assert ahead(limiter, "pro-sheet") == 0
    # The small FREE owner joins the round in progress: behind the paying owner and at
    # most one turn of each busy account, not behind their twelve buffers.
    assert 1 <= ahead(limiter, "small-sheet") <= 4
    # Each is told its turn by its place: the small owner's comes at least a slot (a
    # window / limit, 10 s here) after the paying one's.
    places = limiter.places()
    gap_ms = places["small-sheet"].expected_ms - places["pro-sheet"].expected_ms
    assert gap_ms >= 10_000


@pytest.fixture
def flowing(redis_url: str) -> RateLimiter:
    """A limiter whose project window lets four go at once (a slot every 0.75 s, within
    the burst), so a test can serve turns and move the queue's clock."""
    return limiter_for(redis_url, per_project=40)


def test_a_newcomer_goes_before_the_busy_turns_that_end_with_its_own(
    flowing: RateLimiter,
) -> None:
    for account in ("free1", "free2", "free3"):
        for sheet in range(4):
            flowing.reserve(account, f"{account}-{sheet}")
    # A round served, and the next round's first turn: the clock is at round two.
    for waiter in ("free1-0", "free2-0", "free3-0", "free1-1"):
        flowing.take(waiter.split("-")[0], waiter=waiter)
    flowing.reserve("small", "small-sheet")
    # Its turn ends with free2's and free3's second ones; by name they would go first.
    assert ahead(flowing, "small-sheet") == 0


def test_a_free_newcomer_right_after_a_paying_one_goes_after_it(flowing: RateLimiter) -> None:
    for sheet in range(4):
        flowing.reserve("free1", f"free1-{sheet}")
    for waiter in ("free1-0", "free1-1"):
        flowing.take("free1", waiter=waiter)
    flowing.reserve("pro", "zz-pro", weight=PRO)
    flowing.reserve("small", "aa-small")  # by name it would go first
    assert ahead(flowing, "zz-pro") == 0
    assert ahead(flowing, "aa-small") == 1


def test_an_account_with_ten_waiting_sheets_gets_one_turn_per_round(
    limiter: RateLimiter,
) -> None:
    for sheet in range(10):
        limiter.reserve("big", f"big-{sheet}")
    limiter.reserve("lone", "lone-0")
    # The lone account's first turn comes after the big account's first, not its tenth.
    assert ahead(limiter, "lone-0") <= 1
    order = sorted(limiter.places().items(), key=lambda item: item[1].ahead)
    big_before_lone = [name for name, _ in order].index("lone-0")
    assert big_before_lone <= 1


def test_paying_owners_get_more_turns_but_free_ones_keep_theirs(limiter: RateLimiter) -> None:
    for sheet in range(8):
        limiter.reserve("pro", f"pro-{sheet}", weight=PRO)
        limiter.reserve("free", f"free-{sheet}")
    order = [name for name, _ in sorted(limiter.places().items(), key=lambda i: i[1].ahead)]
    first_eight = order[:8]
    # Weighted, not strict: about four paying turns per FREE one, and FREE never starved.
    assert sum(name.startswith("pro") for name in first_eight) >= 5
    assert any(name.startswith("free") for name in first_eight)


def test_a_continuing_run_keeps_its_turn(redis_url: str) -> None:
    settings = Settings.load(
        rate_window_s=30, rate_margin_s=0, rate_limit_per_account=100, rate_limit_per_project=2
    )
    limiter = RateLimiter(redis.Redis.from_url(redis_url), settings)
    limiter.take("filler")
    acquire = limiter.acquirer("first", waiter="first-sheet")
    acquire("write")  # its header, the window's last slot: the run's sequence has started
    for n in range(5):
        limiter.reserve(f"other{n}", f"other-{n}")
    with pytest.raises(RateLimited):
        acquire("write")  # its append waits...
    assert ahead(limiter, "first-sheet") == 0  # ...at the head, not behind the five


def test_a_buffer_whose_account_is_full_blocks_nobody(redis_url: str) -> None:
    settings = Settings.load(
        rate_window_s=30, rate_margin_s=0, rate_limit_per_account=1, rate_limit_per_project=10
    )
    limiter = RateLimiter(redis.Redis.from_url(redis_url), settings)
    limiter.take("busy")  # the busy account's window is full for 30 s
    assert limiter.reserve("busy", "busy-sheet") > 20
    assert limiter.places()["busy-sheet"].state == "parked"
    # Another account's request goes at once: the parked buffer is not ahead of it.
    assert limiter.reserve("other", "other-sheet") == 0
    limiter.take("other", waiter="other-sheet")
    assert limiter.waiting()["write"] == {"queued": 0, "parked": 1}


def test_a_run_that_ends_leaves_the_queues(limiter: RateLimiter) -> None:
    limiter.reserve("acct", "gone-sheet")
    limiter.reserve("acct", "staying-sheet")
    assert ahead(limiter, "staying-sheet") == 1
    limiter.leave("gone-sheet")
    assert "gone-sheet" not in limiter.places()
    assert ahead(limiter, "staying-sheet") == 0


def test_a_waiter_past_its_time_holds_no_slot(redis_url: str) -> None:
    # A waiter told to come back that has not come (its task waits behind a busy worker
    # process, say) keeps its place, but the slot goes to the next waiter present: an
    # idle slot of a sliding window is lost for good.
    settings = Settings.load(
        rate_window_s=0.4, rate_margin_s=0, rate_limit_per_account=100, rate_limit_per_project=2
    )
    limiter = RateLimiter(redis.Redis.from_url(redis_url), settings)
    limiter.take("filler")
    limiter.take("filler")
    wait_s = limiter.reserve("late", "late-sheet")
    assert limiter.reserve("present", "present-sheet") > wait_s
    assert ahead(limiter, "present-sheet") == 1
    time.sleep(wait_s + 0.1)  # the late waiter's slot came 0.1 s ago; it did not
    assert limiter.reserve("present", "present-sheet") == 0
    assert ahead(limiter, "late-sheet") == 0


def test_a_first_writes_turn_costs_two_of_its_accounts_slots(redis_url: str) -> None:
    # Its header and its append take two of the account's slots (a turn of cost 2): the
    # buffer behind it is told so, instead of waking for a slot the append takes.
    settings = Settings.load(
        rate_window_s=30, rate_margin_s=0, rate_limit_per_account=2, rate_limit_per_project=100
    )
    limiter = RateLimiter(redis.Redis.from_url(redis_url), settings)
    gaps_s = {}
    for cost in (1, 2):
        account = f"acct{cost}"
        limiter.take(account)
        limiter.take(account)  # the account's window is full for 30 s, then frees both
        first_wait = limiter.reserve(account, f"{account}-first", cost=cost)
        gaps_s[cost] = limiter.reserve(account, f"{account}-behind") - first_wait
    assert gaps_s[1] < 1  # both slots free at once: one each
    assert gaps_s[2] > 25  # the first write takes both: the next one frees a window later


def test_a_run_back_for_its_append_keeps_its_turn(redis_url: str) -> None:
    # Its header took the window's last slot and its append was refused: the run ended,
    # and the next one asks for the one slot its batch still needs, in the same turn.
    settings = Settings.load(
        rate_window_s=30, rate_margin_s=0, rate_limit_per_account=100, rate_limit_per_project=2
    )
    limiter = RateLimiter(redis.Redis.from_url(redis_url), settings)
    limiter.take("filler")
    assert limiter.reserve("first", "first-sheet", cost=2) == 0
    limiter.take("first", waiter="first-sheet")  # the header
    for n in range(5):
        limiter.reserve(f"other{n}", f"other-{n}")
    with pytest.raises(RateLimited):
        limiter.take("first", waiter="first-sheet")  # the append: the run ends
    assert limiter.reserve("first", "first-sheet", cost=1) > 20  # the next run
    assert ahead(limiter, "first-sheet") == 0


def test_a_waiter_past_its_time_holds_none_of_its_accounts_slots(redis_url: str) -> None:
    # The same in its account's line: the account's freed slot goes to the next of its
    # buffers present, and the late one keeps its place for the slot after.
    settings = Settings.load(
        rate_window_s=0.4, rate_margin_s=0, rate_limit_per_account=1, rate_limit_per_project=100
    )
    limiter = RateLimiter(
        redis.Redis.from_url(redis_url), settings, tuning=QueueTuning(grace_ms=60_000)
    )
    limiter.take("acct")
    wait_s = limiter.reserve("acct", "late-sheet")
    assert limiter.reserve("acct", "present-sheet") > wait_s
    time.sleep(wait_s + 0.1)  # the late waiter's slot came 0.1 s ago; it did not
    assert limiter.reserve("acct", "present-sheet") == 0
    limiter.take("acct", waiter="present-sheet")
    assert ahead(limiter, "late-sheet") == 0

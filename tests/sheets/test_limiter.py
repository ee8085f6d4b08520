"""The rate limiter (rate_take.lua) against real Redis: both windows or neither, strict
in every window on Redis's own clock, reserved slots so waiting buffers do not herd, and
reads and writes counted apart."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from sheetsync.errors import RateLimited
from sheetsync.redis_keys import RATE_WRITE_PROJECT, rate_account_key
from sheetsync.settings import Settings
from sheetsync.sheets.limiter import RateLimiter, WindowUse


def limiter_for(redis_url: str, **settings: object) -> RateLimiter:
    return RateLimiter(redis.Redis.from_url(redis_url), Settings.load(**settings))


def test_both_windows_or_neither(redis_url):
    limiter = limiter_for(
        redis_url,
        rate_window_s=5,
        rate_margin_s=0,
        rate_limit_per_account=3,
        rate_limit_per_project=4,
    )
    for _ in range(3):
        limiter.take("acct1")
    with pytest.raises(RateLimited) as refused:
        limiter.take("acct1")
    assert 4.5 < refused.value.retry_after_s <= 5.01
    assert limiter.usage().used == 3  # the refusal did not spend a project slot
    limiter.take("acct2")
    with pytest.raises(RateLimited):
        limiter.take("acct3")  # now the project window is full
    assert limiter.usage("acct3").used == 0


def test_a_refused_take_comes_back_its_in_process_wait_before_its_turn(redis_url):
    limiter = limiter_for(redis_url, rate_window_s=5, rate_margin_s=0, rate_limit_per_account=1)
    limiter.take("acct1")
    with pytest.raises(RateLimited) as refused:
        limiter.take("acct1", max_wait_s=1.0, waiter="sheet")
    # Its turn is 5 s away: back in 4 s, then it waits the last second in-process (a
    # run that came back at its turn would be late for it by its own start-up).
    assert 3.5 < refused.value.retry_after_s <= 4.01


def test_reads_and_writes_have_windows_of_their_own(redis_url):
    limiter = limiter_for(
        redis_url,
        rate_window_s=5,
        rate_margin_s=0,
        rate_limit_per_account=2,
        rate_limit_per_project=100,
    )
    for _ in range(2):
        limiter.take("acct", "read")
    with pytest.raises(RateLimited, match="read rate limit"):
        limiter.take("acct", "read")
    # The reads took no write slot: an append still has both of its own.
    assert limiter.reserve("acct", "buffer") == 0
    limiter.take("acct", "write", waiter="buffer")
    limiter.take("acct", "write")
    with pytest.raises(RateLimited, match="write rate limit"):
        limiter.take("acct", "write")
    assert limiter.usage("acct", "read") == WindowUse(used=2, limit=2)
    assert limiter.usage("acct", "write") == WindowUse(used=2, limit=2)
    assert limiter.usage(kind="read").used == 2 and limiter.usage(kind="write").used == 2


def test_each_kind_and_scope_has_its_own_limit(redis_url):
    limiter = limiter_for(
        redis_url,
        rate_window_s=5,
        rate_margin_s=0,
        rate_limit_per_account=50,
        rate_limit_per_project=50,
        rate_read_limit_per_account=1,
        rate_write_limit_per_project=2,
    )
    limiter.take("a", "read")
    with pytest.raises(RateLimited):
        limiter.take("a", "read")  # the account's read limit, 1
    limiter.take("b", "read")  # the project's read limit is the general 50
    limiter.take("a", "write")
    limiter.take("b", "write")
    with pytest.raises(RateLimited):
        limiter.take("c", "write")  # the project's write limit, 2
    assert limiter.usage("c", "write") == WindowUse(used=0, limit=50)


def test_waiting_buffers_each_get_a_turn_of_their_own(redis_url):
    limiter = limiter_for(redis_url, rate_window_s=2, rate_margin_s=0, rate_limit_per_account=2)
    limiter.take("acct")
    limiter.take("acct")  # the window is full for 2 s
    waits = [limiter.reserve("acct", f"buffer{n}") for n in range(4)]
    # Two slots free when the first two entries age out, two more a window later.
    assert 1.9 < waits[0] <= 2.01 and 1.9 < waits[1] <= 2.01
    assert 3.9 < waits[2] <= 4.01 and 3.9 < waits[3] <= 4.01
    # Asking again keeps one's place; it does not take another slot.
    assert abs(limiter.reserve("acct", "buffer2") - waits[2]) < 0.05
    assert limiter.reserve("acct", "buffer9") > 5.9


@pytest.mark.timing
def test_a_turn_is_taken_by_its_buffer_and_nobody_jumps_the_queue(redis_url):
    # The margin lets a reservation be used a little late (half of it).
    limiter = limiter_for(redis_url, rate_window_s=1, rate_margin_s=0.2, rate_limit_per_account=1)
    limiter.take("acct")
    wait = limiter.reserve("acct", "mine")
    assert 1.1 < wait <= 1.21
    time.sleep(wait)
    with pytest.raises(RateLimited):
        limiter.take("acct", waiter="someone-else")  # the slot is held for "mine"
    started = time.monotonic()
    limiter.take("acct", max_wait_s=0.5, waiter="mine")
    assert time.monotonic() - started < 0.1


def test_a_turn_taken_late_still_goes_when_the_window_allows(redis_url):
    limiter = limiter_for(redis_url, rate_window_s=0.5, rate_margin_s=0.2, rate_limit_per_account=1)
    limiter.take("acct")
    assert limiter.reserve("acct", "late") > 0
    time.sleep(0.9)  # its slot came and went (past the slack of half the margin)
    assert limiter.reserve("acct", "late") == 0  # nothing held, and the slot is free


def recorded_entries(client: redis.Redis, stop: threading.Event) -> dict[bytes, float]:
    """Every entry of the account's window, with its score, sampled until ``stop``."""
    seen: dict[bytes, float] = {}
    key = rate_account_key("acct", "write")
    while not stop.is_set():
        for member, score in client.zrange(key, 0, -1, withscores=True):
            seen[member] = score
        time.sleep(0.02)
    return seen


def test_strict_in_every_window_under_concurrency(redis_url):
    """Six threads race for 20 requests a second, half of them through reservations: on
    Redis's clock, no window ever holds more than 20, and most of the limit is used."""
    window_s, limit = 1.0, 20
    client = redis.Redis.from_url(redis_url)
    stop = threading.Event()
    seen: dict[bytes, float] = {}

    def watch() -> None:
        seen.update(recorded_entries(client, stop))

    def hammer(n: int) -> None:
        limiter = limiter_for(
            redis_url,
            rate_window_s=window_s,
            rate_margin_s=0,
            rate_limit_per_account=limit,
            rate_limit_per_project=1000,
        )
        waiter = f"buffer{n}" if n % 2 else ""
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            try:
                limiter.take("acct", max_wait_s=0.05, waiter=waiter)
            except RateLimited as limited:
                time.sleep(min(limited.retry_after_s, 0.05))

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.1)
    stop.set()
    watcher.join()
    scores = sorted(seen.values())
    window_ms = window_s * 1000
    busiest = max(sum(1 for t in scores if start <= t < start + window_ms) for start in scores)
    assert busiest <= limit
    assert len(scores) >= 2 * limit
    assert client.zcard(RATE_WRITE_PROJECT) <= 1000

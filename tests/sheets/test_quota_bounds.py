"""Every key of the quota stays bounded whatever the traffic: the state of the buffers and
accounts that came and left is dropped (rate_served.lua, rate_leave.lua), not kept alive
by the traffic that follows; and a turn never used is given back."""

from __future__ import annotations

import redis

from sheetsync.redis_keys import rate_account_key, rate_queue_keys
from sheetsync.settings import Settings
from sheetsync.sheets.limiter import QueueTuning, RateLimiter

ACCOUNTS = 2000


def limiter_for(redis_url: str, **settings: object) -> RateLimiter:
    values = {
        "rate_window_s": 60,
        "rate_margin_s": 0,
        "rate_limit_per_account": 60,
        "rate_limit_per_project": 100_000,
        **settings,
    }
    return RateLimiter(redis.Redis.from_url(redis_url), Settings.load(**values))


def queue_sizes(client: redis.Redis) -> dict[str, int]:
    """Members of every global key of the writes' queue (hash fields, set members)."""
    keys = rate_queue_keys("write")
    pipe = client.pipeline(transaction=False)
    for key in (keys.queue, keys.parked, keys.debts, keys.lines):
        pipe.zcard(key)
    for key in (keys.turns, keys.expected):
        pipe.hlen(key)
    names = ("queue", "parked", "debts", "lines", "turns", "expected")
    return dict(zip(names, pipe.execute(), strict=True))


def per_account_keys_expire(client: redis.Redis, limiter: RateLimiter) -> None:
    """Every key of one account (its windows) expires on its own: no other account's
    traffic renews it."""
    longest_ms = limiter.window_ms
    names = [name.decode() for name in client.scan_iter(match="sheetsync:rate:*:account:*")]
    assert names
    for name in names:
        assert 0 < client.pttl(name) <= longest_ms, name


def test_thousands_of_buffers_and_accounts_that_came_and_left_leave_nothing(
    redis_url: str,
) -> None:
    """Buffers of ever-new accounts, fifty at a time: each reserves a first write (a turn
    of two), sends its header and its append, or leaves without writing (its turn given
    back); then every global key of the queue is empty again."""
    limiter = limiter_for(redis_url)
    client = limiter.redis
    largest: dict[str, int] = {}
    for first in range(0, ACCOUNTS, 50):
        group = [(f"acct{n}", f"buffer{n}") for n in range(first, first + 50)]
        for account, buffer in group:
            limiter.reserve(account, buffer, cost=2)
        for n, (account, buffer) in enumerate(group):
            if n % 3:
                limiter.take(account, waiter=buffer)
                limiter.take(account, waiter=buffer)
            else:
                limiter.leave(buffer)
        for name, size in queue_sizes(client).items():
            largest[name] = max(largest.get(name, 0), size)
    assert queue_sizes(client) == dict.fromkeys(largest, 0)
    assert max(largest.values()) <= 50  # the waiting buffers of one group, at most
    per_account_keys_expire(client, limiter)


def test_under_a_queue_that_never_empties_the_debts_stay_bounded(redis_url: str) -> None:
    """A buffer parked for the whole run (its account's window is full) keeps the queue
    from ever being idle, while ever-new accounts come, write once and go: their debts
    past the clock are dropped past the bound."""
    limiter = RateLimiter(
        limiter_for(redis_url).redis,
        limiter_for(redis_url).settings,
        tuning=QueueTuning(max_debts=100),
    )
    client = limiter.redis
    for _ in range(60):
        limiter.take("full")
    assert limiter.reserve("full", "stuck") > 0
    for n in range(ACCOUNTS):
        limiter.take(f"acct{n}", waiter=f"buffer{n}")
        sizes = queue_sizes(client)
        assert sizes["debts"] <= 100 and sizes["turns"] == sizes["lines"] == 1, (n, sizes)
    assert limiter.places()["stuck"].state == "parked"
    assert client.zcard(rate_account_key("full", "write")) == 60


def test_a_turn_never_used_is_given_back(redis_url: str) -> None:
    """Thirty runs of one account that reserved and wrote nothing do not put its next
    buffer behind the others' turns: it stands where a newcomer would."""
    limiter = limiter_for(redis_url, rate_window_s=30, rate_limit_per_project=3)
    for n in range(3):
        limiter.take(f"filler{n}")  # the project's window, full: nobody goes
    for account in ("busy1", "busy2"):
        for sheet in range(20):
            limiter.reserve(account, f"{account}-{sheet}")
    for _ in range(30):
        limiter.reserve("small", "small-sheet", cost=2)
        limiter.leave("small-sheet")
    limiter.reserve("small", "small-new")
    # As a newcomer: its turn ends with each busy account's first (ties by name here),
    # before their 38 others; charged for the thirty turns, it would stand behind all 40.
    assert limiter.places()["small-new"].ahead == 2

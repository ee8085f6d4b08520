"""The Lua state machine and the limiter, driven directly against real Redis."""

from __future__ import annotations

import threading
import time

import pytest

from sheetsync.buffers.store import BufferStore
from sheetsync.errors import RateLimited, ValidationError
from sheetsync.keys import BUFFER_INDEX, BufferKey, token_buffer
from sheetsync.settings import Settings
from sheetsync.sheets.limiter import RateLimiter

KEY = BufferKey("u1", "form1", "sheetA", 7)


@pytest.fixture
def store(redis_url):
    import redis

    settings = Settings.load(
        redis_url=redis_url, flush_delay_s=10, flush_threshold=5, lease_s=1, sweep_grace_s=0
    )
    return BufferStore(redis.Redis.from_url(redis_url), settings)


def test_keys_validate_their_parts():
    assert KEY.base == "sheetsync:{u1:form1:sheetA:7}"
    assert token_buffer(KEY.base + "#12") == KEY
    for bad in [("u 1", "f", "s", 0), ("u", "f/x", "s", 0), ("u", "f", "s", -1), ("u", "f", "", 0)]:
        with pytest.raises(ValidationError):
            BufferKey(*bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="sheet_id must be"):
        BufferKey("u", "f", "s", "12a")  # type: ignore[arg-type]


def test_enqueue_creates_one_delayed_task_then_joins_it(store):
    [first] = store.push([(KEY, "q")], ["a1"])
    assert first.countdown_s == 10 and first.queue == "q" and first.superseded is None
    assert store.push([(KEY, "q")], ["a2", "a3"]) == []  # joins the scheduled task
    assert store.read_all(KEY) == ["a1", "a2", "a3"]
    assert store.redis.zscore(BUFFER_INDEX, KEY.base) is not None


def test_threshold_promotes_once_with_a_new_token(store):
    [delayed] = store.push([(KEY, "q")], ["a1"])
    [promoted] = store.push([(KEY, "q")], ["a2", "a3", "a4", "a5"])
    assert promoted.countdown_s == 0 and promoted.superseded == delayed.token
    assert promoted.token != delayed.token
    assert store.push([(KEY, "q")], ["a6"]) == []  # promoted once
    assert not store.claim(KEY, delayed.token)  # the old task is a no-op
    assert store.claim(KEY, promoted.token)


def test_claim_is_exclusive_while_the_lease_holds(store):
    [dispatch] = store.push([(KEY, "q")], ["a1"])
    assert store.claim(KEY, dispatch.token)
    assert not store.claim(KEY, dispatch.token)  # a duplicate delivery
    assert store.push([(KEY, "q")], ["a2"]) == []  # a running job drains new ids
    time.sleep(1.1)  # the 1 s lease of this test expires
    assert store.claim(KEY, dispatch.token)


def test_finish_deletes_an_empty_job_and_hands_over_a_busy_one(store):
    [dispatch] = store.push([(KEY, "q")], ["a1", "a2"])
    assert store.claim(KEY, dispatch.token)
    assert store.trim(KEY, dispatch.token, 1, last_row=2) == 1
    following = store.finish(KEY, dispatch.token)
    assert following is not None and following.token != dispatch.token
    assert following.countdown_s == 10
    assert store.claim(KEY, following.token)
    assert store.trim(KEY, following.token, 1, last_row=3) == 0
    assert store.finish(KEY, following.token) is None
    assert store.job_state(KEY) == {}
    assert store.redis.zscore(BUFFER_INDEX, KEY.base) is None
    assert store.sheet_cache(KEY).last_row == 3


def test_a_stale_run_is_fenced_at_every_step(store):
    [dispatch] = store.push([(KEY, "q")], ["a1"])
    assert store.claim(KEY, dispatch.token)
    time.sleep(1.1)
    [takeover] = store.sweep([KEY], "q")  # the lease expired: the sweeper re-dispatches
    assert takeover.superseded == dispatch.token
    assert not store.renew(KEY, dispatch.token)
    assert not store.write_intent(KEY, dispatch.token, ["a1"], None)
    assert store.trim(KEY, dispatch.token, 1, None) == -1
    assert store.finish(KEY, dispatch.token) is None
    assert store.release(KEY, dispatch.token, 1.0) == -1
    assert store.read_all(KEY) == ["a1"]  # nothing lost


def test_tokens_never_repeat_even_after_redis_loses_everything(store):
    seen = set()
    for _ in range(3):
        [dispatch] = store.push([(KEY, "q")], ["a1"])
        assert store.claim(KEY, dispatch.token)
        store.trim(KEY, dispatch.token, 1, None)
        store.finish(KEY, dispatch.token)
        seen.add(dispatch.token)
    store.redis.flushdb()
    [after_loss] = store.push([(KEY, "q")], ["a1"])
    assert after_loss.token not in seen and len(seen) == 3


def test_the_limiter_takes_both_windows_or_neither(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    settings = Settings.load(
        rate_window_s=5, rate_margin_s=0, rate_limit_per_account=3, rate_limit_per_project=4
    )
    limiter = RateLimiter(client, settings)
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


def test_the_limiter_is_strict_under_concurrency(redis_url):
    import redis

    settings = Settings.load(
        rate_window_s=1, rate_margin_s=0, rate_limit_per_account=20, rate_limit_per_project=1000
    )
    taken: list[float] = []
    lock = threading.Lock()

    def hammer() -> None:
        limiter = RateLimiter(redis.Redis.from_url(redis_url), settings)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            try:
                limiter.take("acct")
            except RateLimited as limited:
                time.sleep(min(limited.retry_after_s, 0.05))
                continue
            with lock:
                taken.append(time.monotonic())

    threads = [threading.Thread(target=hammer) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken.sort()
    busiest = max(sum(1 for t in taken if start <= t < start + 0.99) for start in taken)
    assert busiest <= 20 and len(taken) >= 40

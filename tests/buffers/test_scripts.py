"""The Lua state machine and the limiter, driven directly against real Redis."""

from __future__ import annotations

import time

import pytest

from sheetsync.buffers.scripts import FORGET_LAST_ROW, Claim, Renew, job_keys
from sheetsync.buffers.store import PUSH_CHUNK, BufferStore
from sheetsync.errors import ValidationError
from sheetsync.lua.contract import source
from sheetsync.redis_keys import BUFFER_INDEX, BufferKey, token_buffer
from sheetsync.settings import Settings

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


@pytest.mark.timing
def test_finish_deletes_an_empty_job_and_hands_over_a_busy_one(store):
    [dispatch] = store.push([(KEY, "q")], ["a1", "a2"])
    lease = store.claim(KEY, dispatch.token)
    assert lease is not None
    assert store.trim(KEY, lease, 1, last_row=2)[0] == 1
    following = store.finish(KEY, lease)
    assert following is not None and following.token != dispatch.token
    # Due FLUSH_DELAY (10 s) after the oldest id left arrived, which was just now.
    assert 9 < following.countdown_s <= 10
    next_lease = store.claim(KEY, following.token)
    assert next_lease is not None
    assert store.trim(KEY, next_lease, 1, last_row=3) == (0, 0)
    assert store.finish(KEY, next_lease) is None
    assert store.job_state(KEY) == {}
    assert store.redis.zscore(BUFFER_INDEX, KEY.base) is None
    assert store.sheet_cache(KEY).last_row == 3


def test_a_stale_run_is_fenced_at_every_step(store):
    [dispatch] = store.push([(KEY, "q")], ["a1"])
    lease = store.claim(KEY, dispatch.token)
    assert lease is not None
    time.sleep(1.1)
    [takeover] = store.sweep([KEY], "q")  # the lease expired: the sweeper re-dispatches
    assert takeover.superseded == dispatch.token
    assert_fenced(store, lease)


def test_a_second_delivery_of_one_token_fences_the_first(store):
    """The same token delivered twice: the later claim (after the first run's lease
    expired) starts a new epoch, and the first run can change nothing any more."""
    [dispatch] = store.push([(KEY, "q")], ["a1", "a2"])
    first = store.claim(KEY, dispatch.token)
    assert first is not None
    time.sleep(1.1)  # the first run stalls past its 1 s lease
    second = store.claim(KEY, dispatch.token)
    assert second is not None and second.epoch != first.epoch
    assert_fenced(store, first, ids=["a1", "a2"])
    assert store.renew(KEY, second) is not None


def assert_fenced(store, lease, ids=("a1",)):
    assert store.renew(KEY, lease) is None
    assert store.trim(KEY, lease, 1, None)[0] == -1
    assert store.finish(KEY, lease) is None
    assert store.release(KEY, lease, 1.0) == -1
    assert store.read_all(KEY) == list(ids)  # nothing lost


def test_leases_and_due_times_are_on_the_redis_clock(store, monkeypatch):
    """A host whose clock is an hour off changes neither."""
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)
    [dispatch] = store.push([(KEY, "q")], ["a1"])
    due_in = int(store.job_state(KEY)["due_at"]) - store.redis_now_ms()
    assert 9_000 < due_in <= 10_000
    lease = store.claim(KEY, dispatch.token)
    assert lease is not None and 900 < lease.until_ms - store.redis_now_ms() <= 1000


def test_tokens_never_repeat_even_after_redis_loses_everything(store):
    seen = set()
    for _ in range(3):
        [dispatch] = store.push([(KEY, "q")], ["a1"])
        lease = store.claim(KEY, dispatch.token)
        assert lease is not None
        store.trim(KEY, lease, 1, None)
        store.finish(KEY, lease)
        seen.add(dispatch.token)
    store.redis.flushdb()
    [after_loss] = store.push([(KEY, "q")], ["a1"])
    assert after_loss.token not in seen and len(seen) == 3


def test_trim_remembers_keeps_or_forgets_the_last_row(store):
    [dispatch] = store.push([(KEY, "q")], ["a1", "a2", "a3"])
    lease = store.claim(KEY, dispatch.token)
    assert lease is not None
    store.trim(KEY, lease, 1, last_row=5)
    assert store.sheet_cache(KEY).last_row == 5
    store.trim(KEY, lease, 1, last_row=None)
    assert store.sheet_cache(KEY).last_row == 5
    store.trim(KEY, lease, 1, last_row=FORGET_LAST_ROW)
    assert store.sheet_cache(KEY).last_row is None


def test_scripts_redis_forgot_are_loaded_again_even_in_a_chunked_push(store):
    """Redis restarted (its scripts are gone) before a push of more ids than one call
    takes: every chunk still lands, once, and the buffer gets its task."""
    ids = [f"a{n}" for n in range(PUSH_CHUNK * 2 + 1)]
    store.redis.script_flush()
    [dispatch] = store.push([(KEY, "q")], ids)
    assert store.read_all(KEY) == ids
    store.redis.script_flush()
    assert store.claim(KEY, dispatch.token) is not None  # one call: loaded again too


def test_only_the_calls_redis_refused_run_again(store):
    """A pipeline whose first call ran and whose second met NOSCRIPT (its script was
    flushed): the second alone runs again, so the claim is not made twice."""
    [dispatch] = store.push([(KEY, "q")], ["a1"])
    store.redis.script_flush()
    store.redis.script_load(source(Claim))
    lease_ms = 60_000
    claimed, renewed = store.scripts.run_many(
        [
            Claim(**job_keys(KEY), token=dispatch.token, lease_ms=lease_ms, base=KEY.base),
            Renew(
                **job_keys(KEY), token=dispatch.token, epoch="1", lease_ms=lease_ms, base=KEY.base
            ),
        ]
    )
    assert claimed is not None and claimed.epoch == "1"
    assert renewed is not None
    assert store.job_state(KEY)["epoch"] == "1"

"""The due index and the arrival runs: a sweep reads what is due, not what exists; a
queued task gets a long grace; the debounce and a buffer's age come from when its ids
arrived, trims included."""

from __future__ import annotations

import time

import pytest
import redis

from sheetsync.buffers.store import BufferStore
from sheetsync.redis_keys import BUFFER_INDEX, DUE_INDEX, DUE_INDEX_FILLED, BufferKey
from sheetsync.settings import Settings


def key(n: int) -> BufferKey:
    return BufferKey("u1", f"form{n}", "sheetA", 0)


@pytest.fixture
def store(redis_url):
    settings = Settings.load(
        redis_url=redis_url,
        flush_delay_s=1,
        flush_threshold=1000,
        lease_s=1,
        sweep_grace_s=0.2,
        sweep_queued_grace_s=30,
    )
    return BufferStore(redis.Redis.from_url(redis_url), settings)


def test_a_sweep_reads_only_what_is_due(store):
    for n in range(50):
        store.push([(key(n), "q")], ["a1"])
    assert store.due_buffers() == []  # all due in 1 s + 0.2 s grace
    time.sleep(1.3)
    assert len(store.due_buffers()) == 50


def test_a_sent_task_in_a_busy_queue_is_not_resent_while_workers_catch_up(store):
    [queued] = store.push([(key(1), "q")], ["a1"])
    [lost] = store.push([(key(2), "q")], ["a1"])  # its sender died before apply_async
    store.mark_sent([queued])
    time.sleep(1.3)  # both past due + grace; nobody ran them yet
    due = store.due_buffers()
    assert sorted(k.submission_id for k in due) == ["form1", "form2"]
    [resent] = store.sweep(due, "q", busy_queues={"q"})  # messages wait in "q"
    assert resent.superseded == lost.token
    assert store.job_state(key(1))["token"] == queued.token
    assert store.due_buffers() == []  # looked at again a grace later, not every pass
    time.sleep(0.3)
    resent_again = store.sweep(store.due_buffers(), "q", busy_queues=())  # "q" drained
    # Not in the queue, yet never run: lost after all (a worker died holding it).
    assert queued.token in {task.superseded for task in resent_again}


def test_a_running_job_is_due_at_its_lease_end_and_renewals_move_it(store):
    [task] = store.push([(key(1), "q")], ["a1"])
    lease = store.claim(key(1), task.token)
    assert lease is not None
    assert store.redis.zscore(DUE_INDEX, key(1).base) == lease.until_ms
    time.sleep(0.6)
    renewed = store.renew(key(1), lease)
    assert renewed is not None
    assert store.redis.zscore(DUE_INDEX, key(1).base) == renewed.until_ms
    time.sleep(0.6)
    assert store.due_buffers() == []  # renewed: not expired
    time.sleep(0.5)
    assert store.due_buffers() == [key(1)]


def test_finishing_an_empty_buffer_leaves_both_indexes(store):
    [task] = store.push([(key(1), "q")], ["a1"])
    lease = store.claim(key(1), task.token)
    assert lease is not None
    assert store.trim(key(1), lease, 1, None) == (0, 0)
    assert store.finish(key(1), lease) is None
    assert store.redis.zscore(DUE_INDEX, key(1).base) is None
    assert store.redis.zscore(BUFFER_INDEX, key(1).base) is None
    assert not store.redis.exists(key(1).times)


@pytest.mark.timing
def test_arrivals_follow_the_list_through_trims(store):
    [task] = store.push([(key(1), "q")], ["a1", "a2", "a3"])
    time.sleep(0.3)
    store.push([(key(1), "q")], ["a4", "a5"])
    time.sleep(0.3)
    lease = store.claim(key(1), task.token)
    assert lease is not None
    seen = store.arrivals(key(1))
    assert seen.length == 5 and seen.oldest_age_s >= 0.6 > seen.newest_age_s >= 0.3
    left, oldest_age_s = store.trim(key(1), lease, 2, None)  # a1, a2
    assert left == 3 and oldest_age_s >= 0.6  # a3 came with the first burst
    left, oldest_age_s = store.trim(key(1), lease, 2, None)  # a3, a4
    assert left == 1 and 0.3 <= oldest_age_s < 0.6  # a5 came later
    assert store.redis.lrange(key(1).times, 0, -1)[0].endswith(b":1")
    # The buffer index holds when the oldest id arrived, not when the trim ran.
    assert store.redis.zscore(BUFFER_INDEX, key(1).base) <= store.redis_now_ms() - 300


def test_the_next_task_is_due_a_debounce_after_the_oldest_id_not_after_the_run(store):
    [task] = store.push([(key(1), "q")], ["a1", "a2"])
    time.sleep(1.1)  # the run starts late (busy workers); a2 is overdue too
    lease = store.claim(key(1), task.token)
    assert lease is not None
    store.trim(key(1), lease, 1, None)
    following = store.finish(key(1), lease)
    assert following is not None and following.countdown_s == 0


def test_an_upgraded_redis_fills_the_due_index_once(store):
    [task] = store.push([(key(1), "q")], ["a1"])
    store.redis.delete(DUE_INDEX, DUE_INDEX_FILLED)  # as a version without it left things
    assert store.due_buffers() == [key(1)]  # everything is looked at once
    assert store.sweep([key(1)], "q") == []  # not stuck: scored again properly
    assert store.due_buffers() == []
    assert store.redis.exists(DUE_INDEX_FILLED)
    assert store.job_state(key(1))["token"] == task.token

"""`status`'s oldest age is the age of the oldest id still buffered (from the arrival
runs), whatever trims and runs did to the buffer index's score."""

from __future__ import annotations

import time

from sheetsync.ops.status import collect_buffers
from sheetsync.redis_keys import BUFFER_INDEX, BufferKey
from sheetsync.services import Services

KEY = BufferKey("owner_1", "form_1", "sheet_abc", 0)


def only_item(pipeline: Services) -> dict[str, object]:
    (item,) = collect_buffers(pipeline, 10)["items"]
    return item


def test_a_partial_flush_keeps_the_age_of_what_is_left(pipeline: Services) -> None:
    store = pipeline.store
    [task] = store.push([(KEY, "q")], ["a1", "a2", "a3"])
    time.sleep(0.4)
    lease = store.claim(KEY, task.token)
    assert lease is not None
    assert store.trim(KEY, lease, 1, None)[0] == 2  # a rate-limited run sent one id
    store.finish(KEY, lease, countdown_s=5)
    item = only_item(pipeline)
    assert item["depth"] == 2
    assert item["age_source"] == "arrivals"
    assert item["oldest_age_s"] >= 0.4  # a2 and a3 came with a1


def test_ids_pushed_while_a_run_drains_do_not_inherit_an_older_age(pipeline: Services) -> None:
    store = pipeline.store
    [task] = store.push([(KEY, "q")], ["a1"])
    time.sleep(0.6)
    lease = store.claim(KEY, task.token)
    assert lease is not None
    assert store.trim(KEY, lease, 1, None) == (0, 0)  # a1 sent, the list is empty...
    store.push([(KEY, "q")], ["a2"])  # ...and a2 arrives before the run ends
    store.finish(KEY, lease)
    stale_ms = float(pipeline.redis.zscore(BUFFER_INDEX, KEY.base) or 0)
    assert store.redis_now_ms() - stale_ms >= 600  # the index still holds a1's arrival
    item = only_item(pipeline)
    assert item["depth"] == 1
    assert item["oldest_age_s"] < 0.3  # a2's age, not a1's


def test_a_buffer_without_arrival_runs_falls_back_to_the_index(pipeline: Services) -> None:
    pipeline.store.push([(KEY, "q")], ["a1"])
    pipeline.redis.delete(KEY.times)  # as a version without arrival runs left it
    pipeline.redis.zadd(BUFFER_INDEX, {KEY.base: pipeline.store.redis_now_ms() - 5000})
    item = only_item(pipeline)
    assert item["age_source"] == "index"
    assert 5 <= item["oldest_age_s"] < 6

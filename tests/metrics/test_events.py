"""Publishing events is best effort: a Redis that is down costs the counts nothing (they
wait for the next publish) and never raises into the flush."""

from __future__ import annotations

import redis
from support.scrape import free_port

from sheetsync.metrics import events
from sheetsync.metrics.names import FLUSH_DURATION, ROWS_APPENDED
from sheetsync.services import redis_client
from sheetsync.settings import Settings


def test_a_redis_error_keeps_the_counts_for_the_next_publish(redis_url):
    tally = events.EventTally()
    tally.count(ROWS_APPENDED, 3)
    tally.observe(FLUSH_DURATION, 0.3)
    # The workers' client (one try per call), on a port where nothing listens.
    down = redis_client(Settings.load(redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    assert tally.publish(down) is False  # no exception
    up = redis.Redis.from_url(redis_url)
    assert tally.publish(up) is True
    recorded = events.read(up)
    assert recorded.counters[ROWS_APPENDED] == {(): 3}
    buckets, total, count = recorded.histograms[FLUSH_DURATION]
    assert buckets == {"0.5": 1} and count == 1 and abs(total - 0.3) < 1e-9
    assert tally.publish(up) is False  # nothing new

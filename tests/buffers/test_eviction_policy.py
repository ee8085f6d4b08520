"""The warning for a Redis that may evict buffers or limiter windows, against a real
redis-server of the test's own (its policy is changed, so not the shared one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from sheetsync import redis_urls
from sheetsync.dev.local import LocalRedis, start_redis_server


@pytest.fixture
def own_redis() -> Iterator[LocalRedis]:
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


def test_noeviction_is_quiet_and_any_evicting_policy_is_named(own_redis):
    client = redis.Redis.from_url(own_redis.url)
    client.config_set("maxmemory-policy", "noeviction")
    assert redis_urls.eviction_warning(client) is None

    client.config_set("maxmemory-policy", "allkeys-lru")
    warning = redis_urls.eviction_warning(client)
    assert warning is not None
    assert "allkeys-lru" in warning and "noeviction" in warning


def test_a_server_that_refuses_config_get_gives_no_warning(own_redis):
    client = redis.Redis.from_url(own_redis.url)
    client.config_set("maxmemory-policy", "volatile-lru")
    client.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-config")
    limited = redis.Redis.from_url(own_redis.url, username="app", password="pw")
    assert redis_urls.eviction_warning(limited) is None  # managed Redis: cannot tell

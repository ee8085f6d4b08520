"""What the Sentinel tests wait for before they kill a primary."""

from __future__ import annotations

from collections.abc import Iterable

import redis


def all_know_the_replica(sentinels: Iterable[redis.Redis], service: str, port: int) -> bool:
    """Whether every sentinel lists the replica on ``port`` as a healthy one.

    A sentinel learns of a replica from the primary's INFO, which it polls every 10 s; a
    primary killed before that leaves it no replica to promote, and each failover aborts
    (``-failover-abort-no-good-slave`` in its log), as a test beside a CPU hog met.
    """
    for sentinel in sentinels:
        try:
            replicas = sentinel.sentinel_slaves(service)
        except redis.RedisError:
            return False
        if not any(
            int(r["port"]) == port and not r["is_sdown"] and not r["is_disconnected"]
            for r in replicas
        ):
            return False
    return True

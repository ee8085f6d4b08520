"""The demo's Redis: a redis-server child of its own, or the one at ``SHEETSYNC_REDIS_URL``.

Without ``SHEETSYNC_REDIS_URL`` the demo never connects to any Redis it did not start,
not even one answering on the default port. With it (and ``SHEETSYNC_BROKER_URL``, if
set), the demo first notes the names of the keys already there, and on the way out
removes the keys it created: its buffers, sheet caches, rate windows and alert marks,
the metrics' event counts (when they were not there before), its worker's and its
beat's heartbeats, and the Celery broker's keys (bindings, unacked messages, queue
lists). A key that existed before is left as it is, and so is a key of another sheetsync
process that appeared meanwhile: a shared Redis may serve a real deployment.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field

import redis

from sheetsync.dev.local import LocalStackError, redis_answers, start_redis_server
from sheetsync.dispatch import QUEUES
from sheetsync.redis_keys import (
    ALERTED,
    BUFFER_INDEX,
    HEARTBEAT,
    HEARTBEATS,
    METRICS_EVENTS,
    PREFIX,
    RATE_KINDS,
    RATE_READ_PROJECT,
    RATE_WRITE_PROJECT,
    BufferKey,
    heartbeat_key,
    rate_account_key,
    rate_queue_keys,
)
from sheetsync.text import mask_url

#: Keys of kombu's Redis transport and Celery, apart from the queue lists themselves.
BROKER_KEY_PREFIXES = ("_kombu.", "unacked", "celery-task-meta-")
#: kombu names a queue's priority lists ``<queue>\x06\x16<priority>``.
PRIORITY_SEPARATOR = "\x06\x16"
#: Keys deleted per DEL command.
DELETE_CHUNK = 500


@dataclass
class DemoKeys:
    """What names the demo's keys under sheetsync's prefix; filled in as the run goes."""

    buffers: list[BufferKey] = field(default_factory=list)
    google_accounts: list[str] = field(default_factory=list)
    #: The demo worker's name up to the host (``demo-<pid>@``): its heartbeat's name.
    worker_prefix: str | None = None
    #: The name of the beat inside the demo's worker (``beat@<host>``): its heartbeat's.
    beat_name: str | None = None

    def owns(self, name: str) -> bool:
        """Whether a key that appeared during the demo is the demo's to remove."""
        if not name.startswith(f"{PREFIX}:"):
            return is_broker_key(name)
        if name in (
            RATE_READ_PROJECT,
            RATE_WRITE_PROJECT,
            METRICS_EVENTS,
            *(part for kind in RATE_KINDS for part in rate_queue_keys(kind)),
        ):  # appeared with the demo: made by it
            return True
        if any(name.startswith(f"{buffer.base}:") for buffer in self.buffers):
            return True
        if name in {
            rate_account_key(account, kind)
            for account in self.google_accounts
            for kind in RATE_KINDS
        }:
            return True
        if name.startswith(ALERTED):
            return any(buffer.base in name for buffer in self.buffers)
        if name.startswith(HEARTBEAT):
            if self.beat_name is not None and name == heartbeat_key(self.beat_name):
                return True  # it appeared with the demo: its beat's
            return self.worker_prefix is not None and name.startswith(
                f"{HEARTBEAT}{self.worker_prefix}"
            )
        return False


def is_broker_key(name: str) -> bool:
    """Whether ``name`` is a key Celery or kombu keeps in a Redis broker."""
    return (
        name.startswith(BROKER_KEY_PREFIXES)
        or name.partition(PRIORITY_SEPARATOR)[0] in QUEUES
        or name.endswith(".pidbox")
    )


@dataclass(frozen=True)
class KeySnapshot:
    """The key names of one Redis database at one moment."""

    url: str
    names: frozenset[bytes]

    @classmethod
    def take(cls, url: str) -> KeySnapshot:
        with redis.Redis.from_url(url) as client:
            return cls(url, frozenset(client.scan_iter(count=1000)))


def forget_demo_keys(snapshot: KeySnapshot, keys: DemoKeys) -> None:
    """Remove the demo's members from shared indexes, then the demo's keys that were not
    in ``snapshot``. Best effort: the demo is ending anyway."""
    client = redis.Redis.from_url(snapshot.url)
    with suppress(redis.RedisError), client:
        appeared = set(client.scan_iter(count=1000)) - snapshot.names
        if keys.buffers:
            client.zrem(BUFFER_INDEX, *(buffer.base for buffer in keys.buffers))
        if keys.worker_prefix is not None:
            pattern = f"{keys.worker_prefix}*"
            workers = list(client.zscan_iter(HEARTBEATS, match=pattern))
            if workers:
                client.zrem(HEARTBEATS, *(name for name, _ in workers))
        if keys.beat_name is not None and heartbeat_key(keys.beat_name).encode() in appeared:
            client.zrem(HEARTBEATS, keys.beat_name)
        doomed = [name for name in appeared if keys.owns(name.decode(errors="replace"))]
        for start in range(0, len(doomed), DELETE_CHUNK):
            client.delete(*doomed[start : start + DELETE_CHUNK])


@dataclass(frozen=True)
class DemoRedis:
    """The Redis the demo's buffers and broker use."""

    url: str
    broker_url: str
    #: Whether the demo started this redis-server (and stops it at the end).
    started_here: bool

    def describe(self) -> list[tuple[str, str]]:
        """(label, text) lines saying which Redis the demo uses and what it does there."""
        if self.started_here:
            return [("redis", f"{self.url} (its own redis-server, stopped at the end)")]
        lines = [
            (
                "redis",
                f"{mask_url(self.url)} (SHEETSYNC_REDIS_URL; the demo removes its keys at the end)",
            )
        ]
        if self.broker_url != self.url:
            lines.append(("broker", f"{mask_url(self.broker_url)} (SHEETSYNC_BROKER_URL)"))
        return lines


def open_demo_redis(
    configured_url: str | None, configured_broker_url: str | None, cleanup: ExitStack
) -> tuple[DemoRedis, DemoKeys]:
    """The Redis to use, with what tidies it registered on ``cleanup``.

    Register this before starting anything that writes to Redis (the worker), so that
    the tidying runs after it stopped.
    """
    keys = DemoKeys()
    if not configured_url:
        server = start_redis_server()
        cleanup.callback(server.stop)
        return DemoRedis(server.url, server.url, started_here=True), keys
    broker_url = configured_broker_url or configured_url
    for variable, url in _distinct(
        (("SHEETSYNC_REDIS_URL", configured_url), ("SHEETSYNC_BROKER_URL", broker_url))
    ):
        if not redis_answers(url):
            raise LocalStackError(
                f"no Redis answers at {variable}={mask_url(url)}: start it, or unset "
                "SHEETSYNC_REDIS_URL and the demo starts a redis-server of its own"
            )
        cleanup.callback(forget_demo_keys, KeySnapshot.take(url), keys)
    return DemoRedis(configured_url, broker_url, started_here=False), keys


def _distinct(named_urls: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    distinct = []
    for variable, url in named_urls:
        if url not in seen:
            seen.add(url)
            distinct.append((variable, url))
    return distinct

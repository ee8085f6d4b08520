"""The services one process works with: its settings, Redis, the buffer store, the rate
limiter and the database, built once per process (a Redis pipeline is something else:
``redis.pipeline()``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import redis
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import redis_urls
from sheetsync.buffers.store import BufferStore
from sheetsync.db import make_engine, session_factory
from sheetsync.settings import Settings, get_settings
from sheetsync.sheets.limiter import RateLimiter


@dataclass
class Services:
    settings: Settings
    redis: redis.Redis
    store: BufferStore
    limiter: RateLimiter
    engine: Engine
    sessions: sessionmaker[Session]

    @classmethod
    def build(
        cls,
        settings: Settings | None = None,
        *,
        engine: Engine | None = None,
        client: Redis | None = None,
    ) -> Services:
        settings = settings or get_settings()
        client = client or redis_client(settings)
        store = BufferStore(client, settings)
        engine = engine or make_engine(settings.database_url)
        return cls(
            settings=settings,
            redis=client,
            store=store,
            limiter=RateLimiter(client, settings, store.scripts),
            engine=engine,
            sessions=session_factory(engine),
        )

    def close(self) -> None:
        self.redis.close()
        self.engine.dispose()


def redis_client(settings: Settings) -> Redis:
    """The client of ``REDIS_URL``, with the settings' timeouts and one try per call: a
    hung Redis costs a call (the web app's push, a flush's step) a bounded wait, not
    redis-py's default of 5 s. A Sentinel URL's sentinels get the timeouts too."""
    return redis_urls.client(
        settings.redis_url,
        health_check_interval=30,
        socket_connect_timeout=settings.redis_connect_timeout_s,
        socket_timeout=settings.redis_timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


_lock = threading.Lock()
_current: Services | None = None


def get_services() -> Services:
    """The process-wide services, built on first use from the settings."""
    global _current  # noqa: PLW0603 (one per process, rebuilt after fork)
    with _lock:
        if _current is None:
            _current = Services.build()
        return _current


def reset_services() -> None:
    """Drop the process-wide services (after a fork, or when the settings change)."""
    global _current  # noqa: PLW0603
    with _lock:
        if _current is not None:
            _current.close()
        _current = None

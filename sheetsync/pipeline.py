"""The handles one process needs to run the pipeline, built once per process."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import redis
from redis import Redis
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from sheetsync import redis_urls
from sheetsync.buffers.store import BufferStore
from sheetsync.db import make_engine, session_factory
from sheetsync.settings import Settings, get_settings
from sheetsync.sheets.limiter import RateLimiter


@dataclass
class Pipeline:
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
    ) -> Pipeline:
        settings = settings or get_settings()
        client = client or redis_urls.client(settings.redis_url, health_check_interval=30)
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


_lock = threading.Lock()
_current: Pipeline | None = None


def get_pipeline() -> Pipeline:
    """The process-wide pipeline, built on first use from the settings."""
    global _current  # noqa: PLW0603 (one per process, rebuilt after fork)
    with _lock:
        if _current is None:
            _current = Pipeline.build()
        return _current


def reset_pipeline() -> None:
    """Drop the process-wide pipeline (after a fork, or when the settings change)."""
    global _current  # noqa: PLW0603
    with _lock:
        if _current is not None:
            _current.close()
        _current = None

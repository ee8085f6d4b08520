"""The Celery configuration, derived from the ``SHEETSYNC_*`` settings.

Every queue sheetsync uses is declared here, so a plain ``celery -A sheetsync.celery
worker`` (no ``-Q``) consumes all three; ``-Q`` narrows a worker to some of them.
"""

from __future__ import annotations

from typing import Any

from kombu.entity import Exchange, Queue

from sheetsync import redis_urls
from sheetsync.dispatch import QUEUE_DEFAULT, QUEUE_SCHEDULED, QUEUES
from sheetsync.settings import Settings
from sheetsync.task_messages import SOCKET_OPTIONS


def config_for(settings: Settings) -> dict[str, Any]:
    """The Celery configuration for these settings (tests rebuild it after changes)."""
    broker = redis_urls.kombu_broker(settings.celery_broker_url)
    sentinel = redis_urls.is_sentinel(settings.celery_broker_url)
    return {
        "broker_url": broker.url,
        # TLS (rediss://) as the URL's query says: kombu's own rediss handling does not run
        # with a transport class of sheetsync's (see redis_urls.kombu_broker).
        "broker_use_ssl": broker.use_ssl,
        # kombu's Redis (or Sentinel) transport, with a fix that keeps workers alive when
        # Redis restarts (see sheetsync.celery.transport).
        "broker_transport": "sheetsync.celery.transport:"
        + ("SentinelTransport" if sentinel else "Transport"),
        "broker_connection_retry_on_startup": True,
        # A countdown longer than this would be redelivered (and run twice) by the Redis
        # transport; nothing sheetsync sends comes near it (dead letters live in the DB).
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_s,
            # A broker that accepts and never answers must not hold a send forever (a web
            # app's push thread, a worker's flush): the bounds of the slim install's.
            **SOCKET_OPTIONS,
            **broker.transport_options,
        },
        "task_queues": [Queue(name, Exchange(name), routing_key=name) for name in QUEUES],
        "task_default_queue": QUEUE_DEFAULT,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_ignore_result": True,
        "result_backend": None,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "task_routes": {
            "sheetsync.sweep": {"queue": QUEUE_SCHEDULED},
            "sheetsync.reconcile": {"queue": QUEUE_SCHEDULED},
            "sheetsync.dispatch_dead_letters": {"queue": QUEUE_SCHEDULED},
            "sheetsync.replay_dead_letter": {"queue": QUEUE_SCHEDULED},
            "sheetsync.notify_owner": {"queue": QUEUE_SCHEDULED},
        },
        # Each periodic job once per interval, however many beats run (celery/beat.py).
        "beat_scheduler": "sheetsync.celery.beat:ClaimingScheduler",
        "beat_schedule": {
            "sheetsync-sweep": {"task": "sheetsync.sweep", "schedule": settings.sweep_interval_s},
            "sheetsync-reconcile": {
                "task": "sheetsync.reconcile",
                "schedule": settings.reconcile_interval_s,
            },
            "sheetsync-dead-letters": {
                "task": "sheetsync.dispatch_dead_letters",
                "schedule": settings.dlq_dispatch_interval_s,
            },
        },
        "worker_hijack_root_logger": False,
    }

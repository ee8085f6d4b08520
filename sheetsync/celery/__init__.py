"""sheetsync's Celery app: ``celery -A sheetsync.celery worker``, ``beat`` or ``flower``.

The library never imports this package; it sends tasks through
:class:`sheetsync.celery.dispatcher.CeleryDispatcher`, found by name.
"""

from sheetsync.celery.application import app

__all__ = ["app"]

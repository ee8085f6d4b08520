"""sheetsync's Celery app: ``celery -A sheetsync.celery worker``, ``beat`` or ``flower``.

The library never imports this package; it sends tasks through
:class:`sheetsync.celery.dispatcher.CeleryDispatcher`, found by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sheetsync.celery.application import app

__all__ = ["app"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so `python -m sheetsync.celery.flower` can say which extra
    # is missing (one line) before anything imports Celery.
    if name == "app":
        from sheetsync.celery.application import app

        return app
    raise AttributeError(f"module 'sheetsync.celery' has no attribute {name!r}")

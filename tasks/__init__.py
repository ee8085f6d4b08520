"""``celery -A tasks worker`` from a checkout or the image: a shim for ``sheetsync.celery``.

The app and its tasks live in the package (``celery -A sheetsync.celery worker`` works
from any directory); this module is not installed.
"""

from sheetsync.celery import app
from sheetsync.celery.tasks import (
    dispatch_dead_letters,
    flush_buffer,
    reconcile,
    replay_dead_letter,
    sweep,
)

__all__ = [
    "app",
    "dispatch_dead_letters",
    "flush_buffer",
    "reconcile",
    "replay_dead_letter",
    "sweep",
]

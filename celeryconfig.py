"""A shim: sheetsync's Celery settings live in :mod:`sheetsync.celery.config`.

Kept for ``celery --config celeryconfig`` and older imports; not installed.
"""

from sheetsync.celery.config import config_for
from sheetsync.settings import get_settings

globals().update(config_for(get_settings()))

__all__ = ["config_for"]

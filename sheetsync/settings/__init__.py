"""Every ``SHEETSYNC_*`` setting: one frozen, typed object, validated once.

- :mod:`~sheetsync.settings.fields`: the settings, one field each, each carrying its
  metadata (a :class:`~sheetsync.settings.meta.Setting`: where it takes effect, how its
  value is checked);
- :mod:`~sheetsync.settings.meta`: that metadata, and the processes;
- :mod:`~sheetsync.settings.checks`: what a value must look like;
- :mod:`~sheetsync.settings.model`: :class:`Settings` (the checks run, the rules between
  settings, the rate limits) and the process-wide copy, :func:`get_settings`.
"""

from __future__ import annotations

from sheetsync.settings.checks import DATABASE_SCHEMES
from sheetsync.settings.fields import (
    DEFAULT_CELL_CHARS_MAX,
    DEFAULT_GOOGLE_API_ENDPOINT,
    DEFAULT_GOOGLE_TOKEN_URI,
    DEFAULT_REQUEST_BYTES_MAX,
)
from sheetsync.settings.meta import ENV_PREFIX, Process, Readers, Setting, setting_of
from sheetsync.settings.model import (
    NON_SETTING_VARIABLES,
    GoogleClient,
    RateLimits,
    Settings,
    get_settings,
    reset_settings,
    unknown_variables,
)

__all__ = [
    "DATABASE_SCHEMES",
    "DEFAULT_CELL_CHARS_MAX",
    "DEFAULT_GOOGLE_API_ENDPOINT",
    "DEFAULT_GOOGLE_TOKEN_URI",
    "DEFAULT_REQUEST_BYTES_MAX",
    "ENV_PREFIX",
    "NON_SETTING_VARIABLES",
    "GoogleClient",
    "Process",
    "RateLimits",
    "Readers",
    "Setting",
    "Settings",
    "get_settings",
    "reset_settings",
    "setting_of",
    "unknown_variables",
]

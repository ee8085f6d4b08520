"""The Redis databases the tests use (each flushed by the fixture that hands it out)."""

from __future__ import annotations

import os

#: Buffers of the pipeline tests; the broker uses the next-lower database.
PIPELINE_REDIS_URL = os.environ.get("SHEETSYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def broker_url_for(url: str) -> str:
    """The broker database next to a buffer database: ``.../15`` gives ``.../14``."""
    base, _, db = url.rpartition("/")
    return f"{base}/{max(int(db or 0) - 1, 0)}"

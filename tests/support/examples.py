"""How many examples a hypothesis property tries: all of them in ``make test``, a tenth
(at least 20) in ``make test-fast``, which sets ``SHEETSYNC_TEST_TIER=fast`` so the loop
stays within a minute. The properties are the same; ``make test`` and CI run them whole."""

from __future__ import annotations

import os

#: The share of the examples the fast tier tries.
FAST_SHARE = 10
#: The fewest examples a property tries in the fast tier.
FAST_FLOOR = 20


def examples(full: int) -> int:
    """``full`` in a whole run; a tenth of it, no fewer than 20, in the fast tier."""
    if os.environ.get("SHEETSYNC_TEST_TIER") == "fast":
        return min(full, max(FAST_FLOOR, full // FAST_SHARE))
    return full

"""``sheetsync keys``: the keys that encrypt personal info at rest (SHEETSYNC_PII_KEYS).

The module is named for what the command makes, PII keys; Redis key names are
:mod:`sheetsync.redis_keys`'s."""

from __future__ import annotations

import os
import sys

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import hint, out

app = new_app("Keys for personal info at rest.")


@app.command("generate", cls=HelpCommand)
def generate() -> None:
    """Print a new key for SHEETSYNC_PII_KEYS.

    Only the key goes to stdout, so `export SHEETSYNC_PII_KEYS=$(sheetsync keys generate)`
    works. At a terminal a hint follows on stderr: how to rotate to it when keys are set
    already, where to put it when none are.
    """
    from sheetsync.crypto import generate_key

    out.print(generate_key(), markup=False)
    if not sys.stdout.isatty():
        return  # captured by a script or $(...): the key alone, no advice
    if os.environ.get("SHEETSYNC_PII_KEYS", "").strip():
        hint(
            "to rotate: put it first in SHEETSYNC_PII_KEYS (keep the old keys after it), "
            "restart, run `sheetsync pii rotate`, and drop the old keys once "
            "`sheetsync pii rotate --check` finds none left"
        )
    else:
        hint(
            "set it as SHEETSYNC_PII_KEYS in every process (the web app, the workers, the "
            "CLI), e.g. export SHEETSYNC_PII_KEYS=$(sheetsync keys generate)"
        )

"""sheetsync: stream form submissions into Google Sheets, debounced, exactly once.

The calls a web app makes::

    from sheetsync import emit_answer_submitted, credential_reconnected, resend_failed
    from sheetsync import emit_answers_submitted  # a bulk import
    from sheetsync import emit_answer_updated, emit_answer_deleted  # edits, deletions
    from sheetsync import emit_answers_updated, emit_answers_deleted  # in bulk
    from sheetsync import links_changed  # after changing a link's owner or a plan
    from sheetsync import check_settings  # once, when the web app starts
    from sheetsync import backfill  # a form's existing answers to a newly linked sheet
    from sheetsync import wait_for_pushes  # a script about to exit, a test

``sheetsync.__version__`` (and ``sheetsync --version``) is the installed version.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sheetsync.emit.answers import (
        EmitResult,
        emit_answer_submitted,
        emit_answers_submitted,
        links_changed,
    )
    from sheetsync.emit.backfill import BackfillResult, backfill
    from sheetsync.emit.changes import (
        emit_answer_deleted,
        emit_answer_updated,
        emit_answers_deleted,
        emit_answers_updated,
    )
    from sheetsync.emit.push_thread import wait_for_pushes
    from sheetsync.emit.resend import ResendResult, resend_failed
    from sheetsync.recovery.reconnect import credential_reconnected
    from sheetsync.startup import check_settings

#: The one source of the version: pyproject.toml reads it (``[tool.setuptools.dynamic]``).
__version__ = "0.1.0"

__all__ = [
    "BackfillResult",
    "EmitResult",
    "ResendResult",
    "__version__",
    "backfill",
    "check_settings",
    "credential_reconnected",
    "emit_answer_deleted",
    "emit_answer_submitted",
    "emit_answer_updated",
    "emit_answers_deleted",
    "emit_answers_submitted",
    "emit_answers_updated",
    "links_changed",
    "resend_failed",
    "wait_for_pushes",
]

#: Where each name lives; imported on first use, so `import sheetsync.crypto` stays light.
_LAZY = {
    "BackfillResult": "sheetsync.emit.backfill",
    "backfill": "sheetsync.emit.backfill",
    "EmitResult": "sheetsync.emit.answers",
    "emit_answer_submitted": "sheetsync.emit.answers",
    "emit_answers_submitted": "sheetsync.emit.answers",
    "emit_answer_updated": "sheetsync.emit.changes",
    "emit_answers_updated": "sheetsync.emit.changes",
    "emit_answer_deleted": "sheetsync.emit.changes",
    "emit_answers_deleted": "sheetsync.emit.changes",
    "links_changed": "sheetsync.emit.answers",
    "ResendResult": "sheetsync.emit.resend",
    "resend_failed": "sheetsync.emit.resend",
    "credential_reconnected": "sheetsync.recovery.reconnect",
    "check_settings": "sheetsync.startup",
    "wait_for_pushes": "sheetsync.emit.push_thread",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sheetsync' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

"""sheetsync: stream form submissions into Google Sheets, debounced, exactly once.

The two calls a web app makes::

    from sheetsync import emit_answer_submitted, credential_reconnected
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sheetsync.emit.answers import EmitResult, emit_answer_submitted
    from sheetsync.recovery.replay import credential_reconnected

__all__ = ["EmitResult", "credential_reconnected", "emit_answer_submitted"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so `import sheetsync.crypto` stays light.
    if name in ("emit_answer_submitted", "EmitResult"):
        from sheetsync.emit import answers as emit

        return getattr(emit, name)
    if name == "credential_reconnected":
        from sheetsync.recovery.replay import credential_reconnected

        return credential_reconnected
    raise AttributeError(f"module 'sheetsync' has no attribute {name!r}")

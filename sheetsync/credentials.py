"""Owners' Google credentials: the one place that changes a credential's status.

A flush marks a credential INVALID when Google refuses it; the owner reconnecting marks
it VALID again (:func:`sheetsync.recovery.reconnect.credential_reconnected`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from sheetsync.models import CredentialStatus, GoogleCredential, utcnow


def mark(
    session: Session, user_id: str, status: CredentialStatus, *, now: datetime | None = None
) -> bool:
    """Set an owner's credential status. Returns whether the owner has a credential."""
    result = session.execute(
        update(GoogleCredential)
        .where(GoogleCredential.user_id == user_id)
        .values(status=status, updated_at=now or utcnow())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def mark_invalid_if_unchanged(session: Session, user_id: str, version: datetime) -> bool:
    """Mark the credential INVALID only if it is still the one a run read (its
    ``updated_at``): a run that started before the owner reconnected must not undo the
    reconnect. Returns whether it was marked."""
    result = session.execute(
        update(GoogleCredential)
        .where(GoogleCredential.user_id == user_id, GoogleCredential.updated_at == version)
        .values(status=CredentialStatus.INVALID, updated_at=utcnow())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]

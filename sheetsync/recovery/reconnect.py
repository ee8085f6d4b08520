"""An owner reconnected Google: their credential is VALID again and their dead letters are
due at once. The web app calls this (``sheetsync.credential_reconnected``) from its OAuth
callback, so it imports nothing of the flush or Google's client (the slim install)."""

from __future__ import annotations

from sheetsync import credentials, notify
from sheetsync.deadletters import store
from sheetsync.errors import NotFoundError
from sheetsync.models import CredentialStatus
from sheetsync.services import Services


def credential_reconnected(user_id: str, *, services: Services | None = None) -> list[int]:
    """The owner reconnected Google: credential VALID, their dead letters due now.

    Returns the ids of the dead letters made due.
    """
    from sheetsync.services import get_services

    services = services or get_services()
    with services.sessions.begin() as session:
        if not credentials.mark(session, user_id, CredentialStatus.VALID):
            raise NotFoundError(f"user {user_id} has no Google credential")
    # A credential that breaks again, even within the hour, is news for the owner.
    notify.forget(services.redis, notify.CREDENTIAL_INVALID, user_id)
    return store.make_due(services.sessions, user_id=user_id)

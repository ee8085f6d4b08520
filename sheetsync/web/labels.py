"""How the console names forms and accounts, and what it says of an owner's credential.

A form is shown by its title with its id beside it: titles are what an operator
recognises, the id tells two forms of one title apart. An owner is shown by sheetsync's
own user id (``[A-Za-z0-9_-]{1,128}``: never an email), and a Google account, in the
rate-limit meters, by the owners whose credential uses it: the Google account id is
Google's identifier of a person, and ``users.email`` is personal info; neither is shown.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sheetsync.models import CredentialStatus, GoogleCredential, Submission

#: What an owner without a credential row shows as (they never connected Google, or
#: the row was deleted).
NO_CREDENTIAL = "none"
#: Ids per query (keeps IN lists under every database's parameter limit).
CHUNK = 500


def _chunks(values: Iterable[str]) -> Iterable[list[str]]:
    ordered = sorted(set(values))
    for start in range(0, len(ordered), CHUNK):
        yield ordered[start : start + CHUNK]


def form_titles(sessions: sessionmaker[Session], form_ids: Collection[str]) -> dict[str, str]:
    """The title of each form in ``form_ids`` that still exists."""
    titles: dict[str, str] = {}
    with sessions() as session:
        for chunk in _chunks(form_ids):
            query = select(Submission.id, Submission.title).where(Submission.id.in_(chunk))
            titles.update({form_id: title or "" for form_id, title in session.execute(query)})
    return titles


def credential_states(sessions: sessionmaker[Session], owners: Collection[str]) -> dict[str, str]:
    """Each owner's credential status (VALID, INVALID, EXPIRED), or ``none``."""
    states = dict.fromkeys(owners, NO_CREDENTIAL)
    with sessions() as session:
        for chunk in _chunks(owners):
            query = select(GoogleCredential.user_id, GoogleCredential.status).where(
                GoogleCredential.user_id.in_(chunk)
            )
            states.update(
                {user: CredentialStatus(status).value for user, status in session.execute(query)}
            )
    return states


def account_owners(sessions: sessionmaker[Session]) -> dict[str, list[str]]:
    """The owners (user ids, sorted) whose credential uses each Google account."""
    owners: dict[str, list[str]] = {}
    with sessions() as session:
        query = select(GoogleCredential.google_account_id, GoogleCredential.user_id).order_by(
            GoogleCredential.user_id
        )
        for account, user in session.execute(query):
            owners.setdefault(account, []).append(user)
    return owners


def unusable_owners(states: dict[str, str], counts: dict[str, int]) -> list[dict[str, Any]]:
    """The owners among ``counts`` (owner -> dead letters) whose credential is not
    VALID: a replay of theirs meets the same refusal and parks its answers again."""
    return [
        {"owner": owner, "credential": states.get(owner, NO_CREDENTIAL), "entries": count}
        for owner, count in sorted(counts.items())
        if states.get(owner, NO_CREDENTIAL) != CredentialStatus.VALID.value
    ]

"""Links: which sheets a form's answers may go to. A flush writes only where a link
says to, and only a link the form's owner made (or one the web app allows).

A buffer is one link's: (owner, form, spreadsheet, gid). When that link is gone, its
ids go to the link that replaced it for the same sheet (another owner's link, or one
kept by the migration that merged duplicates), or, with none, end FAILED: an owner who
unlinked a sheet must not get new personal info in it.

**Who may link.** The link row alone would decide where a form's decrypted answers go
and whose Google account writes them, so by default a link is honoured only when its
creator (``create_user_id``) is the form's owner. ``SHEETSYNC_LINK_AUTHORIZER`` (a
dotted path) or :func:`set_authorizer` names a function ``(session, link, form) ->
bool`` that can allow collaborators; every process (web app and workers) must see the
same one, so prefer the setting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from sheetsync.dispatch import queue_for_plan
from sheetsync.errors import SheetSyncError
from sheetsync.models import SpreadSheet, Submission, User
from sheetsync.redis_keys import BufferKey
from sheetsync.settings import get_settings
from sheetsync.settings.checks import import_callable

#: Reasons recorded on the FAILED ids of a buffer whose link is gone or refused.
FORM_DELETED = "form deleted"
LINK_REMOVED = "link removed"
LINK_REFUSED = "link refused: its creator may not send this form's answers"

#: ``(session, link, form) -> bool``: may this link send the form's answers?
Authorizer = Callable[[Session, SpreadSheet, Submission], bool]


def owner_only(_session: Session, link: SpreadSheet, form: Submission) -> bool:
    """The default: only the form's owner may link it to a sheet."""
    return link.create_user_id == form.owner_id


_registered: Authorizer | None = None


def set_authorizer(authorizer: Authorizer | None) -> None:
    """Use ``authorizer`` in this process (None: back to the setting or the default)."""
    global _registered  # noqa: PLW0603 (one registration per process, like logging's)
    _registered = authorizer


def may_send(session: Session, link: SpreadSheet, form: Submission) -> bool:
    """Whether ``link`` may send ``form``'s answers to its sheet."""
    if link.create_user_id == form.owner_id:
        return True  # every policy allows the owner (and this is the hot path)
    return bool(configured_authorizer()(session, link, form))


def configured_authorizer() -> Authorizer:
    """The function that decides (imported on first use; a bad path is a ConfigError)."""
    if _registered is not None:
        return _registered
    return _load(get_settings().link_authorizer)


@functools.cache
def _load(dotted: str | None) -> Authorizer:
    if dotted is None:
        return owner_only
    return cast(Authorizer, import_callable(dotted, "SHEETSYNC_LINK_AUTHORIZER"))


class LinkGone(SheetSyncError):  # noqa: N818 (reads as the condition it is)
    """The buffer's link no longer exists. ``successor`` is the (buffer, queue) of the
    link that now sends the same form to the same sheet, or None."""

    reason: str
    successor: tuple[BufferKey, str] | None


def check(session: Session, key: BufferKey) -> SpreadSheet:
    """The buffer's link, if it exists and may send; raise :class:`LinkGone` if not."""
    found = session.execute(
        select(SpreadSheet, Submission, User.plan)
        .join(Submission, Submission.id == SpreadSheet.submission_id)
        .join(User, User.id == SpreadSheet.create_user_id)
        .where(
            SpreadSheet.submission_id == key.submission_id,
            SpreadSheet.spread_sheet_id == key.spread_sheet_id,
            SpreadSheet.sheet_id == key.sheet_id,
        )
    ).first()
    if found is None:
        form_exists = session.scalar(
            select(Submission.id).where(Submission.id == key.submission_id)
        )
        reason = LINK_REMOVED if form_exists else FORM_DELETED
        raise LinkGone(f"{reason}: {key.base}", reason=reason, successor=None)
    link, form, plan = found
    if not may_send(session, link, form):
        raise LinkGone(f"link {link.id} refused: {key.base}", reason=LINK_REFUSED, successor=None)
    if link.create_user_id != key.user_id:
        successor = BufferKey(
            link.create_user_id, key.submission_id, key.spread_sheet_id, key.sheet_id
        )
        raise LinkGone(
            f"link of {key.base} moved to owner {link.create_user_id}",
            reason=LINK_REMOVED,
            successor=(successor, queue_for_plan(plan)),
        )
    return link


def queue_of(session: Session, user_id: str) -> str:
    """The flush queue of an owner, by their plan."""
    return queue_for_plan(session.scalar(select(User.plan).where(User.id == user_id)))

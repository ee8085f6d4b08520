"""Owner notifications: tell a form's owner that their answers stopped reaching a sheet
(or started again), through ``SHEETSYNC_OWNER_HOOK``.

The hook is either an https webhook URL, which gets the notification as JSON, or a
dotted path ``package.module:function`` to a callable that takes a :class:`Notification`
(the web app can email the owner). It is called when:

- an owner's Google credential breaks (:data:`CREDENTIAL_INVALID`, from the flush that
  parks their answers);
- a link fails for good (:data:`LINK_FAILED`: the form, link or sheet is gone or refuses
  the answers) or is paused
  (:data:`LINK_PAUSED`: row 1 no longer matches its columns);
- their dead letters are replayed (:data:`DEAD_LETTERS_REPLAYED`);
- a deletion or erasure could not be applied to a sheet, and waits (:data:`ERASURE_PENDING`).

A notification carries ids and a fixed message, never answer values, tokens or error
text from Google. Its ids are checked before any hook sees them (:func:`field_problem`):
the owner, the form and the spreadsheet as the ids a key may hold
(:func:`sheetsync.redis_keys.check_id`), the link as a positive integer. A notification with
any other value (a task from the broker is text from outside) is dropped with one log
line that shows the value clipped, never whole.

**At most once per (owner, topic) an hour.** :func:`notify` claims a Redis key
(``SET NX EX``, :func:`sheetsync.redis_keys.owner_notified_key`) before anything is sent, so a
busy form whose every flush fails sends one notification. A claim that Redis cannot
make (Redis down) sends anyway: better twice than never.

**Off the flush's path.** :func:`notify` only claims the key and hands the notification
to the task queue (one broker write, like a flush task), through
:func:`sheetsync.dispatch.get_dispatcher`: a Celery task on the scheduled queue calls
the hook, with up to ``SHEETSYNC_OWNER_HOOK_TRIES`` tries and exponential backoff. A
task rather than a background thread because it survives the worker that parked the
answers being stopped or killed (the broker keeps it), retries without holding a
thread, and runs on the scheduled workers, never in a flush's pool slot. A hook that
raises, hangs (the webhook's timeout; a callable is bounded by the task's time limit
under the prefork pool) or is down never fails, delays or retries a flush: nothing
here raises into the pipeline.

**A delivery that fails for good releases the claim.** When the last try fails (or the
task cannot even be sent), the key is deleted, so the next event for that owner and
topic tries again instead of staying silent for the rest of the hour. The cost is at
most one attempt per event while the hook is down, which the claim's own retries
already bound. An owner who reconnects Google has the claim on
:data:`CREDENTIAL_INVALID` dropped (:func:`forget`), so a credential that breaks again
within the hour is told again.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sheetsync.dispatch import get_dispatcher
from sheetsync.errors import SheetSyncError, ValidationError
from sheetsync.models import SpreadSheet
from sheetsync.redis_keys import BufferKey, check_id, owner_notified_key
from sheetsync.settings import Settings, get_settings
from sheetsync.settings.checks import import_callable
from sheetsync.text import clip
from sheetsync.webhooks import WebhookError, post_json

log = logging.getLogger(__name__)

CREDENTIAL_INVALID = "credential_invalid"
LINK_FAILED = "link_failed"
LINK_PAUSED = "link_paused"
DEAD_LETTERS_REPLAYED = "dead_letters_replayed"
ERASURE_PENDING = "erasure_pending"

#: The one message per topic: fixed text, so nothing from outside reaches the owner.
MESSAGES = {
    CREDENTIAL_INVALID: "Reconnect Google to resume syncing: Google refused sheetsync's access",
    LINK_FAILED: "A linked sheet stopped receiving answers: the sheet, its form or its link "
    "is gone or refused",
    LINK_PAUSED: "A linked sheet is paused: its first row no longer matches the form's columns",
    DEAD_LETTERS_REPLAYED: "Answers that waited are being written to your sheet again",
    ERASURE_PENDING: "Deleted answers could not be removed from a linked sheet yet: they "
    "are removed once sheetsync can reach it again",
}


#: What an owner, form or spreadsheet id may look like (:func:`sheetsync.redis_keys.check_id`).
ID_SHAPE = "letters, digits, - and _, 1 to 128 of them"
#: ``spread_sheet.id`` is a BIGINT.
MAX_LINK_ID = 2**63 - 1
#: Characters of a refused value a log line shows.
SHOWN_CHARS = 6


class HookError(SheetSyncError):
    """The owner hook did not take a notification (the task retries it)."""


class UnknownTopicError(SheetSyncError):
    """A notification task named a topic sheetsync does not send (it is dropped)."""


class MalformedNotificationError(UnknownTopicError):
    """A notification whose owner, form, spreadsheet, link or time is not what the schema
    holds: dropped before any hook sees it. A kind of :class:`UnknownTopicError`, so the
    task that refuses a forged topic refuses it the same way."""


@dataclass(frozen=True, slots=True)
class Notification:
    """What the hook receives. Ids and a fixed message only: no answer values, tokens
    or error text (those could carry personal info)."""

    topic: str
    #: The owner's user id (``users.id``).
    owner: str
    #: The form (``submission.id``), if the event is about one.
    form_id: str | None
    #: The link (``spread_sheet.id``), if the event is about one.
    link_id: int | None
    spreadsheet_id: str | None
    message: str
    #: When it happened, ISO 8601 in UTC.
    time: str

    def __post_init__(self) -> None:
        problem = field_problem(
            owner=self.owner,
            form_id=self.form_id,
            link_id=self.link_id,
            spreadsheet_id=self.spreadsheet_id,
        )
        if problem:
            raise MalformedNotificationError(f"owner notification {self.topic} refused: {problem}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Notification:
        """The notification a task carries, its message rebuilt from its topic: a task
        whose topic is not one of :data:`MESSAGES` is refused (:class:`UnknownTopicError`),
        and no text from the task reaches the owner."""
        topic = str(data.get("topic"))
        if topic not in MESSAGES:
            raise UnknownTopicError("a notification task carried an unknown topic: refused")
        return cls(
            topic=topic,
            owner=data.get("owner", ""),  # checked, like every id, by __post_init__
            form_id=data.get("form_id"),
            link_id=data.get("link_id"),
            spreadsheet_id=data.get("spreadsheet_id"),
            message=MESSAGES[topic],
            time=_utc_time(topic, data.get("time")),
        )


def field_problem(
    *, owner: object, form_id: object, link_id: object, spreadsheet_id: object
) -> str | None:
    """Why a notification's ids are not what the schema holds, or None. The owner
    (``users.id``) names a Redis key (:func:`sheetsync.redis_keys.owner_notified_key`); the
    form (``submission.id``) and Google's spreadsheet id are key parts of every buffer:
    all three are checked as :func:`sheetsync.redis_keys.check_id` checks a key's ids. The link
    is ``spread_sheet.id``, a positive integer."""
    ids = {"owner": owner, "form_id": form_id, "spreadsheet_id": spreadsheet_id}
    for name, value in ids.items():
        if value is None and name != "owner":
            continue
        try:
            check_id(value, name)
        except ValidationError:
            return f"its {name} is not an id ({ID_SHAPE}): {_shown(value)}"
    if link_id is not None and (
        isinstance(link_id, bool) or not isinstance(link_id, int) or not 0 < link_id <= MAX_LINK_ID
    ):
        return f"its link_id is not a positive integer: {_shown(link_id)}"
    return None


def _utc_time(topic: str, value: object) -> str:
    """A task's time as ISO 8601 in UTC, rebuilt: no text from the task passes through."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise MalformedNotificationError(
            f"owner notification {topic} refused: its time is not ISO 8601 with a time "
            f"zone: {_shown(value)}"
        )
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _shown(value: object) -> str:
    """A refused value as a log line may show it: its first characters (escaped) and its
    length, never the whole of it (it could be anything, personal info included)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    if value is None or isinstance(value, bool) or not isinstance(value, str | int):
        return f"a {type(value).__name__}"
    text = str(value)
    return f"{clip(text, SHOWN_CHARS)!r} ({len(text)} characters)"


def notify(
    client: redis.Redis,
    topic: str,
    owner: str,
    *,
    form_id: str | None = None,
    link_id: int | None = None,
    spreadsheet_id: str | None = None,
    find_link_id: Callable[[], int | None] | None = None,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> bool:
    """Send ``topic`` to ``owner`` unless it went out within the hour. Never raises.
    ``find_link_id`` looks the link up, only once the claim is made. Returns whether a
    delivery was handed to the task queue."""
    try:
        settings = settings or get_settings()
        if settings.owner_hook is None:
            return False
        problem = field_problem(
            owner=owner, form_id=form_id, link_id=link_id, spreadsheet_id=spreadsheet_id
        )
        if problem:
            raise MalformedNotificationError(f"owner notification {topic} dropped: {problem}")
        if not _claim(client, topic, owner, settings.owner_hook_repeat_after_s):
            return False
        if link_id is None and find_link_id is not None:
            link_id = find_link_id()
        notification = Notification(
            topic=topic,
            owner=owner,
            form_id=form_id,
            link_id=link_id,
            spreadsheet_id=spreadsheet_id,
            message=MESSAGES[topic],
            time=(now or datetime.now(UTC)).isoformat(timespec="seconds"),
        )
        try:
            get_dispatcher().send_notification(notification.to_json())
        except Exception as exc:
            log.error("owner notification %s not sent: %s", topic, type(exc).__name__)
            forget(client, topic, owner)
            return False
        return True
    except MalformedNotificationError as exc:
        log.error("%s", exc)
        return False
    except Exception as exc:  # a notification must never break what called it
        log.error("owner notification %s failed: %s", topic, type(exc).__name__)
        return False


def notify_buffer(
    client: redis.Redis,
    sessions: sessionmaker[Session],
    topic: str,
    key: BufferKey,
    *,
    settings: Settings,
) -> bool:
    """:func:`notify` about a buffer's link (looked up only when a notification goes out)."""

    def find_link_id() -> int | None:
        try:
            with sessions() as session:
                return session.scalar(
                    select(SpreadSheet.id).where(
                        SpreadSheet.submission_id == key.submission_id,
                        SpreadSheet.spread_sheet_id == key.spread_sheet_id,
                        SpreadSheet.sheet_id == key.sheet_id,
                    )
                )
        except Exception as exc:
            log.info("no link id for a notification on %s: %s", key.base, type(exc).__name__)
            return None

    return notify(
        client,
        topic,
        key.user_id,
        form_id=key.submission_id,
        spreadsheet_id=key.spread_sheet_id,
        find_link_id=find_link_id,
        settings=settings,
    )


def forget(client: redis.Redis, topic: str, owner: str) -> None:
    """Drop the claim on (owner, topic): the next event notifies again."""
    try:
        client.delete(owner_notified_key(owner, topic))
    except redis.RedisError as exc:
        log.info("notification claim of %s not dropped: %s", topic, type(exc).__name__)


def _claim(client: redis.Redis, topic: str, owner: str, ttl_s: int) -> bool:
    try:
        return bool(client.set(owner_notified_key(owner, topic), "1", nx=True, ex=ttl_s))
    except redis.RedisError:
        return True


# -- delivery (in the task) -------------------------------------------------------------


def deliver(notification: Notification, *, settings: Settings | None = None) -> None:
    """Call the hook once; raise :class:`HookError` (one line) if it did not take it."""
    settings = settings or get_settings()
    if settings.owner_hook is None:
        return
    hook = settings.owner_hook.get_secret_value()
    if is_url(hook):
        _post(hook, notification, settings.owner_hook_timeout_s)
        return
    try:
        configured_callable(hook)(notification)
    except Exception as exc:
        raise HookError(f"owner hook raised {type(exc).__name__}") from None


def delivery_failed(client: redis.Redis, notification: Notification) -> None:
    """Every try failed: release the claim so the next event tries again."""
    log.error(
        "owner notification %s for %s failed for good", notification.topic, notification.owner
    )
    forget(client, notification.topic, notification.owner)


def retry_delay_s(tries_done: int, settings: Settings) -> float:
    """Backoff before the next try: base, 2 x base, 4 x base..."""
    return float(settings.owner_hook_retry_base_s * 2 ** max(tries_done - 1, 0))


def _post(url: str, notification: Notification, timeout_s: float) -> None:
    try:
        post_json(url, notification.to_json(), deadline_s=timeout_s)
    except WebhookError as exc:
        raise HookError(f"owner {exc}") from None


def is_url(hook: str) -> bool:
    return hook.startswith(("https://", "http://"))


@functools.cache
def configured_callable(dotted: str) -> Callable[[Notification], object]:
    """The callable ``package.module:function`` names; ConfigError (one line) if not."""
    hook: Callable[[Notification], object] = import_callable(dotted, "SHEETSYNC_OWNER_HOOK")
    return hook


def check_hook(settings: Settings) -> None:
    """Import a dotted-path hook now (for :func:`sheetsync.startup.check_settings`)."""
    if settings.owner_hook is not None:
        hook = settings.owner_hook.get_secret_value()
        if not is_url(hook):
            configured_callable(hook)

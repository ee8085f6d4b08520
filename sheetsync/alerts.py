"""Operator alerts: a Slack-compatible ``{"text": ...}`` POST to a webhook.

Alerts name owners, forms, sheets and counts, never answer values. Sending one never
raises and never waits on the webhook: the alert is logged, then posted by a background
thread of this process (one per process, started on first use, also after a fork), so
neither a flush nor the web app's emit (inside its transaction) waits for Slack. The
emit hands its once-an-hour alerts to that thread whole (:func:`queue_alert_once`): the
thread asks Redis whether one went out, so the caller's transaction never waits for
Redis either. A process that exits gives the queue up to ALERT_TIMEOUT_S to drain.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from dataclasses import dataclass

import redis

from sheetsync.redis_keys import alert_once_key
from sheetsync.settings import Settings, get_settings
from sheetsync.webhooks import WebhookError, post_json

#: The same alert (same topic) is sent at most once in this many seconds.
DEFAULT_REPEAT_AFTER_S = 3600
#: Alerts waiting for the webhook; past this, new ones are logged only.
QUEUE_MAX = 100

log = logging.getLogger(__name__)


def slack_text(text: str) -> str:
    """``text`` with Slack's three control characters escaped, as Slack asks: names and
    messages from outside can then never ping a channel (``<!channel>``) or make a
    link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass(frozen=True, slots=True)
class _Alert:
    url: str
    text: str
    deadline_s: float


@dataclass(frozen=True, slots=True)
class _Once:
    """An alert to send unless one on ``topic`` went out lately (Redis says)."""

    client: redis.Redis
    topic: str
    text: str
    repeat_after_s: int
    settings: Settings


class _Sender:
    """This process's alert queue and the thread that posts it."""

    def __init__(self) -> None:
        self.longest_deadline_s = 0.0
        self.queue: queue.Queue[_Alert | _Once] = queue.Queue(QUEUE_MAX)
        #: Topics queued and not decided yet: one each (a busy form's every answer would
        #: otherwise fill the queue with one broken link's alert).
        self.pending: set[str] = set()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="sheetsync-alerts", daemon=True)
        self.thread.start()

    def put(self, alert: _Alert | _Once) -> bool:
        if isinstance(alert, _Alert):
            self.longest_deadline_s = max(self.longest_deadline_s, alert.deadline_s)
        try:
            self.queue.put_nowait(alert)
        except queue.Full:
            log.error("alert not sent: %d alerts already wait for the webhook", QUEUE_MAX)
            return False
        return True

    def put_once(self, once: _Once) -> bool:
        redis_s = once.settings.redis_connect_timeout_s + once.settings.redis_timeout_s
        self.longest_deadline_s = max(
            self.longest_deadline_s, redis_s + once.settings.alert_timeout_s
        )
        with self.lock:
            if once.topic in self.pending:
                return False
            self.pending.add(once.topic)
        if self.put(once):
            return True
        with self.lock:
            self.pending.discard(once.topic)
        return False

    def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until every queued alert was posted or failed."""
        waiter = threading.Thread(target=self.queue.join, daemon=True)
        waiter.start()
        waiter.join(timeout_s)

    def _run(self) -> None:
        while True:
            alert = self.queue.get()
            try:
                if isinstance(alert, _Once):
                    self._decide(alert)
                else:
                    post_json(
                        alert.url,
                        {"text": f"[sheetsync] {slack_text(alert.text)}"},
                        deadline_s=alert.deadline_s,
                    )
            except WebhookError as exc:
                log.error("alert webhook failed: %s", exc)
            finally:
                self.queue.task_done()

    def _decide(self, once: _Once) -> None:
        with self.lock:
            self.pending.discard(once.topic)
        try:
            send_alert_once(
                once.client,
                once.topic,
                once.text,
                repeat_after_s=once.repeat_after_s,
                settings=once.settings,
            )
        except Exception:  # the thread must outlive any one alert
            log.exception("alert on %s not sent", once.topic)


#: This process's sender, by pid: a forked child starts its own (threads do not fork).
_senders: dict[int, _Sender] = {}
_senders_lock = threading.Lock()


def _current_sender() -> _Sender:
    with _senders_lock:
        sender = _senders.get(os.getpid())
        if sender is None:
            sender = _senders[os.getpid()] = _Sender()
        return sender


def drain_alerts(timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) for this process's queued alerts to be posted."""
    sender = _senders.get(os.getpid())
    if sender is not None:
        sender.drain(timeout_s)


def _drain_at_exit() -> None:
    sender = _senders.get(os.getpid())
    if sender is not None:
        sender.drain(sender.longest_deadline_s)


atexit.register(_drain_at_exit)


def send_alert(text: str, *, settings: Settings | None = None) -> bool:
    """Log ``text`` and queue it for ``SHEETSYNC_ALERT_WEBHOOK_URL``. Returns whether it
    was queued (False with no webhook, or with the queue full)."""
    settings = settings or get_settings()
    log.warning("alert: %s", text)
    if settings.alert_webhook_url is None:
        return False
    alert = _Alert(settings.alert_webhook_url.get_secret_value(), text, settings.alert_timeout_s)
    return _current_sender().put(alert)


def send_alert_once(
    client: redis.Redis,
    topic: str,
    text: str,
    *,
    repeat_after_s: int = DEFAULT_REPEAT_AFTER_S,
    settings: Settings | None = None,
) -> bool:
    """Send ``text`` unless an alert on ``topic`` went out in the last ``repeat_after_s``.

    A broken link or a deleted sheet fails every flush of a busy form; the operator
    needs to hear it once an hour, not every ten seconds. If Redis cannot say, send.
    """
    try:
        first = client.set(alert_once_key(topic), "1", nx=True, ex=repeat_after_s)
    except redis.RedisError:
        first = True
    if not first:
        log.info("alert on %s already sent within %d s", topic, repeat_after_s)
        return False
    return send_alert(text, settings=settings)


def queue_alert_once(
    client: redis.Redis,
    topic: str,
    text: str,
    *,
    repeat_after_s: int = DEFAULT_REPEAT_AFTER_S,
    settings: Settings | None = None,
) -> bool:
    """:func:`send_alert_once`, decided and sent by this process's alert thread: the
    caller (the web app's emit, inside its transaction) touches neither Redis nor the
    webhook. A topic waits in the queue once at most (a second call while it waits is
    dropped); Redis says whether one went out within ``repeat_after_s``. Returns whether
    it was queued."""
    once = _Once(client, topic, text, repeat_after_s, settings or get_settings())
    return _current_sender().put_once(once)

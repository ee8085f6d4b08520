"""Operator alerts: a Slack-compatible ``{"text": ...}`` POST to a webhook.

Alerts name owners, forms, sheets and counts, never answer values. Sending one never
raises: a dead webhook is logged and the flush goes on.
"""

from __future__ import annotations

import json
import logging
import urllib.request

import redis

from sheetsync.keys import alert_once_key
from sheetsync.settings import Settings, get_settings

#: The same alert (same topic) is sent at most once in this many seconds.
DEFAULT_REPEAT_AFTER_S = 3600

log = logging.getLogger(__name__)


def slack_text(text: str) -> str:
    """``text`` with Slack's three control characters escaped, as Slack asks: names and
    messages from outside can then never ping a channel (``<!channel>``) or make a
    link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def send_alert(text: str, *, settings: Settings | None = None) -> bool:
    """Post ``text`` to ``SHEETSYNC_ALERT_WEBHOOK_URL``. Returns whether it was delivered."""
    settings = settings or get_settings()
    log.warning("alert: %s", text)
    if settings.alert_webhook_url is None:
        return False
    url = settings.alert_webhook_url.get_secret_value()
    request = urllib.request.Request(  # noqa: S310 (the operator configures the URL)
        url,
        data=json.dumps({"text": f"[sheetsync] {slack_text(text)}"}).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.alert_timeout_s) as response:  # noqa: S310
            response.read()
    except Exception as exc:
        log.error("alert webhook failed: %s", type(exc).__name__)
        return False
    return True


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

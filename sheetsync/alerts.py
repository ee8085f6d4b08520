"""Operator alerts: a Slack-compatible ``{"text": ...}`` POST to a webhook.

Alerts name owners, forms, sheets and counts, never answer values. Sending one never
raises: a dead webhook is logged and the flush goes on.
"""

from __future__ import annotations

import json
import logging
import urllib.request

from sheetsync.settings import Settings, get_settings

log = logging.getLogger(__name__)


def send_alert(text: str, *, settings: Settings | None = None) -> bool:
    """Post ``text`` to ``SHEETSYNC_ALERT_WEBHOOK_URL``. Returns whether it was delivered."""
    settings = settings or get_settings()
    log.warning("alert: %s", text)
    if settings.alert_webhook_url is None:
        return False
    url = settings.alert_webhook_url.get_secret_value()
    request = urllib.request.Request(  # noqa: S310 (the operator configures the URL)
        url,
        data=json.dumps({"text": f"[sheetsync] {text}"}).encode("utf-8"),
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

"""The owner hook of the demo web app: ``SHEETSYNC_OWNER_HOOK=notifications:email_owner``
(with ``examples/webapp`` on the workers' ``PYTHONPATH``; your app names its own module).

sheetsync calls it from a worker task, at most once per owner and topic an hour, with a
:class:`sheetsync.notify.Notification`: ids and a short message, never answer values.
Raising makes sheetsync try again later (a few times, with backoff).
"""

from __future__ import annotations

import logging
import os
import smtplib
from email.message import EmailMessage

from sqlalchemy import select

from sheetsync.db import get_sessionmaker
from sheetsync.models import User
from sheetsync.notify import Notification

log = logging.getLogger(__name__)


def email_owner(notification: Notification) -> None:
    with get_sessionmaker()() as session:
        email = session.scalar(select(User.email).where(User.id == notification.owner))
    if email is None:
        return
    message = EmailMessage()
    message["From"] = "forms@example.com"
    message["To"] = email
    message["Subject"] = f"Your form's sheet: {notification.message}"
    message.set_content(
        f"{notification.message}.\n\nForm {notification.form_id}, sheet link "
        f"{notification.link_id}, at {notification.time}.\n"
        "Open your form's settings to reconnect Google or fix the sheet."
    )
    smtp_host = os.environ.get("WEBAPP_SMTP_HOST")
    if smtp_host is None:  # the demo: show it in the worker's log instead of sending it
        log.warning("would email %s: %s", email, message["Subject"])
        return
    with smtplib.SMTP(smtp_host) as smtp:
        smtp.send_message(message)

"""Owner hooks for the notification tests, named by dotted path
(``support.notify_hooks:record``) in ``SHEETSYNC_OWNER_HOOK``. They run in a worker
process, so they report through files named by ``SHEETSYNC_TEST_NOTIFY_DIR``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sheetsync.notify import Notification

#: How long :func:`hang` blocks (the task's time limit cuts it short).
HANG_S = 60.0


def _dir() -> Path:
    return Path(os.environ["SHEETSYNC_TEST_NOTIFY_DIR"])


def record(notification: Notification) -> None:
    """Append the notification, as JSON, to ``received.jsonl``."""
    with open(_dir() / "received.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(notification.to_json()) + "\n")


def explode(notification: Notification) -> None:
    """Count the try, then fail as a broken mail server would."""
    with open(_dir() / "tries.txt", "a", encoding="utf-8") as out:
        out.write(f"{notification.topic}\n")
    raise ConnectionRefusedError("smtp server down")


def hang(notification: Notification) -> None:
    """Say it started, then block far longer than any flush may wait."""
    (_dir() / "hanging").write_text(notification.topic)
    time.sleep(HANG_S)


def received(directory: Path) -> list[dict[str, object]]:
    path = directory / "received.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]

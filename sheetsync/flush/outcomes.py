"""What the end of a flush run means for its task."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import redis

from sheetsync.dispatch import FlushTask
from sheetsync.errors import SheetsError
from sheetsync.metrics import events
from sheetsync.metrics.names import FLUSH_DURATION, FLUSH_RUNS, ROWS_APPENDED

log = logging.getLogger("sheetsync.flush.run")

#: ``done``: nothing left to do; ``again``: send ``next``; ``superseded``: the token was
#: no longer the buffer's; ``fenced``: a newer run took the buffer over mid-run;
#: ``retry``: retry this task in ``retry_in_s``.
Status = Literal["done", "again", "superseded", "fenced", "retry"]


@dataclass
class Tally:
    """What one run did, counted as it goes."""

    appended: int = 0
    updated: int = 0
    deleted: int = 0
    parked: int = 0
    failed: int = 0
    requests: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """What the task must do after a run: send ``next``, or retry in ``retry_in_s``."""

    status: Status
    tally: Tally = field(default_factory=Tally)
    next: FlushTask | None = None
    retry_in_s: float | None = None
    error: SheetsError | None = None

    @property
    def summary(self) -> str:
        """One line for the task's result (Flower shows it): counts and requests, no data."""
        requests = ", ".join(self.tally.requests) or "none"
        return (
            f"{self.status}: appended {self.tally.appended}, updated {self.tally.updated}, "
            f"deleted {self.tally.deleted}, parked {self.tally.parked}, "
            f"failed {self.tally.failed}; Sheets requests: {requests}"
        )


def report_run(client: redis.Redis, token: str, outcome: Outcome | None, took_s: float) -> None:
    """Count a run (``None``: it raised) and log it as one ``flush.run`` event: its
    token, buffer, rows, duration and outcome. Publishing never raises."""
    status = outcome.status if outcome is not None else "error"
    tally = outcome.tally if outcome is not None else Tally()
    events.count(FLUSH_RUNS, outcome=status)
    events.count(ROWS_APPENDED, tally.appended)
    events.observe(FLUSH_DURATION, took_s)
    events.publish(client)
    log.info(
        "flush %s %s: appended %d, failed %d, parked %d in %d ms",
        token,
        status,
        tally.appended,
        tally.failed,
        tally.parked,
        round(took_s * 1000),
        extra={
            "event": "flush.run",
            "token": token,
            "buffer": token.rpartition("#")[0],
            "outcome": status,
            "rows": tally.appended,
            "failed": tally.failed,
            "parked": tally.parked,
            "requests": len(tally.requests),
            "duration_ms": round(took_s * 1000, 1),
        },
    )

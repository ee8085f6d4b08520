"""What the end of a flush run means for its task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sheetsync.dispatch import FlushTask
from sheetsync.errors import SheetsError

#: ``done``: nothing left to do; ``again``: send ``next``; ``superseded``: the token was
#: no longer the buffer's; ``fenced``: a newer run took the buffer over mid-run;
#: ``retry``: retry this task in ``retry_in_s``.
Status = Literal["done", "again", "superseded", "fenced", "retry"]


@dataclass
class Tally:
    """What one run did, counted as it goes."""

    appended: int = 0
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
            f"{self.status}: appended {self.tally.appended}, parked {self.tally.parked}, "
            f"failed {self.tally.failed}; Sheets requests: {requests}"
        )

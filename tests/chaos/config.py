"""What a chaos run is: its seed, its size, its faults and the short timings it runs with."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

#: The fault kinds the schedule draws from, each injected ``faults_per_kind`` times.
FAULT_KINDS: tuple[str, ...] = (
    "worker_kill",
    "redis_restart",
    "google_5xx",
    "google_429",
    "google_hang",
    "google_drop",
    "reemit",
    "duplicate_link",
    "form_edit",
    "row_delete",
    "revoke_reconnect",
    "answer_edit",
    "answer_delete",
    "erasure",
    "row_sort",
    "row_insert",
)

#: The server the run's own database is created on (and dropped from).
DEFAULT_POSTGRES_URL = os.environ.get(
    "SHEETSYNC_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)

#: Every process of the run gets these (``SHEETSYNC_`` prefixed): no production delay is
#: ever waited for, and every repair (sweeper, reconciler, dead-letter dispatcher) runs
#: within seconds.
SHORT_TIMINGS: dict[str, str] = {
    "FLUSH_DELAY_S": "0.5",
    "FLUSH_THRESHOLD": "100",
    "FLUSH_LINGER_S": "0.2",
    "BATCH_SIZE": "250",
    "GOOGLE_TIMEOUT_S": "2",
    "LEASE_S": "5",
    "SWEEP_INTERVAL_S": "1",
    "SWEEP_GRACE_S": "1",
    "SWEEP_QUEUED_GRACE_S": "30",
    "RECONCILE_INTERVAL_S": "2",
    "RECONCILE_AFTER_S": "3",
    "RETRY_MAX": "5",
    "RETRY_BASE_S": "0.05",
    "DLQ_TRANSIENT_DELAY_S": "3",
    "DLQ_DISPATCH_INTERVAL_S": "1",
    # The limiter and the emulator's quotas share one short window (see RATE_* below).
    "RATE_WINDOW_S": "10",
    "RATE_MARGIN_S": "0.2",
    "RATE_LIMIT_PER_ACCOUNT": "60",
    "RATE_LIMIT_PER_PROJECT": "300",
    # Above every countdown sheetsync sends (10.2 s at most here), short enough that a
    # task held by a dead or skewed worker is redelivered during the run.
    "VISIBILITY_TIMEOUT_S": "30",
    "ALERT_TIMEOUT_S": "1",
    # Small enough that a hostile oversized answer is far above it; the emulator refuses
    # any body above it, as Google does above its own limit (see REQUEST_BYTES_MAX).
    "REQUEST_BYTES_MAX": "400000",
}
#: The emulator's request size limit: the run's budget, so a request built above the
#: budget is refused whole (a bad outcome in the accounting).
REQUEST_BYTES_MAX = 400_000
#: The emulator's quotas: Google's per-minute numbers over the short window above.
QUOTA_WINDOW_S = 10.0
QUOTA_PER_ACCOUNT = 60
QUOTA_PER_PROJECT = 300
#: Hang faults last longer than GOOGLE_TIMEOUT_S, so the client gives up first.
HANG_S = 3.0


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    answers: int = 300
    sheets: int = 6
    faults_per_kind: int = 3
    #: Worker processes; the last one runs under faketime with its clock ``clock_skew_s`` off.
    workers: int = 3
    concurrency: int = 2
    owners: int = 3
    #: Threads playing the web app's request handlers.
    emitters: int = 2
    #: How long answers are emitted (and faults injected); default from ``answers``.
    emit_s: float | None = None
    #: After the last fault: how long the system gets to settle everything.
    quiesce_timeout_s: float = 300.0
    #: The quiet state must hold this long before the accounting starts.
    settle_s: float = 5.0
    #: The skewed worker's clock offset; default drawn from the seed (3 to 8 minutes).
    clock_skew_s: int | None = None
    kinds: tuple[str, ...] = FAULT_KINDS
    postgres_url: str = DEFAULT_POSTGRES_URL
    #: Logs of every process go here; default a new directory under /tmp (kept).
    log_dir: Path | None = None
    extra_settings: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(FAULT_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kinds: {', '.join(unknown)}")
        if self.workers < 2:
            raise ValueError("a chaos run needs at least two worker processes")
        if self.sheets < 1 or self.answers < 1 or self.owners < 1:
            raise ValueError("answers, sheets and owners must be positive")

    @property
    def emit_duration_s(self) -> float:
        return self.emit_s if self.emit_s is not None else max(20.0, self.answers / 20)

    @property
    def skew_s(self) -> int:
        if self.clock_skew_s is not None:
            return self.clock_skew_s
        rng = random.Random(f"{self.seed}:clock")
        return rng.choice((-1, 1)) * rng.randint(180, 480)

    @property
    def database_name(self) -> str:
        return f"sheetsync_chaos_{os.getpid()}_{self.seed}"

    def with_log_dir(self, log_dir: Path) -> ChaosConfig:
        return replace(self, log_dir=log_dir)


def plan_forms(sheets: int) -> list[int]:
    """How many sheets each form links to: about a third of the sheets go to forms
    linked twice (6 sheets: 4 forms, two of them with 2 sheets)."""
    doubled = sheets // 3
    return [2] * doubled + [1] * (sheets - 2 * doubled)

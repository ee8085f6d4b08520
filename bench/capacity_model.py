"""The capacity model of docs/operating/capacity.md: from a load (answers a minute, active
sheets a minute) and measured figures, the Sheets writes, worker processes and Redis
share it needs. bench_capacity.py feeds it this machine's figures and prints a table.

Writes: a sheet's buffer is flushed FLUSH_DELAY_S after its first waiting id, or at once
at FLUSH_THRESHOLD ids, and a flush appends everything waiting (up to BATCH_SIZE a
request). So a sheet with ``a`` answers a minute costs ``max(min(a, 60 / D), a / T)``
appends a minute to stay fresh (rows within about D seconds): at most one a debounce
window, or one per T when more than T arrive in a window. The project's write limit
(RATE_WRITE_LIMIT_PER_PROJECT per RATE_WINDOW_S) caps the sum; past it nothing is lost,
rows land later in bigger batches: a sheet's appends come ``60 x S / limit`` seconds
apart for S active sheets (over many owners), so one write a minute per sheet, rows
within about a minute, caps active sheets a minute at the limit itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sheetsync.settings import Settings


@dataclass(frozen=True)
class Defaults:
    """The settings the model reads (the shipped defaults unless given)."""

    flush_delay_s: float
    flush_threshold: int
    batch_size: int
    writes_per_project_a_minute: float
    writes_per_account_a_minute: float

    @classmethod
    def of(cls, settings: Settings) -> Defaults:
        minutes = settings.rate_window_s / 60
        return cls(
            flush_delay_s=settings.flush_delay_s,
            flush_threshold=settings.flush_threshold,
            batch_size=settings.batch_size,
            writes_per_project_a_minute=settings.rate_limit("write", "project") / minutes,
            writes_per_account_a_minute=settings.rate_limit("write", "account") / minutes,
        )


@dataclass(frozen=True)
class Measured:
    redis_cpu_per_emit_s: float  # redis-server's CPU seconds per emit (one sheet)
    rows_per_s: float  # one worker process, a backlog
    runs_per_s: float  # one worker process, one id a run


@dataclass(frozen=True)
class Need:
    answers_a_minute: float
    sheets_a_minute: float
    writes_a_minute: float  # to keep every sheet fresh (rows within about FLUSH_DELAY_S)
    project_quotas: float  # writes_a_minute / one project's write limit
    lands_within_s: float  # a sheet's appends this far apart, within one project's quota
    busy_processes: float  # worker processes' worth of work, within one project's quota
    processes: int  # busy_processes rounded up, plus one spare
    redis_share: float  # of one core of the Redis primary, for the emits at the average rate


def appends_a_minute(answers_per_sheet: float, defaults: Defaults) -> float:
    """One sheet's appends a minute to stay fresh (see the module docstring)."""
    windows = 60 / defaults.flush_delay_s if defaults.flush_delay_s else math.inf
    return max(min(answers_per_sheet, windows), answers_per_sheet / defaults.flush_threshold)


#: Seconds Google takes to answer an append, added to each run: the emulator answers on
#: loopback in milliseconds, Google does not (an assumption; production's figure is the
#: mean of sheetsync_flush_duration_seconds, which replaces ``1 / runs_per_s + GOOGLE_S``).
GOOGLE_S = 1.0


def need(
    answers: float, sheets: float, measured: Measured, defaults: Defaults, google_s: float = 0.0
) -> Need:
    writes = sheets * appends_a_minute(answers / sheets, defaults)
    # Past the quota the runs that would go are fewer, with bigger batches.
    made = min(writes, defaults.writes_per_project_a_minute)
    busy = answers / 60 / measured.rows_per_s + made / 60 * (1 / measured.runs_per_s + google_s)
    return Need(
        answers_a_minute=answers,
        sheets_a_minute=sheets,
        writes_a_minute=writes,
        project_quotas=writes / defaults.writes_per_project_a_minute,
        lands_within_s=max(
            defaults.flush_delay_s, 60 * sheets / defaults.writes_per_project_a_minute
        ),
        busy_processes=busy,
        processes=math.ceil(busy) + 1,
        redis_share=answers / 60 * measured.redis_cpu_per_emit_s,
    )


#: (answers a minute, active sheets a minute): a few loads to print.
EXAMPLE_LOADS = ((600, 20), (6_000, 100), (6_000, 300), (60_000, 1_000), (300_000, 3_000))


def table(measured: Measured, defaults: Defaults) -> list[str]:
    lines = [
        "| answers/min | active sheets/min | appends/min to stay fresh | of one project's "
        f"{defaults.writes_per_project_a_minute:g}/min | rows land within, one project | "
        "worker processes (busy), emulator | "
        f"with Google answering in {GOOGLE_S:g} s | "
        "the emits' share of the Redis primary's core |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for answers, sheets in EXAMPLE_LOADS:
        n = need(answers, sheets, measured, defaults)
        slow = need(answers, sheets, measured, defaults, GOOGLE_S)
        lines.append(
            f"| {answers:,} | {sheets:,} | {n.writes_a_minute:,.0f} | {n.project_quotas:.0%} | "
            f"about {n.lands_within_s:,.0f} s | "
            f"{n.processes} ({n.busy_processes:.2f}) | "
            f"{slow.processes} ({slow.busy_processes:.2f}) | {n.redis_share:.1%} |"
        )
    return lines

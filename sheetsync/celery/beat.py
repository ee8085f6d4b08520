"""Beat sends each periodic job once per interval, however many beat processes run.

A rolling update (Kubernetes, compose) runs the new beat beside the old one for a while,
and each would send every job. Before it sends a due job, a beat claims it
(``lua/beat_claim.lua``): granted unless a beat was granted the same job less than
:data:`SHARE` of its interval ago, on Redis's clock, so the hosts' clocks don't matter.
A refused job is advanced as if sent. With no leader to elect there is no hand-over: a
beat that stops leaves nothing to expire, and the one left goes on at its next tick.

When Redis cannot be asked, the job is skipped with a warning: the jobs are periodic
(sweep, reconcile, dead-letter dispatch), the next period catches up, and the broker is
most likely unreachable too. A job whose schedule has no fixed interval (a crontab,
which sheetsync does not use) is sent unclaimed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import redis
from celery.beat import PersistentScheduler, ScheduleEntry

from sheetsync.lua.contract import Arg, Key, Script, Scripts
from sheetsync.redis_keys import beat_claim_key
from sheetsync.services import redis_client
from sheetsync.settings import get_settings

log = logging.getLogger(__name__)

#: How far apart (a share of the interval) two sends of one job must be. Each beat
#: ticks once per interval, so two beats' ticks of a job are d and interval - d apart:
#: with a share over 1/2 at most one of them is granted, and a lone beat always is.
SHARE = 0.9


@dataclass(slots=True, kw_only=True)
class ClaimJob(Script[bool]):
    """A beat may send a periodic job now (``lua/beat_claim.lua``)."""

    SCRIPT: ClassVar[str] = "beat_claim"
    last: Key
    interval_ms: Arg[int]
    share: Arg[float]

    def decode(self, reply: Any) -> bool:
        return int(reply) == 1


def interval_s(entry: ScheduleEntry) -> float | None:
    """The job's fixed interval, or None (a crontab or a solar schedule)."""
    run_every = getattr(entry.schedule, "run_every", None)
    return None if run_every is None else float(run_every.total_seconds())


class ClaimingScheduler(PersistentScheduler):  # type: ignore[misc]
    """Celery's persistent scheduler, sending a job only when its claim is granted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._scripts: Scripts | None = None
        super().__init__(*args, **kwargs)

    def claim(self, entry: ScheduleEntry) -> bool:
        interval = interval_s(entry)
        if interval is None:
            return True
        if self._scripts is None:
            self._scripts = Scripts(redis_client(get_settings()))
        job = ClaimJob(
            last=beat_claim_key(entry.name), interval_ms=round(interval * 1000), share=SHARE
        )
        return self._scripts.run(job)

    def apply_entry(self, entry: ScheduleEntry, producer: Any = None) -> None:
        try:
            granted = self.claim(entry)
        except redis.RedisError as exc:
            log.warning("beat: %s skipped this period: Redis did not answer (%s)", entry.name, exc)
            return
        if not granted:
            log.debug("beat: %s was sent by another beat this period", entry.name)
            return
        super().apply_entry(entry, producer=producer)

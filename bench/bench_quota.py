"""Google's quota, shared (issue 23): a lone answer's wait under saturation, and the
scheduler's cost with many waiters, each against the previous design in the same run.

Usage::

    python bench/bench_quota.py [--seconds 9] [--waiters 10000] [--accounts 1000]

The previous design is bench/baseline/rate_take_tickets.lua (one first-come queue of
tickets per window: no plan weights, no fairness per account, every request of a first
write back at the end of the line). Both run on a redis-server of this benchmark's own.

1. **Lone answers under saturation.** Threads stand in for flush runs, against real
   Redis and the real limiter, in scaled time (the issue's scenario: a 2 s window, 3
   writes per account and 6 per project in it, one project slot every 0.34 s). Three
   FREE accounts with 4 busy buffers each send append after append; after 3 s a PRO
   owner's and a small FREE owner's first writes start (a read, the header, the append:
   3 requests). Printed: each one's wait from its start to its append's slot, in
   project slots (goals: PRO within 4, small FREE within 8, beyond the flush delay).
2. **The take's Redis time** with ``--waiters`` buffers over ``--accounts`` accounts
   waiting at a full project window: Redis's own time per take (INFO commandstats, the
   time of every script a take runs: the turn, and the take and its count when it may
   go), over 1,000 takes by random waiters (goal: at most 1 ms).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import threading
import time
import uuid
from importlib import resources
from pathlib import Path
from typing import Protocol

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sheetsync.dev.local import start_redis_server  # noqa: E402
from sheetsync.errors import RateLimited  # noqa: E402
from sheetsync.redis_keys import RateKind, rate_account_key, rate_project_key  # noqa: E402
from sheetsync.settings import Settings  # noqa: E402
from sheetsync.sheets.limiter import FREE_WEIGHT, RateLimiter  # noqa: E402

BASELINE_LUA = Path(__file__).resolve().parent / "baseline" / "rate_take_tickets.lua"
WINDOW_S, MARGIN_S, PER_ACCOUNT, PER_PROJECT = 2.0, 0.05, 3, 6
SLOT_S = (WINDOW_S + MARGIN_S) / PER_PROJECT
LEAD_S = 0.5
PRO_WEIGHT = 4.0
PER_PROJECT_BIG = 300


class Scheduler(Protocol):
    def reserve(self, account: str, waiter: str, weight: float, cost: int = 1) -> float: ...

    def take(
        self, account: str, kind: RateKind, waiter: str, weight: float, continuing: bool
    ) -> None:
        """Take a slot (sleeping up to the lead for it) or raise RateLimited."""


class FairQueue:
    """Today's design: sheetsync's limiter."""

    name = "fair queue"

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.limiter = RateLimiter(client, settings)

    def reserve(self, account: str, waiter: str, weight: float, cost: int = 1) -> float:
        return self.limiter.reserve(account, waiter, weight=weight, lead_s=LEAD_S, cost=cost)

    def take(
        self, account: str, kind: RateKind, waiter: str, weight: float, continuing: bool
    ) -> None:
        # The turn knows what is left of it: a run's later requests need no flag.
        self.limiter.take(account, kind, max_wait_s=LEAD_S, waiter=waiter, weight=weight)


class Tickets:
    """The previous design: first come, first served, per request."""

    name = "tickets (before)"

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        prelude = resources.files("sheetsync.lua").joinpath("prelude.lua").read_text("utf-8")
        self.script = client.register_script(prelude + "\n" + BASELINE_LUA.read_text("utf-8"))
        self.settings = settings
        self.window_ms = int((settings.rate_window_s + settings.rate_margin_s) * 1000)

    def _call(self, account: str, kind: RateKind, waiter: str, mode: str) -> tuple[bool, float]:
        account_key, project_key = rate_account_key(account, kind), rate_project_key(kind)
        taken, wait_ms = self.script(
            keys=[account_key, project_key, f"{account_key}:tickets", f"{project_key}:tickets"],
            args=[
                self.window_ms,
                self.settings.rate_limit(kind, "account"),
                self.settings.rate_limit(kind, "project"),
                uuid.uuid4().hex,
                waiter,
                mode,
                int(LEAD_S * 1000) if mode == "take" else 0,
                1000,
            ],
        )
        return bool(taken), int(wait_ms) / 1000

    def reserve(self, account: str, waiter: str, weight: float, cost: int = 1) -> float:
        return self._call(account, "write", waiter, "reserve")[1]

    def take(
        self, account: str, kind: RateKind, waiter: str, weight: float, continuing: bool
    ) -> None:
        while True:
            taken, wait_s = self._call(account, kind, waiter, "take")
            if taken:
                time.sleep(wait_s)
                return
            if wait_s > LEAD_S:
                raise RateLimited("no slot", retry_after_s=wait_s)
            time.sleep(max(wait_s - LEAD_S, 0.001))


def run_flush(
    scheduler: Scheduler,
    account: str,
    waiter: str,
    weight: float,
    kinds: tuple[RateKind, ...],
    stop: threading.Event | None = None,
) -> None:
    """One batch's requests as a flush run sends them: ask before building, then each
    request; a wait beyond the lead is a rescheduled task (here, a sleep)."""
    while stop is None or not stop.is_set():
        wait = scheduler.reserve(account, waiter, weight, kinds.count("write"))
        if wait > LEAD_S:
            time.sleep(wait - LEAD_S)
            continue
        sent = 0
        while sent < len(kinds):
            try:
                scheduler.take(account, kinds[sent], waiter, weight, sent > 0)
            except RateLimited as exc:
                time.sleep(max(exc.retry_after_s - LEAD_S, 0.001))
                continue
            sent += 1
        return


def lone_answers(
    scheduler_of: type[FairQueue] | type[Tickets], url: str, seconds: float
) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    client.flushdb()
    settings = Settings.load(
        rate_window_s=WINDOW_S,
        rate_margin_s=MARGIN_S,
        rate_limit_per_account=PER_ACCOUNT,
        rate_limit_per_project=PER_PROJECT,
        redis_url=url,
    )
    stop = threading.Event()

    def busy(account: str, waiter: str) -> None:
        scheduler = scheduler_of(redis.Redis.from_url(url), settings)
        while not stop.is_set():
            run_flush(scheduler, account, waiter, FREE_WEIGHT, ("write",), stop)

    threads = [
        threading.Thread(target=busy, args=(f"busy{a}", f"busy{a}-sheet{s}"), daemon=True)
        for a in range(3)
        for s in range(4)
    ]
    for thread in threads:
        thread.start()
    time.sleep(3.0)
    waits: dict[str, float] = {}

    def lone(name: str, weight: float) -> None:
        scheduler = scheduler_of(redis.Redis.from_url(url), settings)
        started = time.monotonic()
        first_write: tuple[RateKind, ...] = ("read", "write", "write")
        run_flush(scheduler, f"lone-{name}", f"lone-{name}-sheet", weight, first_write)
        waits[name] = time.monotonic() - started

    lones = [
        threading.Thread(target=lone, args=("PRO", PRO_WEIGHT)),
        threading.Thread(target=lone, args=("FREE", FREE_WEIGHT)),
    ]
    for thread in lones:
        thread.start()
    for thread in lones:
        thread.join(timeout=seconds * 10)
    stop.set()
    for thread in threads:
        thread.join(timeout=5)
    return waits


def take_cost(
    scheduler: FairQueue | Tickets, client: redis.Redis, waiters: int, accounts: int
) -> float:
    """Redis's microseconds per take (every script a take runs, together) with
    ``waiters`` waiting over ``accounts``."""
    rng = random.Random(7)
    for n in range(PER_PROJECT_BIG):  # the project window, full
        scheduler.take(f"acct{n % accounts}", "write", "", FREE_WEIGHT, False)
    names = [(f"acct{n % accounts}", f"buffer{n}") for n in range(waiters)]
    for account, waiter in names:
        scheduler.reserve(account, waiter, FREE_WEIGHT)
    client.config_resetstat()
    for _ in range(1000):
        account, waiter = rng.choice(names)
        with contextlib.suppress(RateLimited):
            scheduler.take(account, "write", waiter, FREE_WEIGHT, False)
    stats = client.info("commandstats")
    return float(stats["cmdstat_evalsha"]["usec"]) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=9.0)
    parser.add_argument("--waiters", type=int, default=10_000)
    parser.add_argument("--accounts", type=int, default=1_000)
    args = parser.parse_args()
    server = start_redis_server()
    try:
        print(
            "Lone answers under saturation (3 FREE accounts x 4 busy buffers; a slot "
            f"every {SLOT_S:.2f}s), wait from a first write's start to its append's slot:"
        )
        for design in (Tickets, FairQueue):
            found = lone_answers(design, server.url, args.seconds)
            print(
                f"  {design.name:17s} "
                + ", ".join(
                    f"{who} {found[who]:.2f}s ({found[who] / SLOT_S:.1f} slots)"
                    for who in ("PRO", "FREE")
                    if who in found
                )
            )
        print("  goals: PRO within 4 slots, small FREE within 8 (beyond the flush delay)")

        print(
            f"The take's Redis time, {args.waiters:,} buffers over {args.accounts:,} "
            "accounts waiting at a full project window (300 per 60 s):"
        )
        big = Settings.load(rate_window_s=60, rate_margin_s=0.5, redis_url=server.url)
        for design in (Tickets, FairQueue):
            client = redis.Redis.from_url(server.url)
            client.flushdb()
            usec = take_cost(design(client, big), client, args.waiters, args.accounts)
            print(f"  {design.name:17s} {usec / 1000:.3f} ms per take")
        print("  goal: at most 1 ms")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

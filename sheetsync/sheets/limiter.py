"""Strict sliding-window rate limits for Sheets requests, and who goes first when slots
are short (docs/ARCHITECTURE.md, "Limits" and "Sharing the quota").

Google counts reads and writes apart, and so do we: every request is a read or a write,
and two windows of its kind guard it, the Google account's (60 per 60 s) and the
project's (300 per 60 s), so a header read never takes an append's slot.

Mechanism and policy are apart. ``lua/rate_take.lua`` takes a slot in both windows at
once, or neither, and keeps the pace: it alone guarantees the limits (the `limits`
library's moving window takes one limit per call, so a refusal by the second would waste
the slot taken from the first). The queue's order is policy: ``lua/rate_turn.lua`` gives
each waiting buffer a turn of the slots its batch needs (its cost), fairly per Google
account and weighted by the owner's plan (``SHEETSYNC_RATE_PRIORITY_WEIGHT``), and says
whether its request may go now; ``lua/rate_served.lua`` counts a slot of the turn used,
``lua/rate_leave.lua`` gives back the slots of a turn never used.
:mod:`sheetsync.sheets.quota_model` is the policy in Python, the reference the property
tests hold the scripts to. A waiter is told when its turn is expected and wakes for it
(the flush task is rescheduled: it never holds a worker process while it waits).

Google counts a request when it arrives; we count it when the slot is taken, a little
earlier. ``SHEETSYNC_RATE_MARGIN_S`` widens our window by more than that delay varies,
so two requests that we spaced one window apart never land inside one of Google's.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import cast

import redis

from sheetsync.errors import RateLimited
from sheetsync.lua.contract import Scripts
from sheetsync.redis_keys import (
    DEFAULT_GOOGLE_CLIENT,
    RATE_KINDS,
    RateKind,
    rate_account_key,
    rate_project_key,
    rate_queue_keys,
)
from sheetsync.settings import Settings
from sheetsync.sheets.quota_scripts import (
    Mode,
    RateLeave,
    RateServed,
    RateTake,
    RateTurn,
    Slot,
    Turn,
)

#: The waiter of a request no buffer waits for (it stands behind every waiting buffer).
NO_WAITER = ""
#: A request whose turn is near asks again no sooner than this.
MIN_ASK_AGAIN_S = 0.005
#: The weight of a FREE owner's requests at the queue.
FREE_WEIGHT = 1.0


@dataclass(frozen=True, slots=True)
class QueueTuning:
    """How long a waiter's place holds (ms), and how much the queue remembers."""

    #: A waiter this long past the time it was expected has gone away (loses its turn).
    grace_ms: int = 1000
    #: A waiter this long past its time holds no slot: the next one present takes it.
    late_ms: int = 20
    #: Accounts whose last turn ends past the clock, remembered at most (the smallest
    #: debts go first past it): what bounds the queue under any traffic.
    max_debts: int = 10_000


@dataclass(frozen=True, slots=True)
class Place:
    """Where a waiting buffer stands at one kind's queue."""

    kind: RateKind
    #: Waiters before it (0: next).
    ahead: int
    #: When its turn is expected (Redis ms).
    expected_ms: int
    #: "queued", or "parked" until its account's window frees.
    state: str


@dataclass(frozen=True, slots=True)
class WindowUse:
    used: int
    limit: int


class RateLimiter:
    """Per-account and per-project windows, for reads and for writes, and their queues,
    in Redis, shared by every worker."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        scripts: Scripts | None = None,
        tuning: QueueTuning = QueueTuning(),
        google_client: str = DEFAULT_GOOGLE_CLIENT,
    ):
        self.redis = client
        self.settings = settings
        self.tuning = tuning
        #: The OAuth client whose Cloud project's windows and queues this limiter keeps.
        self.google_client = google_client
        self._scripts = scripts or Scripts(client)
        self.window_ms = int((settings.rate_window_s + settings.rate_margin_s) * 1000)

    def for_client(self, google_client: str | None) -> RateLimiter:
        """The limiter of the Cloud project of ``google_client`` (None: the default
        client's); a ConfigError when no such client is configured."""
        name = self.settings.google_client(google_client).name
        if name == self.google_client:
            return self
        return RateLimiter(self.redis, self.settings, self._scripts, self.tuning, name)

    def take(
        self,
        google_account_id: str,
        kind: RateKind = "write",
        *,
        max_wait_s: float = 0.0,
        waiter: str = NO_WAITER,
        weight: float = FREE_WEIGHT,
    ) -> None:
        """Take one slot in both windows of ``kind`` for a request about to be sent, in
        the waiter's turn (a new turn of one slot if it has none), waiting up to
        ``max_wait_s`` for it; else raise :class:`RateLimited` with the time to come
        back, ``max_wait_s`` before the turn (the ``waiter``, a buffer, keeps its place
        in the queue, and is there when its turn comes)."""
        while True:
            turn = self.turn(google_account_id, kind, waiter, Mode.TAKE, max_wait_s, weight, 1)
            if turn.go:
                slot = self.take_at(google_account_id, kind, waiter, turn.at_ms)
                if slot.taken:
                    if slot.wait_ms > 0:
                        time.sleep(slot.wait_ms / 1000)
                    return
                time.sleep(MIN_ASK_AGAIN_S)  # another request took it first
                continue
            wait_s = turn.wait_ms / 1000
            if wait_s > max_wait_s:
                raise RateLimited(
                    f"{kind} rate limit reached for account {google_account_id}",
                    retry_after_s=wait_s - max_wait_s,
                )
            time.sleep(max(turn.ask_again_ms / 1000, MIN_ASK_AGAIN_S))

    def reserve(
        self,
        google_account_id: str,
        waiter: str,
        *,
        weight: float = FREE_WEIGHT,
        lead_s: float = 0.0,
        cost: int = 1,
    ) -> float:
        """Seconds until ``waiter`` (a buffer) may send its next batch's writes; 0 when
        it may go now. Takes nothing: the waiter keeps its place in the queue, with a turn
        of ``cost`` writes (2 when a header goes before the append). A turn it holds keeps
        its place, and gives back the slots beyond ``cost``.

        A flush asks before it builds a batch, so a rate-limited run reschedules to its
        turn without hydrating, decrypting and building rows it cannot send yet.
        """
        turn = self.turn(google_account_id, "write", waiter, Mode.RESERVE, lead_s, weight, cost)
        return turn.wait_ms / 1000

    def leave(self, waiter: str) -> None:
        """``waiter``'s run ended without waiting for a slot: it keeps no place, and what
        its turns did not use is given back to its account."""
        read, write = (
            rate_queue_keys("read", self.google_client),
            rate_queue_keys("write", self.google_client),
        )
        self._scripts.run(
            RateLeave(
                read_queue=read.queue,
                read_turns=read.turns,
                read_parked=read.parked,
                read_expected=read.expected,
                read_debts=read.debts,
                read_clock=read.clock,
                read_lines=read.lines,
                write_queue=write.queue,
                write_turns=write.turns,
                write_parked=write.parked,
                write_expected=write.expected,
                write_debts=write.debts,
                write_clock=write.clock,
                write_lines=write.lines,
                waiter=waiter,
            )
        )

    def turn(
        self,
        google_account_id: str,
        kind: RateKind,
        waiter: str,
        mode: Mode,
        lead_s: float,
        weight: float,
        cost: int,
    ) -> Turn:
        """The waiter's turn (a new one of ``cost`` slots if it has none) and whether its
        request may go now: then :meth:`take_at` takes the slot. Takes nothing."""
        queue = rate_queue_keys(kind, self.google_client)
        return self._scripts.run(
            RateTurn(
                account_window=rate_account_key(google_account_id, kind, self.google_client),
                project_window=rate_project_key(kind, self.google_client),
                pace=queue.pace,
                queue=queue.queue,
                turns=queue.turns,
                parked=queue.parked,
                expected=queue.expected,
                debts=queue.debts,
                clock=queue.clock,
                lines=queue.lines,
                window_ms=self.window_ms,
                account_limit=self.settings.rate_limit(kind, "account"),
                project_limit=self.settings.rate_limit(kind, "project", self.google_client),
                account=google_account_id,
                weight=weight,
                waiter=waiter,
                mode=mode,
                cost=cost if waiter != NO_WAITER else 1,
                lead_ms=int(lead_s * 1000),
                grace_ms=self.tuning.grace_ms,
                late_ms=self.tuning.late_ms,
            )
        )

    def take_at(self, google_account_id: str, kind: RateKind, waiter: str, at_ms: int) -> Slot:
        """The slot at ``at_ms``, and, if taken, one slot of the waiter's turn used (one
        round trip: rate_served.lua finds whether the take took it)."""
        queue, member = rate_queue_keys(kind, self.google_client), uuid.uuid4().hex
        account_window = rate_account_key(google_account_id, kind, self.google_client)
        replies = self._scripts.run_many(
            [
                RateTake(
                    account_window=account_window,
                    project_window=rate_project_key(kind, self.google_client),
                    pace=queue.pace,
                    window_ms=self.window_ms,
                    account_limit=self.settings.rate_limit(kind, "account"),
                    project_limit=self.settings.rate_limit(kind, "project", self.google_client),
                    member=member,
                    at=at_ms,
                ),
                RateServed(
                    queue=queue.queue,
                    turns=queue.turns,
                    parked=queue.parked,
                    expected=queue.expected,
                    debts=queue.debts,
                    clock=queue.clock,
                    lines=queue.lines,
                    account_window=account_window,
                    waiter=waiter,
                    member=member,
                    max_debts=self.tuning.max_debts,
                ),
            ]
        )
        return cast(Slot, replies[0])

    def acquirer(
        self,
        google_account_id: str,
        max_wait_s: float = 0.0,
        waiter: str = NO_WAITER,
        weight: float = FREE_WEIGHT,
    ) -> Acquire:
        return Acquire(self, google_account_id, max_wait_s, waiter, weight)

    def usage(self, google_account_id: str | None = None, kind: RateKind = "write") -> WindowUse:
        """Requests of ``kind`` in the current window (the project's when no account is
        given)."""
        if google_account_id is None:
            key = rate_project_key(kind, self.google_client)
            limit = self.settings.rate_limit(kind, "project", self.google_client)
        else:
            key = rate_account_key(google_account_id, kind, self.google_client)
            limit = self.settings.rate_limit(kind, "account")
        used = int(self.redis.zcount(key, f"({self._now_ms() - self.window_ms}", "+inf"))
        return WindowUse(used=used, limit=limit)

    def places(self) -> dict[str, Place]:
        """Every waiting buffer's place, by buffer (its write place over its read place):
        read whole, for ``sheetsync status`` and the console."""
        found: dict[str, Place] = {}
        now_ms = self._now_ms()
        for kind in RATE_KINDS:
            keys = rate_queue_keys(kind, self.google_client)
            pipe = self.redis.pipeline(transaction=False)
            pipe.zrange(keys.queue, 0, -1)
            pipe.zrange(keys.parked, 0, -1)
            pipe.hgetall(keys.expected)
            queued, parked, expected = pipe.execute()
            when = {_text(name): int(float(at)) for name, at in expected.items()}
            ranked = [(_text(name), "queued", n) for n, name in enumerate(queued)]
            ranked += [(_text(name), "parked", len(queued)) for name in parked]
            for name, state, ahead in ranked:
                found[name] = Place(kind, ahead, when.get(name, now_ms), state)
        return found

    def waiting(self) -> dict[RateKind, dict[str, int]]:
        """Buffers waiting at each kind's queue: queued, and parked (their account's
        window is full)."""
        pipe = self.redis.pipeline(transaction=False)
        for kind in RATE_KINDS:
            keys = rate_queue_keys(kind, self.google_client)
            pipe.zcard(keys.queue)
            pipe.zcard(keys.parked)
        counts = [int(n) for n in pipe.execute()]
        return {
            kind: {"queued": counts[2 * i], "parked": counts[2 * i + 1]}
            for i, kind in enumerate(RATE_KINDS)
        }

    def _now_ms(self) -> int:
        seconds, micros = self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Acquire:
    """The ``acquire`` hook that :class:`SheetsClient` calls per request, with its kind:
    each request takes its slot in its buffer's turn (the turn knows what is left of it)."""

    def __init__(
        self,
        limiter: RateLimiter,
        google_account_id: str,
        max_wait_s: float,
        waiter: str,
        weight: float,
    ) -> None:
        self._limiter = limiter
        self._account = google_account_id
        self._max_wait_s = max_wait_s
        self._waiter = waiter
        self.weight = weight

    def __call__(self, kind: RateKind) -> None:
        self._limiter.take(
            self._account,
            kind,
            max_wait_s=self._max_wait_s,
            waiter=self._waiter,
            weight=self.weight,
        )

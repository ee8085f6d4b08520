"""Strict sliding-window rate limits for Sheets requests (docs/ARCHITECTURE.md, "Limits").

Two windows guard every request: the Google account's (60 per 60 s) and the project's
(300 per 60 s). Both are taken in one Lua script (``lua/rate_take.lua``): the `limits`
library's moving window takes one limit per call, so a refusal by the second limit
would waste the slot already taken from the first. A buffer that must wait gets a
ticket, the time its turn comes, so waiting buffers wake one per slot rather than all
at once; the windows themselves hold only requests taken, so they stay strict.

Google counts a request when it arrives; we count it when the slot is taken, a little
earlier. ``SHEETSYNC_RATE_MARGIN_S`` widens our window by more than that delay varies,
so two requests that we spaced one window apart never land inside one of Google's.
"""

from __future__ import annotations

import enum
import time
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import redis

from sheetsync.errors import RateLimited
from sheetsync.keys import RATE_PROJECT, rate_account_key, rate_tickets_key
from sheetsync.lua.contract import Arg, Key, Script, Scripts
from sheetsync.settings import Settings

#: A waiting buffer's ticket this long past is abandoned (others may take its place).
DEFAULT_TICKET_GRACE_MS = 1000
#: The waiter of a request no buffer waits for (it gets no ticket).
NO_WAITER = ""


class Mode(enum.StrEnum):
    #: Get a ticket (the earliest free slot for the waiter), take nothing.
    RESERVE = "reserve"
    #: The request goes now, or within the lead.
    TAKE = "take"


class RateAnswer(NamedTuple):
    #: The request has its slot (send after ``wait_ms``); else wait ``wait_ms`` first.
    taken: bool
    wait_ms: int


@dataclass(slots=True, kw_only=True)
class RateTake(Script[RateAnswer]):
    """One request slot in the account's and the project's windows at once."""

    SCRIPT: ClassVar[str] = "rate_take"
    account_window: Key
    project_window: Key
    account_tickets: Key
    project_tickets: Key
    window_ms: Arg[int]
    account_limit: Arg[int]
    project_limit: Arg[int]
    #: A unique member for this request.
    member: Arg[str]
    #: The waiting buffer, or :data:`NO_WAITER`.
    waiter: Arg[str]
    mode: Arg[Mode]
    lead_ms: Arg[int]
    grace_ms: Arg[int]

    def decode(self, reply: Any) -> RateAnswer:
        taken, wait_ms = reply
        return RateAnswer(bool(int(taken)), int(wait_ms))


@dataclass(frozen=True, slots=True)
class WindowUse:
    used: int
    limit: int


class RateLimiter:
    """Per-account and per-project windows in Redis, shared by every worker."""

    def __init__(self, client: redis.Redis, settings: Settings, scripts: Scripts | None = None):
        self.redis = client
        self.settings = settings
        self._scripts = scripts or Scripts(client)
        self.window_ms = int((settings.rate_window_s + settings.rate_margin_s) * 1000)

    def take(
        self, google_account_id: str, *, max_wait_s: float = 0.0, waiter: str = NO_WAITER
    ) -> None:
        """Take one slot in both windows for a request about to be sent, waiting up to
        ``max_wait_s`` for it; else raise :class:`RateLimited` with the wait. A
        ``waiter`` (a buffer) uses the slot it reserved, and one it cannot wait for
        stays reserved for it."""
        while True:
            answer = self._call(google_account_id, waiter, Mode.TAKE, max_wait_s)
            wait_s = answer.wait_ms / 1000
            if answer.taken:
                if wait_s > 0:
                    time.sleep(wait_s)
                return
            if wait_s > max_wait_s:
                raise RateLimited(
                    f"rate limit reached for account {google_account_id}",
                    retry_after_s=wait_s,
                )
            time.sleep(max(wait_s - max_wait_s, 0.001))

    def reserve(self, google_account_id: str, waiter: str) -> float:
        """Seconds until ``waiter`` (a buffer) may send its next request; 0 when a slot is
        free now. A later slot is reserved for it, so each waiting buffer wakes at a
        slot of its own (no herd). Takes nothing when a slot is free now.

        A flush asks before it builds a batch, so a rate-limited run reschedules to its
        slot without hydrating, decrypting and building rows it cannot send yet.
        """
        answer = self._call(google_account_id, waiter, Mode.RESERVE, 0.0)
        return max(answer.wait_ms, 0) / 1000

    def _call(self, google_account_id: str, waiter: str, mode: Mode, lead_s: float) -> RateAnswer:
        account = rate_account_key(google_account_id)
        return self._scripts.run(
            RateTake(
                account_window=account,
                project_window=RATE_PROJECT,
                account_tickets=rate_tickets_key(account),
                project_tickets=rate_tickets_key(RATE_PROJECT),
                window_ms=self.window_ms,
                account_limit=self.settings.rate_limit_per_account,
                project_limit=self.settings.rate_limit_per_project,
                member=uuid.uuid4().hex,
                waiter=waiter,
                mode=mode,
                lead_ms=int(lead_s * 1000),
                grace_ms=DEFAULT_TICKET_GRACE_MS,
            )
        )

    def acquirer(
        self, google_account_id: str, max_wait_s: float = 0.0, waiter: str = NO_WAITER
    ) -> _Acquire:
        return _Acquire(self, google_account_id, max_wait_s, waiter)

    def usage(self, google_account_id: str | None = None) -> WindowUse:
        """Requests in the current window (the project's when no account is given)."""
        key = RATE_PROJECT if google_account_id is None else rate_account_key(google_account_id)
        limit = (
            self.settings.rate_limit_per_project
            if google_account_id is None
            else self.settings.rate_limit_per_account
        )
        seconds, micros = self.redis.time()
        now_ms = seconds * 1000 + micros // 1000
        used = int(self.redis.zcount(key, f"({now_ms - self.window_ms}", "+inf"))
        return WindowUse(used=used, limit=limit)


class _Acquire:
    """The zero-argument ``acquire`` hook that :class:`SheetsClient` calls per request."""

    def __init__(
        self, limiter: RateLimiter, google_account_id: str, max_wait_s: float, waiter: str
    ) -> None:
        self._limiter = limiter
        self._account = google_account_id
        self._max_wait_s = max_wait_s
        self._waiter = waiter

    def __call__(self) -> None:
        self._limiter.take(self._account, max_wait_s=self._max_wait_s, waiter=self._waiter)

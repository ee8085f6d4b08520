"""Strict sliding-window rate limits for Sheets requests (docs/ARCHITECTURE.md, "Limits").

Google counts reads and writes apart, and so do we: every request is a read or a write,
and two windows of its kind guard it, the Google account's (60 per 60 s) and the
project's (300 per 60 s), so a header read never takes an append's slot. Both windows
are taken in one Lua script (``lua/rate_take.lua``): the `limits`
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
from sheetsync.keys import RateKind, rate_account_key, rate_project_key, rate_tickets_key
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
    """One request slot in the account's and the project's windows (of one kind of
    request) at once."""

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
    """Per-account and per-project windows, for reads and for writes, in Redis, shared
    by every worker."""

    def __init__(self, client: redis.Redis, settings: Settings, scripts: Scripts | None = None):
        self.redis = client
        self.settings = settings
        self._scripts = scripts or Scripts(client)
        self.window_ms = int((settings.rate_window_s + settings.rate_margin_s) * 1000)

    def take(
        self,
        google_account_id: str,
        kind: RateKind = "write",
        *,
        max_wait_s: float = 0.0,
        waiter: str = NO_WAITER,
    ) -> None:
        """Take one slot in both windows of ``kind`` for a request about to be sent, waiting up to
        ``max_wait_s`` for it; else raise :class:`RateLimited` with the wait. A
        ``waiter`` (a buffer) uses the slot it reserved, and one it cannot wait for
        stays reserved for it."""
        while True:
            answer = self._call(google_account_id, kind, waiter, Mode.TAKE, max_wait_s)
            wait_s = answer.wait_ms / 1000
            if answer.taken:
                if wait_s > 0:
                    time.sleep(wait_s)
                return
            if wait_s > max_wait_s:
                raise RateLimited(
                    f"{kind} rate limit reached for account {google_account_id}",
                    retry_after_s=wait_s,
                )
            time.sleep(max(wait_s - max_wait_s, 0.001))

    def reserve(self, google_account_id: str, waiter: str) -> float:
        """Seconds until ``waiter`` (a buffer) may send its next write (an append); 0 when a slot is
        free now. A later slot is reserved for it, so each waiting buffer wakes at a
        slot of its own (no herd). Takes nothing when a slot is free now.

        A flush asks before it builds a batch, so a rate-limited run reschedules to its
        slot without hydrating, decrypting and building rows it cannot send yet.
        """
        answer = self._call(google_account_id, "write", waiter, Mode.RESERVE, 0.0)
        return max(answer.wait_ms, 0) / 1000

    def _call(
        self, google_account_id: str, kind: RateKind, waiter: str, mode: Mode, lead_s: float
    ) -> RateAnswer:
        account = rate_account_key(google_account_id, kind)
        project = rate_project_key(kind)
        return self._scripts.run(
            RateTake(
                account_window=account,
                project_window=project,
                account_tickets=rate_tickets_key(account),
                project_tickets=rate_tickets_key(project),
                window_ms=self.window_ms,
                account_limit=self.settings.rate_limit(kind, "account"),
                project_limit=self.settings.rate_limit(kind, "project"),
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

    def usage(self, google_account_id: str | None = None, kind: RateKind = "write") -> WindowUse:
        """Requests of ``kind`` in the current window (the project's when no account is
        given)."""
        if google_account_id is None:
            key, limit = rate_project_key(kind), self.settings.rate_limit(kind, "project")
        else:
            key = rate_account_key(google_account_id, kind)
            limit = self.settings.rate_limit(kind, "account")
        seconds, micros = self.redis.time()
        now_ms = seconds * 1000 + micros // 1000
        used = int(self.redis.zcount(key, f"({now_ms - self.window_ms}", "+inf"))
        return WindowUse(used=used, limit=limit)


class _Acquire:
    """The ``acquire`` hook that :class:`SheetsClient` calls per request, with its kind."""

    def __init__(
        self, limiter: RateLimiter, google_account_id: str, max_wait_s: float, waiter: str
    ) -> None:
        self._limiter = limiter
        self._account = google_account_id
        self._max_wait_s = max_wait_s
        self._waiter = waiter

    def __call__(self, kind: RateKind) -> None:
        self._limiter.take(self._account, kind, max_wait_s=self._max_wait_s, waiter=self._waiter)

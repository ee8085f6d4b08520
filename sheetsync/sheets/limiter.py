"""Strict sliding-window rate limits for Sheets requests (docs/ARCHITECTURE.md, "Limits").

Two windows guard every request: the Google account's (60 per 60 s) and the project's
(300 per 60 s). Both are taken in one Lua script (``rate_take.lua``): the `limits`
library's moving window takes one limit per call, so a refusal by the second limit
would waste the slot already taken from the first.

Google counts a request when it arrives; we count it when the slot is taken, a little
earlier. ``SHEETSYNC_RATE_MARGIN_S`` widens our window by more than that delay varies,
so two requests that we spaced one window apart never land inside one of Google's.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import redis

from sheetsync.buffers.scripts import Scripts
from sheetsync.errors import RateLimited
from sheetsync.keys import RATE_PROJECT, rate_account_key
from sheetsync.settings import Settings


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

    def take(self, google_account_id: str, *, max_wait_s: float = 0.0) -> None:
        """Take one slot in both windows, waiting up to ``max_wait_s`` for one to free;
        else raise :class:`RateLimited` with the wait."""
        deadline = time.monotonic() + max_wait_s
        while True:
            try:
                self._take_now(google_account_id)
                return
            except RateLimited as limited:
                if time.monotonic() + limited.retry_after_s > deadline:
                    raise
                time.sleep(limited.retry_after_s)

    def _take_now(self, google_account_id: str) -> None:
        taken, wait_ms = self._scripts.rate_take(
            keys=[rate_account_key(google_account_id), RATE_PROJECT],
            args=[
                self.window_ms,
                self.settings.rate_limit_per_account,
                self.settings.rate_limit_per_project,
                uuid.uuid4().hex,
            ],
        )
        if not int(taken):
            raise RateLimited(
                f"rate limit reached for account {google_account_id}",
                retry_after_s=int(wait_ms) / 1000,
            )

    def acquirer(self, google_account_id: str, max_wait_s: float = 0.0) -> _Acquire:
        return _Acquire(self, google_account_id, max_wait_s)

    def wait_s(self, google_account_id: str) -> float:
        """Seconds until a slot is free in both windows (0: free now). Takes nothing.

        A flush asks before it builds a batch, so a rate-limited run reschedules
        without hydrating, decrypting and building rows it cannot send yet.
        """
        seconds, micros = self.redis.time()
        now_ms = seconds * 1000 + micros // 1000
        since = f"({now_ms - self.window_ms}"
        pipe = self.redis.pipeline(transaction=False)
        windows = (
            (rate_account_key(google_account_id), self.settings.rate_limit_per_account),
            (RATE_PROJECT, self.settings.rate_limit_per_project),
        )
        for key, limit in windows:
            # The entry whose expiry frees a slot: the limit-th newest in the window.
            pipe.zrevrangebyscore(key, "+inf", since, start=limit - 1, num=1, withscores=True)
        wait_ms = 0.0
        for entries in pipe.execute():
            if entries:
                wait_ms = max(wait_ms, float(entries[0][1]) + self.window_ms - now_ms + 1)
        return wait_ms / 1000

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

    def __init__(self, limiter: RateLimiter, google_account_id: str, max_wait_s: float) -> None:
        self._limiter = limiter
        self._account = google_account_id
        self._max_wait_s = max_wait_s

    def __call__(self) -> None:
        self._limiter.take(self._account, max_wait_s=self._max_wait_s)

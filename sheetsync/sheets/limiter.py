"""Strict sliding-window rate limits for Sheets requests, and who goes first when slots
are short (docs/ARCHITECTURE.md, "Limits" and "Sharing the quota").

Google counts reads and writes apart, and so do we: every request is a read or a write,
and two windows of its kind guard it, the Google account's (60 per 60 s) and the
project's (300 per 60 s), so a header read never takes an append's slot. Both windows
are taken in one Lua script (``lua/rate_take.lua``): the `limits` library's moving
window takes one limit per call, so a refusal by the second limit would waste the slot
already taken from the first, and it has no queue.

When slots are short, waiting buffers queue at the project's window, fairly per Google
account and weighted by the owner's plan (``SHEETSYNC_RATE_PRIORITY_WEIGHT`` turns per
FREE owner's one); a run that has started its sequence (read, header, append) keeps its
turn. A waiter is told when its turn is expected and wakes for it (the flush task is
rescheduled: it never holds a worker process while it waits).

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
from sheetsync.keys import (
    RATE_KINDS,
    RateKind,
    rate_account_key,
    rate_account_waiting_key,
    rate_project_key,
    rate_queue_keys,
)
from sheetsync.lua.contract import Arg, Flag, Key, Script, Scripts
from sheetsync.settings import Settings

#: A waiter this long past the time it was expected has gone away (loses its place).
DEFAULT_WAITER_GRACE_MS = 1000
#: The waiter of a request no buffer waits for (it stands behind every waiting buffer).
NO_WAITER = ""
#: A request whose turn is near asks again no sooner than this.
MIN_ASK_AGAIN_S = 0.005
#: The weight of a FREE owner's requests at the queue.
FREE_WEIGHT = 1.0


class Mode(enum.StrEnum):
    #: Get a place in the queue (and when the turn is expected), take nothing.
    RESERVE = "reserve"
    #: The request goes now, or within the lead.
    TAKE = "take"


class RateAnswer(NamedTuple):
    #: The request has its slot (send after ``wait_ms``); else its turn is ``wait_ms``
    #: away, and it may ask to take it in ``ask_again_ms``.
    taken: bool
    wait_ms: int
    ask_again_ms: int


@dataclass(slots=True, kw_only=True)
class RateTake(Script[RateAnswer]):
    """One request slot in the account's and the project's windows (of one kind of
    request) at once, in the turn the queue gives it."""

    SCRIPT: ClassVar[str] = "rate_take"
    account_window: Key
    project_window: Key
    queue: Key
    served_tags: Key
    parked: Key
    parked_tags: Key
    expected: Key
    shares: Key
    account_waiting: Key
    window_ms: Arg[int]
    account_limit: Arg[int]
    project_limit: Arg[int]
    account: Arg[str]
    weight: Arg[float]
    #: A unique member for this request.
    member: Arg[str]
    #: The waiting buffer, or :data:`NO_WAITER`.
    waiter: Arg[str]
    mode: Arg[Mode]
    is_continuing: Flag
    lead_ms: Arg[int]
    grace_ms: Arg[int]
    #: Slots of this kind the waiter's turn still needs (2: a first write's header and
    #: append), so those behind it are told when their turns really come.
    slots: Arg[int]

    def decode(self, reply: Any) -> RateAnswer:
        taken, wait_ms, ask_again_ms = reply
        return RateAnswer(bool(int(taken)), int(wait_ms), int(ask_again_ms))


@dataclass(slots=True, kw_only=True)
class RateLeave(Script[None]):
    """A buffer's run ended without waiting for a slot: it leaves both queues."""

    SCRIPT: ClassVar[str] = "rate_leave"
    read_queue: Key
    read_served_tags: Key
    read_parked: Key
    read_parked_tags: Key
    read_expected: Key
    write_queue: Key
    write_served_tags: Key
    write_parked: Key
    write_parked_tags: Key
    write_expected: Key
    waiter: Arg[str]

    def decode(self, reply: Any) -> None:
        return None


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
        weight: float = FREE_WEIGHT,
        continuing: bool = False,
        slots: int = 1,
    ) -> None:
        """Take one slot in both windows of ``kind`` for a request about to be sent,
        waiting up to ``max_wait_s`` for it; else raise :class:`RateLimited` with the time
        to come back, ``max_wait_s`` before the turn (the ``waiter``, a buffer, keeps its
        place in the queue, and is there when its turn comes)."""
        while True:
            answer = self._call(
                google_account_id, kind, waiter, Mode.TAKE, max_wait_s, weight, continuing, slots
            )
            wait_s = answer.wait_ms / 1000
            if answer.taken:
                if wait_s > 0:
                    time.sleep(wait_s)
                return
            if wait_s > max_wait_s:
                raise RateLimited(
                    f"{kind} rate limit reached for account {google_account_id}",
                    retry_after_s=wait_s - max_wait_s,
                )
            time.sleep(max(answer.ask_again_ms / 1000, MIN_ASK_AGAIN_S))

    def reserve(
        self,
        google_account_id: str,
        waiter: str,
        *,
        weight: float = FREE_WEIGHT,
        lead_s: float = 0.0,
        slots: int = 1,
    ) -> float:
        """Seconds until ``waiter`` (a buffer) may send its next write (an append); 0 when
        it may go now. Takes nothing; the waiter keeps its place in the queue, as a turn of
        ``slots`` writes (2 when a header goes before the append).

        A flush asks before it builds a batch, so a rate-limited run reschedules to its
        turn without hydrating, decrypting and building rows it cannot send yet.
        """
        answer = self._call(
            google_account_id, "write", waiter, Mode.RESERVE, lead_s, weight, slots=slots
        )
        return max(answer.wait_ms, 0) / 1000 if not answer.taken else 0.0

    def leave(self, waiter: str) -> None:
        """``waiter``'s run ended without waiting for a slot: it keeps no place."""
        read, write = rate_queue_keys("read"), rate_queue_keys("write")
        self._scripts.run(
            RateLeave(
                read_queue=read.queue,
                read_served_tags=read.served_tags,
                read_parked=read.parked,
                read_parked_tags=read.parked_tags,
                read_expected=read.expected,
                write_queue=write.queue,
                write_served_tags=write.served_tags,
                write_parked=write.parked,
                write_parked_tags=write.parked_tags,
                write_expected=write.expected,
                waiter=waiter,
            )
        )

    def _call(
        self,
        google_account_id: str,
        kind: RateKind,
        waiter: str,
        mode: Mode,
        lead_s: float,
        weight: float,
        continuing: bool = False,
        slots: int = 1,
    ) -> RateAnswer:
        queue = rate_queue_keys(kind)
        return self._scripts.run(
            RateTake(
                account_window=rate_account_key(google_account_id, kind),
                project_window=rate_project_key(kind),
                queue=queue.queue,
                served_tags=queue.served_tags,
                parked=queue.parked,
                parked_tags=queue.parked_tags,
                expected=queue.expected,
                shares=queue.shares,
                account_waiting=rate_account_waiting_key(google_account_id, kind),
                window_ms=self.window_ms,
                account_limit=self.settings.rate_limit(kind, "account"),
                project_limit=self.settings.rate_limit(kind, "project"),
                account=google_account_id,
                weight=weight,
                member=uuid.uuid4().hex,
                waiter=waiter,
                mode=mode,
                is_continuing=continuing and waiter != NO_WAITER,
                lead_ms=int(lead_s * 1000),
                grace_ms=DEFAULT_WAITER_GRACE_MS,
                slots=slots if waiter != NO_WAITER else 1,
            )
        )

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
            key, limit = rate_project_key(kind), self.settings.rate_limit(kind, "project")
        else:
            key = rate_account_key(google_account_id, kind)
            limit = self.settings.rate_limit(kind, "account")
        used = int(self.redis.zcount(key, f"({self._now_ms() - self.window_ms}", "+inf"))
        return WindowUse(used=used, limit=limit)

    def places(self) -> dict[str, Place]:
        """Every waiting buffer's place, by buffer (its write place over its read place):
        read whole, for ``sheetsync status`` and the console."""
        found: dict[str, Place] = {}
        now_ms = self._now_ms()
        for kind in RATE_KINDS:
            keys = rate_queue_keys(kind)
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
            keys = rate_queue_keys(kind)
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
    """The ``acquire`` hook that :class:`SheetsClient` calls per request, with its kind.

    It knows the run's sequence: after the first request of a batch (the header's read,
    say), the rest (the header, the append) continue it and keep its turn at the head of
    the line. :meth:`begin_sequence` starts the next batch's, with the writes it needs.
    """

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
        self._continuing = False
        self._writes_left = 1

    def begin_sequence(self, writes: int = 1) -> None:
        self._continuing = False
        self._writes_left = writes

    @property
    def writes_left(self) -> int:
        return self._writes_left

    def __call__(self, kind: RateKind) -> None:
        self._limiter.take(
            self._account,
            kind,
            max_wait_s=self._max_wait_s,
            waiter=self._waiter,
            weight=self.weight,
            continuing=self._continuing,
            slots=self._writes_left if kind == "write" else 1,
        )
        self._continuing = True
        if kind == "write":
            self._writes_left = max(self._writes_left - 1, 1)

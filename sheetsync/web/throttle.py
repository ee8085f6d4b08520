"""A tarpit for wrong tokens to the console: per client address, in bounded memory.

The right token is never refused nor slowed (:class:`sheetsync.web.auth.Guard` checks it
before anything here): behind a reverse proxy, or Docker's userland proxy, every client
shares one address, the operator's included, so nothing may lock an address out.

A wrong token is answered late instead. An address may send ``allowed`` wrong tokens
answered at once; the next one waits ``delay_s``, and each further one twice as long as
the one before, up to ``max_delay_s``. Failures are counted before the wait, so guesses
sent in parallel wait longer each. A success forgets nothing: behind a proxy the
operator's page refreshes would otherwise give a guesser fresh free tries. An address
quiet for ``forget_after_s`` is forgotten; the table holds at most ``capacity``
addresses (the one that failed least recently goes first), and at most ``max_tarpitted``
wrong answers wait at once: beyond that a wrong token is answered at once, 429, so a
flood costs bounded memory and tasks. The tarpit slows a guesser down; the token's
length (32 characters at least) is what makes guessing it hopeless.

An IPv6 client counts by its /64, which one host usually holds whole.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

#: Wrong tokens an address sends answered at once, before the tarpit slows the next.
DEFAULT_ALLOWED = 5
#: The first delay, in seconds; each further wrong token doubles it.
DEFAULT_DELAY_S = 1.0
#: The delay stops doubling after this many doublings, unless ``max_delay_s`` is given
#: (1 s grows to 16 s).
MAX_DOUBLINGS = 4
#: Wrong answers waiting at once, at most.
DEFAULT_MAX_TARPITTED = 100
#: An address with no wrong token for this long starts afresh.
DEFAULT_FORGET_AFTER_S = 900.0
#: Addresses remembered at most.
DEFAULT_CAPACITY = 10_000


@dataclass
class _Record:
    failures: int
    last_failure: float


def client_key(host: str | None) -> str:
    """The address failures are counted for: the client's IPv4 address (an IPv4-mapped
    IPv6 one too), or its IPv6 /64."""
    if not host:
        return ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class LoginThrottle:
    """Wrong tokens per address, and the tarpit that holds their answers; see the
    module's docstring. Not thread-safe: the console's event loop is its only user."""

    def __init__(
        self,
        allowed: int = DEFAULT_ALLOWED,
        delay_s: float = DEFAULT_DELAY_S,
        *,
        max_delay_s: float | None = None,
        max_tarpitted: int = DEFAULT_MAX_TARPITTED,
        forget_after_s: float = DEFAULT_FORGET_AFTER_S,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if allowed < 0 or delay_s <= 0 or max_tarpitted < 1 or capacity < 1:
            raise ValueError("allowed must be >= 0; delay_s, max_tarpitted, capacity > 0")
        self.allowed = allowed
        self.delay_s = delay_s
        self.max_delay_s = delay_s * 2**MAX_DOUBLINGS if max_delay_s is None else max_delay_s
        self.max_tarpitted = max_tarpitted
        self.forget_after_s = forget_after_s
        self._capacity = capacity
        self._clock = clock
        self._sleep = sleep
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._tarpitted = 0

    def __len__(self) -> int:
        return len(self._records)

    @property
    def tarpitted(self) -> int:
        """Wrong answers waiting now."""
        return self._tarpitted

    def failures(self, client: str) -> int:
        """The wrong tokens ``client`` sent recently."""
        record = self._current(client, self._clock())
        return record.failures if record else 0

    def failed(self, client: str) -> float:
        """Count a wrong token from ``client``; returns how long its answer waits."""
        now = self._clock()
        record = self._current(client, now) or _Record(failures=0, last_failure=now)
        record.failures += 1
        record.last_failure = now
        self._records[client] = record
        self._records.move_to_end(client)
        while len(self._records) > self._capacity:
            self._records.popitem(last=False)
        beyond = record.failures - self.allowed
        if beyond <= 0:
            return 0.0
        # min() on the exponent first: a long-lived guesser's count must not overflow.
        return min(self.delay_s * 2.0 ** min(beyond - 1, 64), self.max_delay_s)

    async def wrong_token(self, client: str) -> bool:
        """Count a wrong token from ``client`` and hold its answer for its delay.
        False: the tarpit is full, answer at once (nothing was held)."""
        delay = self.failed(client)
        if delay <= 0:
            return True
        if self._tarpitted >= self.max_tarpitted:
            return False
        self._tarpitted += 1
        try:
            await self._sleep(delay)
        finally:
            self._tarpitted -= 1
        return True

    def _current(self, client: str, now: float) -> _Record | None:
        record = self._records.get(client)
        if record is not None and now - record.last_failure >= self.forget_after_s:
            del self._records[client]
            return None
        return record

"""Slowing down guesses of the console's token, per client address, in bounded memory.

An address may present a wrong credential ``allowed`` times. Its ``allowed``-th failure
locks it out for ``lockout_s``, and each further failure for twice as long as the one
before (up to ``2**MAX_DOUBLINGS`` times ``lockout_s``). While an address is locked out,
the console answers its every request 429 before looking at the credential: guesses sent
in parallel gain nothing, and the right token from that address waits too. A success
forgets its own address only. An address quiet for the longest lockout is forgotten, and
the table holds at most ``capacity`` addresses (the one that failed least recently goes
first), so a flood of addresses costs bounded memory.

An IPv6 client counts by its /64, which one host usually holds whole.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

#: Failures an address gets before it is locked out.
DEFAULT_ALLOWED = 5
#: The first lockout, in seconds; each further failure doubles it.
DEFAULT_LOCKOUT_S = 1.0
#: The lockout stops doubling after this many doublings (1 s grows to about 17 min).
MAX_DOUBLINGS = 10
#: Addresses remembered at most.
DEFAULT_CAPACITY = 10_000


@dataclass
class _Record:
    failures: int
    locked_until: float


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
    """Failed logins per address; see the module's docstring. Not thread-safe: the
    console's event loop is its only user."""

    def __init__(
        self,
        allowed: int = DEFAULT_ALLOWED,
        lockout_s: float = DEFAULT_LOCKOUT_S,
        *,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if allowed < 1 or lockout_s <= 0 or capacity < 1:
            raise ValueError("allowed, lockout_s and capacity must be positive")
        self.allowed = allowed
        self.lockout_s = lockout_s
        self.longest_lockout_s = lockout_s * 2**MAX_DOUBLINGS
        self._capacity = capacity
        self._clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may now."""
        now = self._clock()
        record = self._current(client, now)
        return max(0.0, record.locked_until - now) if record else 0.0

    def failed(self, client: str) -> float:
        """Count a wrong credential from ``client``; returns the lockout it starts in
        seconds (0: none yet)."""
        now = self._clock()
        record = self._current(client, now) or _Record(failures=0, locked_until=now)
        record.failures += 1
        beyond = record.failures - self.allowed
        lockout = self.lockout_s * 2 ** min(beyond, MAX_DOUBLINGS) if beyond >= 0 else 0.0
        record.locked_until = now + lockout
        self._records[client] = record
        self._records.move_to_end(client)
        while len(self._records) > self._capacity:
            self._records.popitem(last=False)
        return lockout

    def succeeded(self, client: str) -> None:
        """``client`` presented the right credential: forget its failures."""
        self._records.pop(client, None)

    def _current(self, client: str, now: float) -> _Record | None:
        record = self._records.get(client)
        if record is not None and now - record.locked_until >= self.longest_lockout_s:
            del self._records[client]
            return None
        return record

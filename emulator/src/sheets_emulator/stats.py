"""What the emulator saw: requests by kind and account, 429s (by account, scope and
project), token refreshes, and the busiest window of served reads and writes (computed
exactly from the recorded times).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from sheets_emulator.quotas import PROJECT_NUMBER, Access


def max_in_window(times: Sequence[float], window_s: float) -> int:
    """The most times that fit in any half-open window ``[t, t + window_s)``.

    Two pointers over the sorted times: for each right end, advance the left end past
    every time at least ``window_s`` older. The quota counts the same way, so a value
    above the limit means the limit was broken.
    """
    ordered = sorted(times)
    best = 0
    left = 0
    for right, time in enumerate(ordered):
        while time - ordered[left] >= window_s:
            left += 1
        best = max(best, right - left + 1)
    return best


class Stats:
    """Counters for ``GET /_emulator/stats``; reset with :meth:`reset`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests_by_kind: Counter[str] = Counter()
        self.requests_by_account: dict[str, Counter[str]] = {}
        self.unauthenticated = 0
        self.rate_limited: Counter[str] = Counter()
        self.rate_limited_by_scope: Counter[str] = Counter()
        self.rate_limited_by_project: Counter[str] = Counter()
        self.errors_by_status: Counter[int] = Counter()
        self.faults_fired: Counter[str] = Counter()
        self.token_refreshes = 0
        self.token_refresh_failures = 0
        self.served_times: dict[Access, list[float]] = {"read": [], "write": []}
        self.served_times_by_account: dict[tuple[str, Access], list[float]] = {}
        self.served_times_by_kind: dict[str, list[float]] = {}

    def record_request(self, kind: str, access: Access, account: str | None) -> None:
        """Any Sheets API request, whatever happens next; ``account`` None: no valid token."""
        self.requests_by_kind[kind] += 1
        self.requests_by_kind[access] += 1
        if account is None:
            self.unauthenticated += 1
            return
        counts = self.requests_by_account.setdefault(account, Counter())
        counts[kind] += 1
        counts[access] += 1

    def record_served(self, account: str, access: Access, now: float, kind: str) -> None:
        """A request that passed the quota (it counts toward the window)."""
        self.served_times[access].append(now)
        self.served_times_by_kind.setdefault(kind, []).append(now)
        self.served_times_by_account.setdefault((account, access), []).append(now)

    def record_rate_limited(self, account: str, scope: str, project: str = PROJECT_NUMBER) -> None:
        self.rate_limited[account] += 1
        self.rate_limited_by_scope[scope] += 1
        self.rate_limited_by_project[project] += 1

    def record_error(self, status: int) -> None:
        self.errors_by_status[status] += 1

    def record_fault(self, action: str) -> None:
        self.faults_fired[action] += 1

    def record_token(self, ok: bool) -> None:
        if ok:
            self.token_refreshes += 1
        else:
            self.token_refresh_failures += 1

    def snapshot(self, window_s: float) -> dict[str, Any]:
        """The JSON answer of ``GET /_emulator/stats``."""
        accounts = sorted(
            set(self.requests_by_account)
            | set(self.rate_limited)
            | {account for account, _ in self.served_times_by_account}
        )
        by_account = {account: self._account_snapshot(account, window_s) for account in accounts}
        kinds = dict(self.requests_by_kind)
        return {
            "window_s": window_s,
            "requests": {
                "total": kinds.get("read", 0) + kinds.get("write", 0),
                "reads": kinds.pop("read", 0),
                "writes": kinds.pop("write", 0),
                "by_kind": dict(sorted(kinds.items())),
                "unauthenticated": self.unauthenticated,
            },
            "served": {
                "reads": len(self.served_times["read"]),
                "writes": len(self.served_times["write"]),
            },
            "rate_limited": {
                "total": sum(self.rate_limited.values()),
                "by_scope": dict(self.rate_limited_by_scope),
                "by_account": dict(self.rate_limited),
                "by_project": dict(self.rate_limited_by_project),
            },
            "errors_by_status": {
                str(status): n for status, n in sorted(self.errors_by_status.items())
            },
            "faults_fired": dict(self.faults_fired),
            "token": {
                "refreshes": self.token_refreshes,
                "failures": self.token_refresh_failures,
            },
            "max_in_window": {
                "reads": max_in_window(self.served_times["read"], window_s),
                "writes": max_in_window(self.served_times["write"], window_s),
                "all": max_in_window(
                    self.served_times["read"] + self.served_times["write"], window_s
                ),
            },
            "served_span_s": _span(self.served_times["read"] + self.served_times["write"]),
            "by_account": by_account,
        }

    def _account_snapshot(self, account: str, window_s: float) -> dict[str, Any]:
        counts = dict(self.requests_by_account.get(account, Counter()))
        reads = self.served_times_by_account.get((account, "read"), [])
        writes = self.served_times_by_account.get((account, "write"), [])
        return {
            "requests": {
                "reads": counts.pop("read", 0),
                "writes": counts.pop("write", 0),
                "by_kind": dict(sorted(counts.items())),
            },
            "served": {"reads": len(reads), "writes": len(writes)},
            "rate_limited": self.rate_limited.get(account, 0),
            "max_in_window": {
                "reads": max_in_window(reads, window_s),
                "writes": max_in_window(writes, window_s),
                "all": max_in_window(reads + writes, window_s),
            },
        }


def _span(times: Sequence[float]) -> float:
    """Seconds from the first served request to the last (0 with fewer than two)."""
    return max(times) - min(times) if len(times) > 1 else 0.0

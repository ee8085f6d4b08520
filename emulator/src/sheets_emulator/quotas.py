"""Google's per-minute quotas: reads and writes, per project and per account in a project.

Each Cloud project (:mod:`sheets_emulator.projects`) has its own windows, with the same
limits. Each limit is a sliding window over the times of the requests it let through.
A request must fit both its account's limit in its project ("per user per project") and
its project's limit; a rejected request is not recorded, so it does not use up the
window (as with Google).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sheets_emulator.api_errors import ApiError
from sheets_emulator.errors import EmulatorConfigError

Access = Literal["read", "write"]
Scope = Literal["account", "project"]

#: Default requests per window, as Google sets them for the Sheets API.
DEFAULT_READS_PER_ACCOUNT = 60
DEFAULT_WRITES_PER_ACCOUNT = 60
DEFAULT_READS_PER_PROJECT = 300
DEFAULT_WRITES_PER_PROJECT = 300
#: Length of the sliding window in seconds (Google's "per minute").
DEFAULT_WINDOW_S = 60.0
#: The default project: every OAuth client is in it unless put in another.
PROJECT_NUMBER = "123456789012"
SERVICE = "sheets.googleapis.com"


@dataclass(frozen=True)
class QuotaLimits:
    """The four limits and the window they apply to."""

    read_per_account: int = DEFAULT_READS_PER_ACCOUNT
    write_per_account: int = DEFAULT_WRITES_PER_ACCOUNT
    read_per_project: int = DEFAULT_READS_PER_PROJECT
    write_per_project: int = DEFAULT_WRITES_PER_PROJECT
    window_s: float = DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            kinds = (int, float) if field.name == "window_s" else (int,)
            if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
                what = "number" if field.name == "window_s" else "integer"
                raise EmulatorConfigError(
                    f"quota {field.name} must be a positive {what}, got {value!r}"
                )

    def updated(self, changes: dict[str, Any]) -> QuotaLimits:
        """A copy with ``changes`` applied; unknown names or bad values raise
        :class:`EmulatorConfigError`."""
        names = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise EmulatorConfigError(f"unknown quota setting(s): {', '.join(unknown)}")
        cleaned: dict[str, Any] = {
            name: float(value) if name == "window_s" and isinstance(value, int) else value
            for name, value in changes.items()
        }
        return dataclasses.replace(self, **cleaned)

    def limit(self, access: Access, scope: Scope) -> int:
        value: int = getattr(self, f"{access}_per_{scope}")
        return value

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class QuotaExceededError(ApiError):
    """The 429 of one limit; ``scope`` says which (``account`` or ``project``)."""

    scope: Scope


class QuotaBook:
    """Sliding windows keyed by (project, account, access) and by (project, access)."""

    def __init__(self, limits: QuotaLimits) -> None:
        self.limits = limits
        self._account_windows: dict[tuple[str, str, Access], deque[float]] = {}
        self._project_windows: dict[tuple[str, Access], deque[float]] = {}

    def take(self, account: str, access: Access, now: float, project: str = PROJECT_NUMBER) -> None:
        """Record one request at ``now`` in ``project``, or raise the 429 :class:`ApiError`
        Google sends."""
        account_window = self._account_windows.setdefault((project, account, access), deque())
        project_window = self._project_windows.setdefault((project, access), deque())
        self._expire(account_window, now)
        self._expire(project_window, now)
        account_limit = self.limits.limit(access, "account")
        if len(account_window) >= account_limit:
            raise quota_exceeded(access, "account", account_limit, project)
        project_limit = self.limits.limit(access, "project")
        if len(project_window) >= project_limit:
            raise quota_exceeded(access, "project", project_limit, project)
        # In order even when requests finish arriving out of order (``now`` is when each
        # one arrived), so expiry from the left stays exact.
        bisect.insort(account_window, now)
        bisect.insort(project_window, now)

    def usage(self, now: float, projects: Iterable[str] = ()) -> dict[str, Any]:
        """Requests in the current windows: ``by_project`` (the default project and
        ``projects`` even when idle), each ``{"project": {"read", "write"}, "by_account":
        {account: {"read", "write"}}}``; the default project's two keys also at the top."""
        by_project = {project: _idle() for project in {PROJECT_NUMBER, *projects}}
        for (project, access), window in self._project_windows.items():
            self._expire(window, now)
            by_project.setdefault(project, _idle())["project"][access] = len(window)
        for (project, account, access), window in self._account_windows.items():
            self._expire(window, now)
            accounts = by_project.setdefault(project, _idle())["by_account"]
            accounts.setdefault(account, {"read": 0, "write": 0})[access] = len(window)
        return {**by_project[PROJECT_NUMBER], "by_project": dict(sorted(by_project.items()))}

    def _expire(self, window: deque[float], now: float) -> None:
        horizon = now - self.limits.window_s
        while window and window[0] <= horizon:
            window.popleft()


def _idle() -> dict[str, Any]:
    return {"project": {"read": 0, "write": 0}, "by_account": {}}


def quota_exceeded(
    access: Access, scope: Scope, limit: int, project: str = PROJECT_NUMBER
) -> QuotaExceededError:
    """The 429 RESOURCE_EXHAUSTED body Google returns for this limit of ``project``."""
    metric = "Read requests" if access == "read" else "Write requests"
    limit_label = f"{metric} per minute" + (" per user" if scope == "account" else "")
    limit_name = f"{metric.replace(' r', 'R')}PerMinutePer" + (
        "User" if scope == "account" else "Project"
    )
    message = (
        f"Quota exceeded for quota metric '{metric}' and limit '{limit_label}' of service "
        f"'{SERVICE}' for consumer 'project_number:{project}'."
    )
    details = [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "RATE_LIMIT_EXCEEDED",
            "domain": "googleapis.com",
            "metadata": {
                "quota_metric": f"{SERVICE}/{access}_requests",
                "quota_limit": limit_name,
                "quota_limit_value": str(limit),
                "quota_location": "global",
                "consumer": f"projects/{project}",
                "service": SERVICE,
            },
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [
                {
                    "description": "Request a higher quota limit.",
                    "url": "https://cloud.google.com/docs/quotas/help/request_increase",
                }
            ],
        },
    ]
    error = QuotaExceededError.google(429, message, details=details)
    error.scope = scope
    return error

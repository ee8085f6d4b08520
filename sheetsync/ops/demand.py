"""How many worker processes the waiting work can use: the figure an autoscaler (KEDA,
an HPA) sizes the flush workers on, read from Redis alone (docs/operating/autoscaling.md).

Celery's queue length is the wrong signal here. The backlog is in the buffers, and the
broker holds at most one flush message per buffer; the countdown messages of buffers
still debouncing sit unacked inside workers (an empty queue can hide a big backlog), and
a long queue can be runs that the quota will only send back to wait (no process helps).

The formula, every figure on Redis's clock::

    worker_processes = running + min(project_free, sum_a min(due_a, free_a) + due_unknown)

- ``running``: buffers whose run holds an unexpired lease; each holds one process.
- ``due``: buffers with ids whose flush may start now (its job scheduled and due, its
  lease run out, or no job yet). ``due_a`` are those whose run holds a write turn at
  the quota as Google account ``a`` (the turn names its account); ``due_unknown`` the
  rest, whose account Redis does not know until their run asks for a slot.
- ``project_free``: the project's write slots free in its window now (its limit less the
  writes of the last window, a minute); ``free_a``: account ``a``'s.

With several OAuth clients (``GOOGLE_CLIENTS_FILE``) each project feeds its own: the
``min`` with ``project_free`` is taken per project over its accounts' due buffers, and the
unknown ones, which may be any project's, share what all of them have free.

A due buffer the quota has no slot for would only be told to come back: it is not
demand. Each flush needs one write at least, so the quota caps the due buffers at the
slots free; a running one already holds its process and counts whatever the quota says.
So the figure is 0 when nothing is due or running, N for N due sheets with the quota
free, and no more than the free slots (plus the runs going on) when it is not. Buffers
waiting for later (debounce, backoff, a turn told to come back) are not demand yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sheetsync.errors import ValidationError
from sheetsync.lua.contract import Arg, Each, Key, Script, Scripts, as_text
from sheetsync.redis_keys import (
    BUFFER_INDEX,
    DEFAULT_GOOGLE_CLIENT,
    BufferKey,
    is_account_id,
    rate_account_key,
    rate_project_key,
    rate_queue_keys,
)
from sheetsync.services import Services

#: Buffers one script call reads (the rest go in more calls of the same round trip, so
#: no call holds Redis long).
CHUNK = 1000


@dataclass(frozen=True, slots=True)
class BufferState:
    """Where one buffer stands: ``running``, ``due``, ``waiting`` or ``idle``."""

    state: str
    ids: int
    queue: str
    #: The Google account its run holds a write turn as (None: no turn).
    account: str | None = None
    #: The OAuth client (Cloud project) of that turn's queue.
    project: str = DEFAULT_GOOGLE_CLIENT


@dataclass(frozen=True, slots=True)
class QuotaNow:
    project_free: int
    waiting_runs: int
    account_free: tuple[int, ...]


@dataclass(slots=True, kw_only=True)
class AccountWindow:
    window: Key


@dataclass(slots=True, kw_only=True)
class BufferKeys:
    buffer: Key
    job: Key


@dataclass(slots=True, kw_only=True)
class ReadDemand(Script[tuple[QuotaNow, list[tuple[str, int, str]]]]):
    """The quota now and where each buffer stands (``lua/demand.lua``, read only)."""

    SCRIPT: ClassVar[str] = "demand"
    project_window: Key
    write_queue: Key
    write_parked: Key
    read_queue: Key
    read_parked: Key
    window_ms: Arg[int]
    project_limit: Arg[int]
    account_limit: Arg[int]
    account_count: Arg[int]
    accounts: Each[AccountWindow]
    buffers: Each[BufferKeys]

    def decode(self, reply: Any) -> tuple[QuotaNow, list[tuple[str, int, str]]]:
        at = 2 + self.account_count
        quota = QuotaNow(int(reply[0]), int(reply[1]), tuple(int(n) for n in reply[2:at]))
        rest = reply[at:]
        states = [
            (as_text(rest[n]), int(rest[n + 1]), as_text(rest[n + 2]))
            for n in range(0, len(rest), 3)
        ]
        return quota, states


@dataclass(frozen=True, slots=True)
class Demand:
    """The demand on worker processes, and its parts (of one queue, or of all)."""

    worker_processes: int
    buffers_due: int
    buffers_running: int
    buffers_waiting: int
    ids_waiting: int
    quota_waiting_runs: int
    #: Write slots free in the windows now: the project's, and the sum of the accounts'
    #: whose runs wait at the quota.
    write_slots_project: int
    write_slots_accounts: int
    #: Buffers read, and in the index: fewer read (past the limit) makes a lower bound.
    buffers_counted: int
    buffers_total: int
    queue: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The body of the exporter's ``GET /demand`` (KEDA reads ``worker_processes``)."""
        return {
            "worker_processes": self.worker_processes,
            "buffers_due": self.buffers_due,
            "buffers_running": self.buffers_running,
            "buffers_waiting": self.buffers_waiting,
            "ids_waiting": self.ids_waiting,
            "quota_waiting_runs": self.quota_waiting_runs,
            "write_slots_next_minute": {
                "project": self.write_slots_project,
                "accounts": self.write_slots_accounts,
            },
            "queue": self.queue,
            "buffers_counted": self.buffers_counted,
            "buffers_total": self.buffers_total,
        }


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every buffer read and the quota, at one moment: :meth:`demand` of any queue."""

    buffers: tuple[BufferState, ...]
    buffers_total: int
    #: Each OAuth client's project: its quota now, and its accounts' write slots free.
    quota: dict[str, QuotaNow]
    account_free: dict[tuple[str, str], int] = field(default_factory=dict)

    def demand(self, queue: str | None = None) -> Demand:
        mine = [item for item in self.buffers if queue is None or item.queue == queue]
        states = Counter(item.state for item in mine)
        due = [item for item in mine if item.state == "due"]
        by_account = Counter(
            (item.project, item.account) for item in due if item.account is not None
        )
        fed: Counter[str] = Counter()
        for (project, account), n in by_account.items():
            fed[project] += min(n, self.account_free.get((project, account), 0))
        project_free = sum(quota.project_free for quota in self.quota.values())
        # Each project feeds its own; a due buffer whose project Redis does not know yet
        # may be any project's, so the unknown ones share what all of them have free.
        feedable = sum(min(n, self.quota[p].project_free) for p, n in fed.items())
        feedable += sum(1 for item in due if item.account is None)
        feedable = min(feedable, project_free)
        return Demand(
            worker_processes=max(0, states["running"] + feedable),
            buffers_due=states["due"],
            buffers_running=states["running"],
            buffers_waiting=states["waiting"],
            ids_waiting=sum(item.ids for item in mine),
            quota_waiting_runs=sum(quota.waiting_runs for quota in self.quota.values()),
            write_slots_project=project_free,
            write_slots_accounts=sum(self.account_free.values()),
            buffers_counted=len(self.buffers),
            buffers_total=self.buffers_total,
            queue=queue,
        )


def read(services: Services, limit: int) -> Snapshot:
    """Up to ``limit`` buffers of the index (oldest first) and the quota of every OAuth
    client's project, in two round trips: the index and the write turns, then the
    read-only script (a call per project for its quota, a call per chunk of buffers)."""
    client, settings = services.redis, services.settings
    projects = settings.google_clients
    pipe = client.pipeline(transaction=False)
    pipe.zrange(BUFFER_INDEX, 0, limit - 1)
    pipe.zcard(BUFFER_INDEX)
    for project in projects:
        pipe.hgetall(rate_queue_keys("write", project).turns)
    members, total, *turns_of = pipe.execute()
    keys = list(_parsed(members))
    # A turn is "<account> <start> <slot> <rank> <cost> <left>" (sheets/lua/rate_turn.lua).
    turn_of: dict[str, tuple[str, str]] = {}
    accounts: dict[str, list[str]] = {}
    for project, turns in zip(projects, turns_of, strict=True):
        found = {as_text(name): as_text(turn).partition(" ")[0] for name, turn in turns.items()}
        turn_of.update({name: (project, account) for name, account in found.items()})
        accounts[project] = sorted({a for a in found.values() if is_account_id(a)})
    calls = [_quota_call(services, project, accounts[project]) for project in projects]
    chunks = [keys[at : at + CHUNK] for at in range(0, len(keys), CHUNK)]
    calls += [
        _quota_call(services, DEFAULT_GOOGLE_CLIENT, [], chunk)  # its quota part unread
        for chunk in chunks
    ]
    replies = Scripts(client).run_many(calls)
    quota = {project: replies[n][0] for n, project in enumerate(projects)}
    states = [state for _, part in replies[len(projects) :] for state in part]
    account_free = {
        (project, account): free
        for project in projects
        for account, free in zip(accounts[project], quota[project].account_free, strict=True)
    }
    buffers = []
    for key, (state, ids, queue) in zip(keys, states, strict=True):
        project, account = turn_of.get(key.base, (DEFAULT_GOOGLE_CLIENT, None))
        known = account if (project, account) in account_free else None
        buffers.append(BufferState(state, ids, queue, known, project))
    return Snapshot(
        buffers=tuple(buffers),
        buffers_total=int(total),
        quota=quota,
        account_free=account_free,
    )


def _quota_call(
    services: Services, project: str, accounts: list[str], chunk: Sequence[BufferKey] = ()
) -> ReadDemand:
    writes, reads = rate_queue_keys("write", project), rate_queue_keys("read", project)
    settings = services.settings
    return ReadDemand(
        project_window=rate_project_key("write", project),
        write_queue=writes.queue,
        write_parked=writes.parked,
        read_queue=reads.queue,
        read_parked=reads.parked,
        window_ms=services.limiter.window_ms,
        project_limit=settings.rate_limit("write", "project", project),
        account_limit=settings.rate_limit("write", "account"),
        account_count=len(accounts),
        accounts=[AccountWindow(window=rate_account_key(a, "write", project)) for a in accounts],
        buffers=[BufferKeys(buffer=key.buf, job=key.job) for key in chunk],
    )


def _parsed(members: list[Any]) -> Iterator[BufferKey]:
    for member in members:
        try:
            yield BufferKey.parse(as_text(member))
        except ValidationError:
            continue  # written by hand: status names it, the demand leaves it out

"""Every Redis key sheetsync uses, and the validation of the ids inside them.

A buffer is one (owner, form, spreadsheet, sheet) target; its keys share the hash tag in
braces. sheetsync needs one Redis primary (standalone, or behind Sentinel for failover),
not a Redis Cluster: its scripts touch a buffer's keys together with global ones in one
call (enqueue, claim and finish also write the buffer and due indexes), and some touch
several buffers (an emit to every linked sheet, a sweep) or an account's window with the
project's (``rate_take``). The hash tags would not make those calls single-slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from sheetsync.errors import ValidationError

PREFIX = "sheetsync"
#: ZSET of buffer bases scored by the time their oldest id arrived (ms): status reads
#: it, so nothing ever scans with KEYS.
BUFFER_INDEX = f"{PREFIX}:buffers"
#: ZSET of buffer bases with a job, scored by when the sweeper must look at it next (ms):
#: a scheduled job's due time plus the grace, a running job's lease end. A sweeper pass
#: reads only what is due.
DUE_INDEX = f"{PREFIX}:due"
#: STRING set once every job of the buffer index is in the due index (an upgrade from a
#: version without it fills it once).
DUE_INDEX_FILLED = f"{PREFIX}:due:filled"
#: The kinds of Sheets request Google counts apart, each in windows of its own.
RateKind = Literal["read", "write"]
RATE_KINDS: tuple[RateKind, ...] = ("read", "write")
#: ZSET windows of the rate limiter, per kind of request: one per Google account
#: (``sheetsync:rate:<kind>:account:<id>``) and one for the project.
RATE_READ_PROJECT = f"{PREFIX}:rate:read:project"
RATE_WRITE_PROJECT = f"{PREFIX}:rate:write:project"
#: The project's queue of buffers waiting for a slot, per kind: its parts' key names
#: (sheets/lua/rate_turn.lua says what each holds; the pace is rate_take.lua's).
RATE_QUEUE_PARTS = ("queue", "turns", "parked", "expected", "debts", "clock", "lines", "pace")
#: STRING per alert topic, set while a repeat of that alert is held back.
ALERTED = f"{PREFIX}:alerted:"
#: STRING per (owner, notification topic), set while a repeat is held back.
OWNER_NOTIFIED = f"{PREFIX}:notified:"
#: ZSET of live worker and beat process names, scored by their last heartbeat (ms).
HEARTBEATS = f"{PREFIX}:heartbeats"
#: HASH per process (role, queues, pid, seen), expiring with its heartbeat.
HEARTBEAT = f"{PREFIX}:heartbeat:"
#: STRING per periodic job: when a beat was last granted its send (Redis ms).
BEAT_CLAIM = f"{PREFIX}:beat:last:"
#: HASH of the pipeline's event counters and histogram buckets (rows appended, flush
#: durations, Sheets requests, ledger transitions), summed over every process; the
#: metrics exporter reads it (:mod:`sheetsync.metrics.events`).
METRICS_EVENTS = f"{PREFIX}:metrics:events"

_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_BASE = re.compile(
    r"sheetsync:\{(?P<user>[A-Za-z0-9_-]{1,128}):(?P<submission>[A-Za-z0-9_-]{1,128}):"
    r"(?P<spreadsheet>[A-Za-z0-9_-]{1,128}):(?P<sheet>[0-9]{1,10})\}"
)


def check_id(value: object, what: str) -> str:
    """Return ``value`` if it is a safe id (``[A-Za-z0-9_-]{1,128}``), else raise."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        shown = repr(value)[:40] if isinstance(value, str | int) else type(value).__name__
        raise ValidationError(f"{what} must match [A-Za-z0-9_-]{{1,128}}, got {shown}")
    return value


def check_sheet_id(value: object) -> int:
    """A sheet gid: a non-negative int (or its decimal string)."""
    if isinstance(value, bool):
        raise ValidationError("sheet_id must be an integer, got a bool")
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        value = int(value)
    if not isinstance(value, int) or not 0 <= value < 2**31:
        shown = repr(value)[:40]
        raise ValidationError(f"sheet_id must be a non-negative integer, got {shown}")
    return value


@dataclass(frozen=True, slots=True)
class BufferKey:
    """One buffer: the answers of one form bound for one sheet of one owner."""

    user_id: str
    submission_id: str
    spread_sheet_id: str
    sheet_id: int
    #: ``sheetsync:{<user>:<form>:<spreadsheet>:<gid>}``, the prefix of every key below.
    base: str = field(init=False, repr=False, compare=False)
    #: LIST of buffered answer ids, oldest first.
    buf: str = field(init=False, repr=False, compare=False)
    #: HASH token, epoch, state, promoted, queue, due_at, lease_until, attempts, sent: the
    #: one live task.
    job: str = field(init=False, repr=False, compare=False)
    #: HASH title, time_zone, header_ok, last_row, seq, and row1 / row1_columns / row1_ms while a
    #: header check waits for the rate limit: outlives jobs so bursts skip re-reads.
    sheet: str = field(init=False, repr=False, compare=False)
    #: LIST of arrival runs, ``<ms>:<count>``, oldest first, trimmed with the list: when
    #: each buffered id arrived (the debounce and the buffer's true age come from it).
    times: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_id(self.user_id, "user_id")
        check_id(self.submission_id, "submission_id")
        check_id(self.spread_sheet_id, "spread_sheet_id")
        check_sheet_id(self.sheet_id)
        # Computed once: the emit path builds these for every answer.
        tag = f"{self.user_id}:{self.submission_id}:{self.spread_sheet_id}:{self.sheet_id}"
        base = f"{PREFIX}:{{{tag}}}"
        for name, value in (
            ("base", base),
            ("buf", f"{base}:buf"),
            ("job", f"{base}:job"),
            ("sheet", f"{base}:sheet"),
            ("times", f"{base}:times"),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def parse(cls, base: str) -> BufferKey:
        match = _BASE.fullmatch(base)
        if match is None:
            raise ValidationError(f"not a buffer key: {base[:200]!r}")
        return cls(match["user"], match["submission"], match["spreadsheet"], int(match["sheet"]))


#: A Google account id as a key part. Google's are digits; emails and the demo's ids fit
#: too. Never a ":" (the key separator: account "acct:waiting" would be account "acct"'s
#: waiting key) nor anything a key name should not carry.
_ACCOUNT_ID = re.compile(r"[A-Za-z0-9_.@+-]{1,254}")


def is_account_id(text: str) -> bool:
    """Whether ``text`` may name a Google account in a key."""
    return _ACCOUNT_ID.fullmatch(text) is not None


#: The OAuth client of ``GOOGLE_CLIENT_ID`` (a credential that names none): its quota's
#: keys are the ones every release before several clients used.
DEFAULT_GOOGLE_CLIENT = "default"


def _rate(kind: RateKind, google_client: str) -> str:
    """Where one project's windows and queue of ``kind`` live: each OAuth client is a
    Cloud project of its own, with its own quota."""
    if google_client == DEFAULT_GOOGLE_CLIENT:
        return f"{PREFIX}:rate:{kind}"
    return f"{PREFIX}:rate:{kind}@{check_id(google_client, 'google client')}"


def rate_account_key(
    google_account_id: str, kind: RateKind, google_client: str = DEFAULT_GOOGLE_CLIENT
) -> str:
    if not is_account_id(google_account_id):
        raise ValidationError("a Google account id with characters a key cannot hold")
    return f"{_rate(kind, google_client)}:account:{google_account_id}"


def rate_project_key(kind: RateKind, google_client: str = DEFAULT_GOOGLE_CLIENT) -> str:
    if google_client == DEFAULT_GOOGLE_CLIENT:
        return RATE_READ_PROJECT if kind == "read" else RATE_WRITE_PROJECT
    return f"{_rate(kind, google_client)}:project"


class RateQueueKeys(NamedTuple):
    """The keys of one kind's queue at the project's window (sheets/lua/rate_turn.lua)."""

    queue: str
    turns: str
    parked: str
    expected: str
    debts: str
    clock: str
    lines: str
    pace: str


def rate_queue_keys(kind: RateKind, google_client: str = DEFAULT_GOOGLE_CLIENT) -> RateQueueKeys:
    return RateQueueKeys(*(f"{_rate(kind, google_client)}:{part}" for part in RATE_QUEUE_PARTS))


def alert_once_key(topic: str) -> str:
    return f"{ALERTED}{topic}"


def owner_notified_key(user_id: str, topic: str) -> str:
    return f"{OWNER_NOTIFIED}{check_id(user_id, 'user_id')}:{topic}"


def beat_claim_key(job: str) -> str:
    return f"{BEAT_CLAIM}{job}"


def heartbeat_key(process_name: str) -> str:
    return f"{HEARTBEAT}{process_name}"


def token_buffer(token: str) -> BufferKey:
    """The buffer a task token (``<base>#<n>``) belongs to."""
    base, sep, _ = token.rpartition("#")
    if not sep:
        raise ValidationError(f"not a flush token: {token[:200]!r}")
    return BufferKey.parse(base)

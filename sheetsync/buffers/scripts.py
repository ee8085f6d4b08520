"""The buffer's Lua scripts, one per state change: each one's contract, and the one
shape of "a task to send".

Each class names its script's KEYS and ARGV in order (:mod:`sheetsync.lua.contract`)
and decodes its reply; ``lua/<script>.lua`` beside this module names the same at its
top. :class:`sheetsync.buffers.store.BufferStore` is the only caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypedDict

from sheetsync.dispatch import FlushTask
from sheetsync.lua.contract import Arg, Each, Flag, Key, Rest, Script, as_text
from sheetsync.redis_keys import BUFFER_INDEX, DUE_INDEX, BufferKey

#: ``trim``'s last row when the sheet's end did not change.
KEEP_LAST_ROW = ""
#: ``trim``'s last row when the sheet's end is no longer known (forget the cached one).
FORGET_LAST_ROW = "-"


def decode_tasks(reply: Sequence[Any]) -> list[FlushTask]:
    """The tasks a script returned, each ``{token, queue, countdown (ms), superseded}``."""
    return [
        FlushTask(
            token=as_text(token),
            queue=as_text(queue),
            countdown_s=int(countdown_ms) / 1000,
            superseded=as_text(superseded) or None,
        )
        for token, queue, countdown_ms, superseded in reply
    ]


def _first_task(reply: Sequence[Any]) -> FlushTask | None:
    tasks = decode_tasks(reply)
    return tasks[0] if tasks else None


class JobKeys(TypedDict):
    """The KEYS of a script that changes a job alone, in their order."""

    job: str
    due_index: str


def job_keys(key: BufferKey) -> JobKeys:
    return JobKeys(job=key.job, due_index=DUE_INDEX)


class RunKeys(TypedDict):
    """The KEYS of a script that moves one buffer through a run, in their order."""

    buffer: str
    job: str
    sheet: str
    buffer_index: str
    times: str
    due_index: str


def run_keys(key: BufferKey) -> RunKeys:
    return RunKeys(
        buffer=key.buf,
        job=key.job,
        sheet=key.sheet,
        buffer_index=BUFFER_INDEX,
        times=key.times,
        due_index=DUE_INDEX,
    )


@dataclass(slots=True, kw_only=True)
class EnqueueTarget:
    """One buffer an ``enqueue`` pushes to."""

    buffer: Key
    job: Key
    sheet: Key
    times: Key
    base: Arg[str]
    queue: Arg[str]

    @classmethod
    def of(cls, key: BufferKey, queue: str) -> EnqueueTarget:
        return cls(
            buffer=key.buf,
            job=key.job,
            sheet=key.sheet,
            times=key.times,
            base=key.base,
            queue=queue,
        )


@dataclass(slots=True, kw_only=True)
class Enqueue(Script[list[FlushTask]]):
    SCRIPT: ClassVar[str] = "enqueue"
    buffer_index: Key
    due_index: Key
    delay_ms: Arg[int]
    threshold: Arg[int]
    sheet_ttl_s: Arg[int]
    grace_ms: Arg[int]
    targets: Each[EnqueueTarget]
    ids: Rest[str]

    def decode(self, reply: Any) -> list[FlushTask]:
        return decode_tasks(reply)


class Claimed(NamedTuple):
    epoch: str
    until_ms: int
    now_ms: int


@dataclass(slots=True, kw_only=True)
class Claim(Script[Claimed | None]):
    """None: not this token's to take (superseded, or another delivery still runs)."""

    SCRIPT: ClassVar[str] = "claim"
    job: Key
    due_index: Key
    token: Arg[str]
    lease_ms: Arg[int]
    base: Arg[str]

    def decode(self, reply: Any) -> Claimed | None:
        if not reply:
            return None
        epoch, until_ms, now_ms = reply
        return Claimed(str(epoch), int(until_ms), int(now_ms))


class Renewed(NamedTuple):
    until_ms: int
    now_ms: int


@dataclass(slots=True, kw_only=True)
class Renew(Script[Renewed | None]):
    """None: this run no longer holds the buffer."""

    SCRIPT: ClassVar[str] = "renew"
    job: Key
    due_index: Key
    token: Arg[str]
    epoch: Arg[str]
    lease_ms: Arg[int]
    base: Arg[str]

    def decode(self, reply: Any) -> Renewed | None:
        if not reply:
            return None
        until_ms, now_ms = reply
        return Renewed(int(until_ms), int(now_ms))


class Trimmed(NamedTuple):
    #: Ids left in the list; -1 when this run no longer holds the buffer.
    left: int
    oldest_age_ms: int


@dataclass(slots=True, kw_only=True)
class Trim(Script[Trimmed]):
    SCRIPT: ClassVar[str] = "trim"
    buffer: Key
    job: Key
    sheet: Key
    buffer_index: Key
    times: Key
    due_index: Key
    token: Arg[str]
    epoch: Arg[str]
    lease_ms: Arg[int]
    count: Arg[int]
    #: A row number, :data:`KEEP_LAST_ROW` or :data:`FORGET_LAST_ROW`.
    last_row: Arg[int | str]
    base: Arg[str]
    sheet_ttl_s: Arg[int]

    def decode(self, reply: Any) -> Trimmed:
        left, oldest_age_ms = reply
        return Trimmed(int(left), int(oldest_age_ms))


@dataclass(slots=True, kw_only=True)
class Finish(Script[FlushTask | None]):
    """The next task to send, or None: the job is done, or this run was fenced."""

    SCRIPT: ClassVar[str] = "finish"
    buffer: Key
    job: Key
    sheet: Key
    buffer_index: Key
    times: Key
    due_index: Key
    token: Arg[str]
    epoch: Arg[str]
    delay_ms: Arg[int]
    threshold: Arg[int]
    base: Arg[str]
    sheet_ttl_s: Arg[int]
    #: The countdown when rescheduling on purpose (a rate limit), or -1.
    forced_ms: Arg[int]
    grace_ms: Arg[int]
    hold: Flag

    def decode(self, reply: Any) -> FlushTask | None:
        return _first_task(reply)


@dataclass(slots=True, kw_only=True)
class Release(Script[int]):
    """The attempts so far including this one; -1 when this run was fenced."""

    SCRIPT: ClassVar[str] = "release"
    job: Key
    due_index: Key
    token: Arg[str]
    epoch: Arg[str]
    delay_ms: Arg[int]
    base: Arg[str]
    grace_ms: Arg[int]

    def decode(self, reply: Any) -> int:
        return int(reply)


@dataclass(slots=True, kw_only=True)
class Adopt(Script[FlushTask | None]):
    """The task for a new token due now, or None (a run holds it, or nothing to do)."""

    SCRIPT: ClassVar[str] = "adopt"
    buffer: Key
    job: Key
    sheet: Key
    buffer_index: Key
    times: Key
    due_index: Key
    base: Arg[str]
    default_queue: Arg[str]
    sheet_ttl_s: Arg[int]
    even_empty: Flag
    grace_ms: Arg[int]

    def decode(self, reply: Any) -> FlushTask | None:
        return _first_task(reply)


@dataclass(slots=True, kw_only=True)
class SweptBuffer:
    """One buffer a ``sweep`` looks at."""

    buffer: Key
    job: Key
    sheet: Key
    times: Key
    base: Arg[str]

    @classmethod
    def of(cls, key: BufferKey) -> SweptBuffer:
        return cls(buffer=key.buf, job=key.job, sheet=key.sheet, times=key.times, base=key.base)


@dataclass(slots=True, kw_only=True)
class Sweep(Script[list[FlushTask]]):
    SCRIPT: ClassVar[str] = "sweep"
    buffer_index: Key
    due_index: Key
    grace_ms: Arg[int]
    queued_grace_ms: Arg[int]
    default_queue: Arg[str]
    sheet_ttl_s: Arg[int]
    #: Queues with messages waiting for a worker, comma-separated.
    busy_queues: Arg[str]
    buffers: Each[SweptBuffer]

    def decode(self, reply: Any) -> list[FlushTask]:
        return decode_tasks(reply)


@dataclass(slots=True, kw_only=True)
class SentTask:
    job: Key
    token: Arg[str]


@dataclass(slots=True, kw_only=True)
class Sent(Script[int]):
    """How many jobs were marked sent."""

    SCRIPT: ClassVar[str] = "sent"
    tasks: Each[SentTask]

    def decode(self, reply: Any) -> int:
        return int(reply)

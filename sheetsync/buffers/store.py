"""The Redis side of buffers: push ids, and move one buffer through its states.

Python here only passes keys, durations and arguments: every decision about tokens,
leases and scheduling is made inside a script (each one's contract is declared in
:mod:`sheetsync.buffers.scripts`), atomically, on the Redis server's clock. See
docs/ARCHITECTURE.md for the job state machine and the invariants the scripts keep.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import redis

from sheetsync.buffers.scripts import (
    KEEP_LAST_ROW,
    Adopt,
    Claim,
    Enqueue,
    EnqueueTarget,
    Finish,
    Release,
    Renew,
    Sent,
    SentTask,
    Sweep,
    SweptBuffer,
    Trim,
    job_keys,
    run_keys,
)
from sheetsync.dispatch import FlushTask
from sheetsync.errors import ValidationError
from sheetsync.lua.contract import Scripts
from sheetsync.redis_keys import (
    BUFFER_INDEX,
    DUE_INDEX,
    DUE_INDEX_FILLED,
    BufferKey,
    check_id,
    token_buffer,
)
from sheetsync.settings import Settings

log = logging.getLogger(__name__)

#: Ids per RPUSH inside one script call (Lua's unpack() has a stack limit near 8000).
PUSH_CHUNK = 1000
#: Buffers the sweeper hands to one script call.
SWEEP_CHUNK = 200
#: Due buffers one sweeper pass takes at most (the rest wait for the next pass).
SWEEP_PASS_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Lease:
    """A run's hold on its buffer: its token, its claim's epoch, and until when (Redis ms)."""

    token: str
    epoch: str
    until_ms: int
    #: Redis's clock when the lease was granted or renewed.
    granted_ms: int

    @property
    def left_s(self) -> float:
        """Seconds of lease left when it was granted (counted on this host from then)."""
        return (self.until_ms - self.granted_ms) / 1000


@dataclass(frozen=True, slots=True)
class Arrivals:
    """A buffer's length and when its oldest and newest ids arrived, on Redis's clock."""

    length: int
    oldest_age_s: float
    newest_age_s: float
    #: When the newest id arrived (Redis ms; None when no arrival is noted).
    newest_at_ms: int | None

    def arrived_after(self, at_ms: int) -> bool:
        """Whether ids arrived after ``at_ms`` on Redis's clock (the one that noted them)."""
        return self.newest_at_ms is not None and self.newest_at_ms > at_ms


@dataclass(frozen=True, slots=True)
class SheetCache:
    title: str | None
    #: True: row 1 was checked against the link's column map and matches it. None (or
    #: False): the next batch checks row 1 first.
    header_ok: bool | None
    last_row: int | None
    #: The spreadsheet's own time zone, read with the title ("" if it has none).
    time_zone: str | None = None


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


class BufferStore:
    """The Redis side of buffers: push ids, and move one buffer through its states."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.redis = client
        self.settings = settings
        self.scripts = Scripts(client)
        self._delay_ms = int(settings.flush_delay_s * 1000)
        self._lease_ms = int(settings.lease_s * 1000)
        self._grace_ms = int(settings.sweep_grace_s * 1000)
        self._queued_grace_ms = int(settings.sweep_queued_grace_s * 1000)
        self._ttl = settings.sheet_cache_ttl_s

    # -- producers ---------------------------------------------------------------------

    def push(
        self, targets: Iterable[tuple[BufferKey, str]], answer_ids: Sequence[str]
    ) -> list[FlushTask]:
        """Push ids to every (buffer, queue) target in one round trip.

        Returns the tasks to send: one per buffer whose live task must be created or
        promoted. Ids are validated before anything is written.
        """
        ids = [check_id(answer_id, "answer id") for answer_id in answer_ids]
        targets = list(targets)
        if not ids or not targets:
            return []
        to = [EnqueueTarget.of(key, queue) for key, queue in targets]
        calls = [
            self._enqueue(to, ids[at : at + PUSH_CHUNK]) for at in range(0, len(ids), PUSH_CHUNK)
        ]
        if len(calls) == 1:
            return self.scripts.run(calls[0])
        return [task for tasks in self.scripts.run_many(calls) for task in tasks]

    def _enqueue(self, targets: list[EnqueueTarget], ids: Sequence[str]) -> Enqueue:
        return Enqueue(
            buffer_index=BUFFER_INDEX,
            due_index=DUE_INDEX,
            delay_ms=self._delay_ms,
            threshold=self.settings.flush_threshold,
            sheet_ttl_s=self._ttl,
            grace_ms=self._grace_ms,
            targets=targets,
            ids=ids,
        )

    # -- one run ------------------------------------------------------------------------

    def claim(self, key: BufferKey, token: str) -> Lease | None:
        """Take the buffer for the run of ``token``, under a new epoch; None if it is not
        this token's to take (superseded, or another delivery of it still running)."""
        claimed = self.scripts.run(
            Claim(**job_keys(key), token=token, lease_ms=self._lease_ms, base=key.base)
        )
        if claimed is None:
            return None
        return Lease(token, claimed.epoch, claimed.until_ms, claimed.now_ms)

    def renew(self, key: BufferKey, lease: Lease) -> Lease | None:
        """Extend the lease; None when this run no longer holds the buffer."""
        renewed = self.scripts.run(
            Renew(
                **job_keys(key),
                token=lease.token,
                epoch=lease.epoch,
                lease_ms=self._lease_ms,
                base=key.base,
            )
        )
        if renewed is None:
            return None
        return Lease(lease.token, lease.epoch, renewed.until_ms, renewed.now_ms)

    def read_batch(self, key: BufferKey, size: int) -> list[str]:
        return [str(_text(raw)) for raw in self.redis.lrange(key.buf, 0, size - 1)]

    def buffer_length(self, key: BufferKey) -> int:
        return int(self.redis.llen(key.buf))

    def arrivals(self, key: BufferKey) -> Arrivals:
        """The buffer's length and the ages of its oldest and newest ids (one round trip)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.llen(key.buf)
        pipe.lindex(key.times, 0)
        pipe.lindex(key.times, -1)
        pipe.time()
        length, oldest, newest, (seconds, micros) = pipe.execute()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        return Arrivals(
            length=int(length),
            oldest_age_s=_age_s(oldest, now_ms),
            newest_age_s=_age_s(newest, now_ms),
            newest_at_ms=_noted_at_ms(newest),
        )

    def read_all(self, key: BufferKey) -> list[str]:
        return [str(_text(raw)) for raw in self.redis.lrange(key.buf, 0, -1)]

    def attempts(self, key: BufferKey) -> int:
        """Transient failures since the buffer last made progress."""
        return int(self.redis.hget(key.job, "attempts") or 0)

    def trim(
        self, key: BufferKey, lease: Lease, count: int, last_row: int | str | None
    ) -> tuple[int, float]:
        """Drop ``count`` settled ids from the head and remember where the sheet ends (a
        row number, None for unchanged, or :data:`sheetsync.buffers.scripts.FORGET_LAST_ROW`).
        Returns the ids left (-1 when this run no longer holds the buffer) and the oldest
        one's age (s)."""
        trimmed = self.scripts.run(
            Trim(
                **run_keys(key),
                token=lease.token,
                epoch=lease.epoch,
                lease_ms=self._lease_ms,
                count=count,
                last_row=KEEP_LAST_ROW if last_row is None else last_row,
                base=key.base,
                sheet_ttl_s=self._ttl,
            )
        )
        return trimmed.left, trimmed.oldest_age_ms / 1000

    def finish(
        self,
        key: BufferKey,
        lease: Lease,
        *,
        countdown_s: float | None = None,
        hold: bool = False,
    ) -> FlushTask | None:
        """End a run. Returns the next task to send, or None (done, or fenced).

        The next task is due FLUSH_DELAY after the oldest id left arrived, unless
        ``countdown_s`` says otherwise; with ``hold``, reaching the threshold meanwhile
        does not bring it forward (the run waits for a fuller batch on purpose)."""
        return self.scripts.run(
            Finish(
                **run_keys(key),
                token=lease.token,
                epoch=lease.epoch,
                delay_ms=self._delay_ms,
                threshold=self.settings.flush_threshold,
                base=key.base,
                sheet_ttl_s=self._ttl,
                forced_ms=-1 if countdown_s is None else max(0, int(countdown_s * 1000)),
                grace_ms=self._grace_ms,
                hold=hold,
            )
        )

    def release(self, key: BufferKey, lease: Lease, countdown_s: float) -> int:
        """Hand the buffer back for a retry of the same task. Returns attempts, -1 fenced."""
        return self.scripts.run(
            Release(
                **job_keys(key),
                token=lease.token,
                epoch=lease.epoch,
                delay_ms=int(countdown_s * 1000),
                base=key.base,
                grace_ms=self._grace_ms,
            )
        )

    def adopt(
        self, key: BufferKey, default_queue: str, *, even_empty: bool = False
    ) -> FlushTask | None:
        """A new token for flushing the buffer now, or None (a run holds it, or the list
        is empty and ``even_empty`` is not set)."""
        return self.scripts.run(
            Adopt(
                **run_keys(key),
                base=key.base,
                default_queue=default_queue,
                sheet_ttl_s=self._ttl,
                even_empty=even_empty,
                grace_ms=self._grace_ms,
            )
        )

    def redis_now_ms(self) -> int:
        """The Redis server's clock, the one every lease and due time uses."""
        seconds, micros = self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # -- repair -------------------------------------------------------------------------

    def due_buffers(self, limit: int = SWEEP_PASS_MAX) -> list[BufferKey]:
        """The buffers whose job the sweeper must look at now (the due index), after
        filling that index once from the buffer index if it never was (an upgrade)."""
        if not self.redis.exists(DUE_INDEX_FILLED):
            self._fill_due_index()
        now_ms = self.redis_now_ms()
        members = self.redis.zrangebyscore(DUE_INDEX, "-inf", now_ms, start=0, num=limit)
        return _parse_bases(cast("list[bytes]", members))

    def _fill_due_index(self) -> None:
        # Every indexed buffer is due at once: each sweep.lua call scores it properly.
        pipe = self.redis.pipeline(transaction=False)
        for key, _ in self.indexed_buffers():
            pipe.zadd(DUE_INDEX, {key.base: 0}, nx=True)
        pipe.set(DUE_INDEX_FILLED, "1")
        pipe.execute()

    def sweep(
        self,
        keys: Sequence[BufferKey],
        default_queue: str,
        busy_queues: Iterable[str] = (),
    ) -> list[FlushTask]:
        """Apply the sweeper's repair (sweep.lua) to these buffers; the tasks to send.
        ``busy_queues`` have messages waiting for a worker (their sent tasks are late
        because workers are busy, not lost)."""
        busy = ",".join(sorted(busy_queues))
        tasks: list[FlushTask] = []
        for start in range(0, len(keys), SWEEP_CHUNK):
            sweep = Sweep(
                buffer_index=BUFFER_INDEX,
                due_index=DUE_INDEX,
                grace_ms=self._grace_ms,
                queued_grace_ms=self._queued_grace_ms,
                default_queue=default_queue,
                sheet_ttl_s=self._ttl,
                busy_queues=busy,
                buffers=[SweptBuffer.of(key) for key in keys[start : start + SWEEP_CHUNK]],
            )
            tasks += self.scripts.run(sweep)
        return tasks

    def mark_sent(self, tasks: Sequence[FlushTask]) -> None:
        """These tasks reached the broker (see sent.lua)."""
        if tasks:
            sent = [SentTask(job=token_buffer(task.token).job, token=task.token) for task in tasks]
            self.scripts.run(Sent(tasks=sent))

    # -- sheet cache --------------------------------------------------------------------

    def sheet_cache(self, key: BufferKey) -> SheetCache:
        title, header_ok, last_row, time_zone = self.redis.hmget(
            key.sheet, "title", "header_ok", "last_row", "time_zone"
        )
        last = _text(last_row)
        return SheetCache(
            title=_text(title),
            header_ok=None if header_ok is None else _text(header_ok) == "1",
            last_row=int(last) if last else None,
            time_zone=_text(time_zone),
        )

    def remember_sheet(self, key: BufferKey, **fields: str | int) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(key.sheet, mapping={name: str(value) for name, value in fields.items()})
        pipe.expire(key.sheet, self._ttl)
        pipe.execute()

    def forget_sheet(self, key: BufferKey, *fields: str) -> None:
        self.redis.hdel(key.sheet, *fields)

    def note_unchecked(self, key: BufferKey, digests: bytes) -> None:
        """The digests of the ids in the sheet's column A before a run's changes were sent,
        kept until the read that checks them (digests: a person's text in column A never
        reaches Redis)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(key.sheet, "unchecked", digests)
        pipe.expire(key.sheet, self._ttl)
        pipe.execute()

    def unchecked(self, key: BufferKey) -> bytes | None:
        """What :meth:`note_unchecked` kept, if a run's changes went unchecked."""
        digests = self.redis.hget(key.sheet, "unchecked")
        return digests.encode("latin-1") if isinstance(digests, str) else digests

    def remember_first_row(self, key: BufferKey, cells: Sequence[str], column_count: int) -> None:
        """Keep row 1 as a header check read it (titles, never answers) and the tab's
        width, so a check cut short by the rate limit goes on without reading them again."""
        self.remember_sheet(
            key,
            row1=json.dumps(list(cells)),
            row1_columns=column_count,
            row1_ms=self.redis_now_ms(),
        )

    def first_row(self, key: BufferKey, max_age_ms: int) -> tuple[list[str], int] | None:
        """Row 1 and the tab's width as remembered, if read less than ``max_age_ms`` ago."""
        cells, columns, read_ms = self.redis.hmget(key.sheet, "row1", "row1_columns", "row1_ms")
        if cells is None or columns is None or read_ms is None:
            return None
        if self.redis_now_ms() - int(read_ms) > max_age_ms:
            return None
        return [str(cell) for cell in json.loads(cells)], int(columns)

    def job_state(self, key: BufferKey) -> dict[str, str]:
        return {str(_text(k)): str(_text(v)) for k, v in self.redis.hgetall(key.job).items()}

    def indexed_buffers(self, chunk: int = 1000) -> Iterator[tuple[BufferKey, float]]:
        """Every buffer in the index with its oldest-buffered time (ms), read in chunks.

        A member that is not a buffer key (written by hand, say) is logged and skipped.
        """
        cursor = 0
        while True:
            cursor, entries = self.redis.zscan(BUFFER_INDEX, cursor, count=chunk)
            for base, score in entries:
                try:
                    member = base.decode() if isinstance(base, bytes) else str(base)
                    yield BufferKey.parse(member), float(score)
                except ValidationError:
                    log.error("skipping a malformed member of %s", BUFFER_INDEX)
            if cursor == 0:
                return


def _age_s(run: bytes | str | None, now_ms: int) -> float:
    """Seconds since an arrival run (``<ms>:<count>``) was noted; 0 when there is none."""
    at_ms = _noted_at_ms(run)
    return 0.0 if at_ms is None else max(0, now_ms - at_ms) / 1000


def _noted_at_ms(run: bytes | str | None) -> int | None:
    """When an arrival run (``<ms>:<count>``) was noted (Redis ms); None when there is none."""
    text = _text(run)
    return int(text.partition(":")[0]) if text else None


def _parse_bases(members: Iterable[bytes | str]) -> list[BufferKey]:
    keys = []
    for member in members:
        try:
            keys.append(BufferKey.parse(str(_text(member))))
        except ValidationError:
            log.error("skipping a malformed member of %s", DUE_INDEX)
    return keys

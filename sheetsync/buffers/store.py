"""The Redis side of buffers: push ids, and move one buffer through its states.

Python here only passes keys and arguments: every decision about tokens, leases and
scheduling is made inside a script (:mod:`sheetsync.buffers.scripts`), atomically. See
docs/ARCHITECTURE.md for the job state machine and the invariants the scripts keep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from sheetsync.buffers.scripts import Scripts, decode_tasks, script_source
from sheetsync.dispatch import FlushTask
from sheetsync.errors import ValidationError
from sheetsync.keys import BUFFER_INDEX, BufferKey, check_id
from sheetsync.settings import Settings

log = logging.getLogger(__name__)

#: Ids per RPUSH inside one script call (Lua's unpack() has a stack limit near 8000).
PUSH_CHUNK = 1000
#: Buffers the sweeper hands to one script call.
SWEEP_CHUNK = 200


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class Intent:
    token: str
    count: int
    first: str
    last: str
    after_row: int | None


@dataclass(frozen=True, slots=True)
class SheetCache:
    title: str | None
    #: True: row 1 holds a header. False: row 1 was read empty, so our next append
    #: brings the header. None: not read yet.
    header_ok: bool | None
    last_row: int | None


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
        now = now_ms()
        if len(ids) <= PUSH_CHUNK:
            replies = [self._call_enqueue(targets, ids, now, client=self.redis)]
        else:
            pipe = self.redis.pipeline(transaction=False)
            for start in range(0, len(ids), PUSH_CHUNK):
                self._call_enqueue(targets, ids[start : start + PUSH_CHUNK], now, client=pipe)
            replies = self._execute_loading_scripts(pipe)
        return [task for reply in replies for task in decode_tasks(reply)]

    def _call_enqueue(
        self, targets: list[tuple[BufferKey, str]], ids: Sequence[str], now: int, client: Any
    ) -> Any:
        keys: list[str] = [BUFFER_INDEX]
        args: list[Any] = [now, self._delay_ms, self.settings.flush_threshold, self._ttl]
        args.append(len(targets))
        for key, queue in targets:
            keys += (key.buf, key.job, key.sheet)
            args += (key.base, queue)
        args += ids
        # EVALSHA directly: redis-py's Script objects add a SCRIPT EXISTS round trip
        # inside pipelines, and Python overhead on the emit path.
        try:
            return client.evalsha(self.scripts.enqueue.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self.redis.script_load(script_source("enqueue"))
            return client.evalsha(self.scripts.enqueue.sha, len(keys), *keys, *args)

    def _execute_loading_scripts(self, pipe: Any) -> list[Any]:
        try:
            return list(pipe.execute())
        except redis.exceptions.NoScriptError:
            # Redis restarted or flushed its scripts. Nothing ran: NOSCRIPT comes back
            # for every call of the pipeline before any of them executes.
            self.redis.script_load(script_source("enqueue"))
            return list(pipe.execute())

    # -- one run ------------------------------------------------------------------------

    def claim(self, key: BufferKey, token: str) -> bool:
        return bool(self.scripts.claim(keys=[key.job], args=[token, now_ms(), self._lease_ms]))

    def renew(self, key: BufferKey, token: str) -> bool:
        return bool(self.scripts.renew(keys=[key.job], args=[token, now_ms(), self._lease_ms]))

    def read_batch(self, key: BufferKey, size: int) -> list[str]:
        return [str(_text(raw)) for raw in self.redis.lrange(key.buf, 0, size - 1)]

    def buffer_length(self, key: BufferKey) -> int:
        return int(self.redis.llen(key.buf))

    def read_all(self, key: BufferKey) -> list[str]:
        return [str(_text(raw)) for raw in self.redis.lrange(key.buf, 0, -1)]

    def attempts(self, key: BufferKey) -> int:
        """Transient failures since the buffer last made progress."""
        return int(self.redis.hget(key.job, "attempts") or 0)

    def write_intent(
        self, key: BufferKey, token: str, ids: Sequence[str], after_row: int | None
    ) -> bool:
        args: list[Any] = [token, now_ms(), self._lease_ms, len(ids), ids[0], ids[-1]]
        args.append(after_row or "")
        return bool(self.scripts.intent(keys=[key.job, key.inflight], args=args))

    def read_intent(self, key: BufferKey) -> Intent | None:
        raw = {_text(k): _text(v) for k, v in self.redis.hgetall(key.inflight).items()}
        if not raw.get("token"):
            return None
        after = raw.get("after_row") or ""
        return Intent(
            token=str(raw["token"]),
            count=int(raw.get("count") or 0),
            first=str(raw.get("first") or ""),
            last=str(raw.get("last") or ""),
            after_row=int(after) if after else None,
        )

    def trim(self, key: BufferKey, token: str, count: int, last_row: int | None) -> int:
        """Drop ``count`` settled ids from the head. Returns ids left, -1 when fenced."""
        args: list[Any] = [token, now_ms(), self._lease_ms, count, last_row or "", key.base]
        args.append(self._ttl)
        keys = [key.buf, key.job, key.inflight, key.sheet, BUFFER_INDEX]
        return int(self.scripts.trim(keys=keys, args=args))

    def finish(
        self, key: BufferKey, token: str, *, countdown_s: float | None = None
    ) -> FlushTask | None:
        """End a run. Returns the next task to send, or None (done, or fenced)."""
        forced_ms = -1 if countdown_s is None else max(0, int(countdown_s * 1000))
        reply = self.scripts.finish(
            keys=[key.buf, key.job, key.sheet, BUFFER_INDEX],
            args=[
                token,
                now_ms(),
                self._delay_ms,
                self.settings.flush_threshold,
                key.base,
                self._ttl,
                forced_ms,
            ],
        )
        tasks = decode_tasks(reply)
        return tasks[0] if tasks else None

    def release(self, key: BufferKey, token: str, countdown_s: float) -> int:
        """Hand the buffer back for a retry of the same task. Returns attempts, -1 fenced."""
        due = now_ms() + int(countdown_s * 1000)
        return int(self.scripts.release(keys=[key.job], args=[token, due]))

    # -- repair -------------------------------------------------------------------------

    def sweep(self, keys: Sequence[BufferKey], default_queue: str) -> list[FlushTask]:
        """Apply the sweeper's repair (sweep.lua) to these buffers; the tasks to send."""
        tasks: list[FlushTask] = []
        grace_ms = int(self.settings.sweep_grace_s * 1000)
        for start in range(0, len(keys), SWEEP_CHUNK):
            chunk = keys[start : start + SWEEP_CHUNK]
            script_keys = [BUFFER_INDEX]
            for key in chunk:
                script_keys += (key.buf, key.job, key.sheet)
            args: list[Any] = [now_ms(), grace_ms, default_queue, self._ttl]
            args += [key.base for key in chunk]
            tasks += decode_tasks(self.scripts.sweep(keys=script_keys, args=args))
        return tasks

    # -- sheet cache --------------------------------------------------------------------

    def sheet_cache(self, key: BufferKey) -> SheetCache:
        title, header_ok, last_row = self.redis.hmget(key.sheet, "title", "header_ok", "last_row")
        last = _text(last_row)
        return SheetCache(
            title=_text(title),
            header_ok=None if header_ok is None else _text(header_ok) == "1",
            last_row=int(last) if last else None,
        )

    def remember_sheet(self, key: BufferKey, **fields: str | int) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(key.sheet, mapping={name: str(value) for name, value in fields.items()})
        pipe.expire(key.sheet, self._ttl)
        pipe.execute()

    def forget_sheet(self, key: BufferKey, *fields: str) -> None:
        self.redis.hdel(key.sheet, *fields)

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

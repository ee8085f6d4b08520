"""The web app's pushes after commit, sent from a thread of its process.

An emit inside the app's transaction writes the outbox row (the ledger's ENQUEUED) in
that transaction; the push to Redis must wait for the commit. Sent from the request, it
was a round trip on every request's path (about a third of what the emit added to a
PostgreSQL transaction in ``bench_emit``). Here the commit hands the push to one daemon
thread per process, which sends whatever has queued up meanwhile in one push per set of
buffers (a busy process sends fewer, larger pushes), in commit order.

Nothing is lost where the thread does not get to it: the rows are committed ENQUEUED,
and beat's reconciler pushes what Redis does not hold (as when Redis is down). So a full
queue (the thread hung, or Redis slower than the app for long) never makes the request
wait: its push is dropped, counted (:attr:`PushThread.dropped`) and logged without an
id, and left to the reconciler. A forked child starts its own thread and leaves the
parent's queue to the parent; at exit the queue is drained for up to
:data:`EXIT_DRAIN_S`.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import TypeAlias

from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services
from sheetsync.text import duration

log = logging.getLogger(__name__)

#: (buffer, queue) -> the ids to push there.
Pushes: TypeAlias = dict[tuple[BufferKey, str], list[str]]
#: Sends pushes now; True when every one reached Redis (``answers.push_now``).
Send: TypeAlias = Callable[[Services, Pushes], bool]

#: Commits waiting for the thread; past this, a commit's push is dropped.
MAX_WAITING = 10_000
#: Dropped pushes are logged at most once per this many seconds (with the count since).
DROP_LOG_EVERY_S = 10.0
#: How long the interpreter's exit waits for the pushes still queued.
EXIT_DRAIN_S = 5.0


#: A queued commit's pushes, or a waiter's mark (set once everything before it is sent).
Item: TypeAlias = tuple[Services, Pushes] | threading.Event


class PushThread:
    """One process's thread of after-commit pushes."""

    def __init__(self, send: Send, *, max_waiting: int = MAX_WAITING) -> None:
        self._send = send
        self._max_waiting = max_waiting
        self._lock = threading.Lock()
        self._pid = -1
        self._queue: queue.Queue[Item] = queue.Queue(max_waiting)
        #: Ids whose push was dropped (a full queue) in this process, and since the last
        #: log line.
        self.dropped = 0
        self._dropped_unlogged = 0
        self._logged_at = -DROP_LOG_EVERY_S
        self._drops_lock = threading.Lock()
        _instances.add(self)

    def _forget_the_parents_lock(self) -> None:
        self._lock = threading.Lock()
        self._drops_lock = threading.Lock()

    def submit(self, services: Services, pushes: Pushes) -> None:
        """Push ``pushes`` soon, from the thread; if it is that far behind, drop them
        (the reconciler pushes them) and return at once."""
        try:
            self._running().put_nowait((services, pushes))
        except queue.Full:
            self._drop(services, pushes)

    def _drop(self, services: Services, pushes: Pushes) -> None:
        ids = len({answer_id for answer_ids in pushes.values() for answer_id in answer_ids})
        now = time.monotonic()
        with self._drops_lock:
            self.dropped += ids
            self._dropped_unlogged += ids
            if now - self._logged_at < DROP_LOG_EVERY_S:
                return
            count, self._dropped_unlogged, self._logged_at = self._dropped_unlogged, 0, now
        settings = services.settings
        log.warning(
            "push of %d ids dropped: %d commits already wait for the push thread; they stay "
            "ENQUEUED in the database, and beat's reconciler pushes them within about %s "
            "(SHEETSYNC_RECONCILE_AFTER_S + SHEETSYNC_RECONCILE_INTERVAL_S)",
            count,
            self._max_waiting,
            duration(settings.reconcile_after_s + settings.reconcile_interval_s),
        )

    def wait(self, timeout_s: float) -> bool:
        """Wait until every push submitted so far was sent; False on timeout."""
        sent = threading.Event()
        try:
            self._running().put(sent, timeout=timeout_s)
        except queue.Full:
            return False
        return sent.wait(timeout_s)

    def _running(self) -> queue.Queue[Item]:
        pid = os.getpid()
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:  # a new process (or a fork): a queue and thread of its own
                    self._queue = queue.Queue(self._max_waiting)
                    threading.Thread(
                        target=self._loop, args=(self._queue,), name="sheetsync-push", daemon=True
                    ).start()
                    self._pid = pid
        return self._queue

    def _loop(self, waiting: queue.Queue[Item]) -> None:
        while True:
            batch = [waiting.get()]
            while len(batch) < self._max_waiting:
                try:
                    batch.append(waiting.get_nowait())
                except queue.Empty:
                    break
            try:
                self._send_batch([item for item in batch if isinstance(item, tuple)])
            except Exception:  # the thread must outlive any one push; the reconciler mends
                log.exception("after-commit push failed; the reconciler pushes these ids later")
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()

    def _send_batch(self, batch: list[tuple[Services, Pushes]]) -> None:
        """The batch's pushes, merged per buffer in commit order, per set of services."""
        merged: dict[int, tuple[Services, defaultdict[tuple[BufferKey, str], list[str]]]] = {}
        for services, pushes in batch:
            _, into = merged.setdefault(id(services), (services, defaultdict(list)))
            for target, ids in pushes.items():
                into[target].extend(ids)
        for services, pushes in merged.values():
            self._send(services, dict(pushes))


_thread: PushThread | None = None
_thread_lock = threading.Lock()
_instances: weakref.WeakSet[PushThread] = weakref.WeakSet()


def _renew_locks_in_child() -> None:
    """A fork while another thread holds one of these locks (making the process's thread,
    starting it, counting a drop) copies it held: the child gets new ones."""
    global _thread_lock  # noqa: PLW0603 (the module's own lock, renewed once per fork)
    _thread_lock = threading.Lock()
    for thread in list(_instances):
        thread._forget_the_parents_lock()


os.register_at_fork(after_in_child=_renew_locks_in_child)


def push_thread(send: Send) -> PushThread:
    """The process's push thread (made on first use, drained at exit)."""
    global _thread  # noqa: PLW0603 (one per process, like the services)
    if _thread is None:
        with _thread_lock:
            if _thread is None:
                _thread = PushThread(send)
                atexit.register(_thread.wait, EXIT_DRAIN_S)
    return _thread


def wait_for_pushes(timeout_s: float = EXIT_DRAIN_S) -> bool:
    """Wait until every emit committed so far in this process has been pushed to Redis
    (a script that exits, a test); False if that took longer than ``timeout_s``."""
    return _thread.wait(timeout_s) if _thread is not None else True

"""The prefork pool, with one fix: a worker survives its broker reconnecting after a
pool process died.

Seen with celery 5.7.0 and kombu 5.7.0 in the chaos run (a pool process SIGKILLed, then
Redis restarted): on reconnect the consumer registers the pool with the event loop
again, ``AsynPool._track_child_process`` meets a process it already untracked
(``_sentinel_poll`` is None), and kombu's ``fileno(None)`` raises
``ValueError('file descriptor is None')``. kombu made it a ValueError because Celery's
``iterate_file_descriptors_safely`` was to catch ValueError (kombu pull request #2623);
Celery instead added AttributeError to what it catches (celery pull request #10318), so
with this pair nothing catches it and the worker exits with "Unrecoverable error".

Here an untracked process is skipped, which is what both projects meant: it has exited,
and the pool's maintenance replaces it.
"""

from __future__ import annotations

from typing import Any

from celery.concurrency import asynpool, prefork


class AsynPool(asynpool.AsynPool):  # type: ignore[misc]
    def _track_child_process(self, proc: Any, hub: Any) -> None:
        if getattr(proc, "_sentinel_poll", 0) is None:
            return  # untracked when it exited; maintain_pool replaces it
        super()._track_child_process(proc, hub)


class TaskPool(prefork.TaskPool):  # type: ignore[misc]
    Pool = AsynPool

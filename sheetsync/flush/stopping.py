"""A worker told to stop (SIGTERM: Celery's warm shutdown) starts no new batch: each of
its runs ends after the batch it is writing and hands the rest of its buffer to a new
task, at once (:meth:`sheetsync.flush.run.FlushRun.drain`), and a run waiting for a
fuller batch stops waiting (:func:`sheetsync.flush.debounce.linger`).

Celery tells the worker's main process alone (``worker_shutting_down``, sent from its
signal handler; :mod:`sheetsync.celery.shutdown` calls :func:`request`), while the
prefork pool's processes run the tasks and hear nothing until the task ends. The flag is
one byte of anonymous shared memory, mapped when this module is imported: the main
process imports it (with the task module) before its pool forks, so every pool process
reads the byte the main process writes. The solo and threads pools run their tasks in
the main process itself.
"""

from __future__ import annotations

import logging
import mmap

log = logging.getLogger(__name__)

_flag = mmap.mmap(-1, 1)  # MAP_SHARED: forked processes share the page, not a copy


def request() -> None:
    """This worker is stopping: its runs end after their current batch."""
    _flag[0] = 1


def requested() -> bool:
    """Whether this worker (the process that ran :func:`request`, or its pool's
    parent) was told to stop."""
    return _flag[0] == 1


def clear() -> None:
    """A worker starting in this process is not stopping (one process may run several
    workers one after another: ``app.worker_main``, tests)."""
    _flag[0] = 0


def ends_run(token: str, batches: int) -> bool:
    """Whether the run ``token``, having written ``batches`` batches, must end now (its
    worker is stopping); said once in the log when it must."""
    if not requested():
        return False
    log.info(
        "flush %s: the worker is stopping; handing the buffer on after %d batches", token, batches
    )
    return True

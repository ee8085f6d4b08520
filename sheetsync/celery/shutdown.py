"""A worker told to stop (SIGTERM, SIGINT, SIGQUIT) hands its buffers on at once.

Celery's warm shutdown stops consuming, lets the pool finish the tasks it runs, and sends
``worker_shutting_down`` from the main process's signal handler. The prefork pool's
processes are not told (celery 5.7: they run on until their task ends; SIGTERM reaches
the main process alone, as Kubernetes sends it), so a flush run would drain up to
``DEFAULT_BATCHES_PER_RUN`` batches first. Here the signal sets the flag of
:mod:`sheetsync.flush.stopping`, which the pool processes share: each run ends after its
current batch, and its buffer's next task goes to the broker for another worker.

Messages the worker reserved but did not start (prefetched, or held for their countdown)
are not acknowledged (``task_acks_late``): the broker's transport restores them when the
worker's channel closes on its way out.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_init, worker_shutting_down

from sheetsync.flush import stopping
from sheetsync.flush.run import DEFAULT_SLOT_LEAD_S, DEFAULT_SLOT_SLIP_S
from sheetsync.settings import Settings

#: The Sheets requests one batch sends at most in the usual course: row 1 read and the
#: header written (a run's first batch), its edits read and written, the append.
REQUESTS_PER_BATCH = 5
#: What the worker's main process takes beyond its runs' last batch: the pool joined, the
#: next tasks sent, unacknowledged messages restored, connections closed.
EXIT_MARGIN_S = 10.0


def grace_period_s(settings: Settings) -> float:
    """How long a stopping worker may take to exit: a batch's requests, each at most
    GOOGLE_TIMEOUT_S, after the in-process wait for its rate-limit turn, then the
    worker's own exit. A worker killed sooner loses nothing either: its buffers wait for
    their leases (LEASE_S) to expire before the sweeper hands them on."""
    turn_s = DEFAULT_SLOT_LEAD_S + DEFAULT_SLOT_SLIP_S
    return turn_s + REQUESTS_PER_BATCH * settings.google_timeout_s + EXIT_MARGIN_S


@worker_init.connect
def _not_stopping(**_: Any) -> None:
    stopping.clear()


@worker_shutting_down.connect
def _stopping(**_: Any) -> None:
    # In the main process's signal handler: one byte written, nothing that may block.
    stopping.request()

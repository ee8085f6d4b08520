"""The tasks: thin wrappers that call the library."""

from __future__ import annotations

from celery import Task

from sheetsync.buffers.push import send_tasks
from sheetsync.celery.application import app
from sheetsync.celery.dispatcher import checked_countdown
from sheetsync.flush.run import flush
from sheetsync.pipeline import get_pipeline
from sheetsync.recovery import repair


@app.task(bind=True, name="sheetsync.flush.run", max_retries=None)
def flush_buffer(self: Task, token: str) -> str:
    """Flush one buffer. The task id is the token (never reused)."""
    pipeline = get_pipeline()
    outcome = flush(pipeline, token)
    if outcome.next is not None:
        send_tasks(pipeline.store, [outcome.next])
    if outcome.status == "retry":
        assert outcome.retry_in_s is not None
        raise self.retry(
            countdown=checked_countdown(outcome.retry_in_s), exc=outcome.error, max_retries=None
        )
    return outcome.summary


@app.task(name="sheetsync.sweep")
def sweep() -> int:
    return len(repair.sweep(get_pipeline()))


@app.task(name="sheetsync.reconcile")
def reconcile() -> int:
    return repair.reconcile(get_pipeline()).answers


@app.task(name="sheetsync.dispatch_dead_letters")
def dispatch_dead_letters() -> int:
    from sheetsync.recovery import replay

    return replay.dispatch_due(get_pipeline())


@app.task(name="sheetsync.replay_dead_letter")
def replay_dead_letter(dead_letter_id: int) -> str:
    from sheetsync.recovery import replay

    return replay.replay(get_pipeline(), dead_letter_id).summary

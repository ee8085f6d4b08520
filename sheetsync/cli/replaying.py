"""How ``dlq replay`` replays: hand entries to the workers, or run them here (``--now``).

Both ways first make the chosen entries due (``make_due``) and then claim them
(``claim_due``, which marks them REPLAYING), so the beat dispatcher and a second
operator never replay the same entry at the same time. Whatever was claimed but never
started (the broker was down, Ctrl-C) goes back to PENDING and due now.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from sqlalchemy import select, update

from sheetsync import ledger
from sheetsync.cli.output import err, hint, out, table
from sheetsync.models import DeadLetter, DeadLetterStatus, TransactionType, utcnow
from sheetsync.pipeline import Pipeline
from sheetsync.replay import ReplayResult, claim_due, make_due
from sheetsync.replay import replay as replay_entry

#: Ids per claim (keeps the IN list well under every database's parameter limit).
CLAIM_CHUNK = 500


def send_to_workers(
    pipeline: Pipeline, *, ids: Sequence[int] | None, user_id: str | None
) -> list[int]:
    """Claim the chosen entries and send one replay task each. Returns the ids sent."""
    from sheetsync.dispatch import get_dispatcher

    # Before anything changes: without a Celery app there is nobody to send to.
    dispatcher = get_dispatcher()
    claimed = _claim(pipeline, ids=ids, user_id=user_id)
    if not claimed:
        return []
    sent: list[int] = []
    try:
        for entry_id in claimed:
            dispatcher.send_replay(entry_id)
            sent.append(entry_id)
    finally:
        done = set(sent)
        release(pipeline, [entry_id for entry_id in claimed if entry_id not in done])
    noun = "task" if len(sent) == 1 else "tasks"
    out.print(f"sent {len(sent)} replay {noun} to the workers: {_id_list(sent)}")
    return sent


def replay_here(
    pipeline: Pipeline, *, ids: Sequence[int] | None, user_id: str | None
) -> tuple[int, int]:
    """Claim the chosen entries and replay them in this process, with a progress bar.

    Returns (entries that did not end DONE, entries replayed).
    """
    claimed = _claim(pipeline, ids=ids, user_id=user_id)
    if not claimed:
        return 0, 0
    outcomes: list[Outcome] = []
    remaining = list(claimed)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err) as progress:
        try:
            while remaining:
                outcomes.append(_replay_one(pipeline, progress, remaining[0]))
                remaining.pop(0)
        finally:
            release(pipeline, remaining)
    grid = table("id", "status", "answers in the sheet", "summary", right=("id",))
    for outcome in outcomes:
        grid.add_row(
            str(outcome.entry_id),
            outcome.status,
            f"{outcome.completed}/{outcome.total}",
            outcome.result.summary,
        )
    out.print(grid)
    unfinished = sum(outcome.status != DeadLetterStatus.DONE.value for outcome in outcomes)
    return unfinished, len(outcomes)


@dataclass(frozen=True)
class Outcome:
    entry_id: int
    status: str
    #: The entry's answers now COMPLETED for its sheet, of all its answers.
    completed: int
    total: int
    result: ReplayResult


def _replay_one(pipeline: Pipeline, progress: Progress, entry_id: int) -> Outcome:
    label = f"entry {entry_id}"
    task = progress.add_task(label, total=None)
    report = _reporter(progress, task)
    while True:
        result = replay_entry(pipeline, entry_id, progress=report)
        if result.retry_in_s is None:
            break
        # Rate limited: the entry stays ours (REPLAYING); wait for the slot and go on.
        # The next attempt skips what already reached the sheet.
        wait_s = max(result.retry_in_s, 0.05)
        progress.update(task, description=f"{label} (rate limited, waiting {wait_s:.1f}s)")
        time.sleep(wait_s)
        progress.update(task, description=label)
    status, completed, total = _settled(pipeline, entry_id)
    progress.update(
        task,
        description=f"{label}: {status}",
        total=max(total, 1),
        completed=max(total, 1) if status == "DONE" else completed,
    )
    return Outcome(entry_id, status, completed, total, result)


def _settled(pipeline: Pipeline, entry_id: int) -> tuple[str, int, int]:
    """An entry's status, and how many of its answers are COMPLETED for its sheet."""
    with pipeline.sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return "gone", 0, 0
        states = ledger.states(session, entry.answer_ids, entry.spread_sheet_id, entry.sheet_id)
        ids = set(entry.answer_ids)
        completed = sum(states.get(i) is TransactionType.COMPLETED for i in ids)
        return entry.status.value, completed, len(ids)


def _reporter(progress: Progress, task: TaskID) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        progress.update(task, completed=done, total=max(total, 1))

    return report


def _claim(pipeline: Pipeline, *, ids: Sequence[int] | None, user_id: str | None) -> list[int]:
    """Make the chosen entries due, claim them, and say what was left out and why."""
    if ids is None:
        candidates = make_due(pipeline, user_id=user_id)
        if not candidates:
            whose = f" of user {user_id}" if user_id is not None else ""
            out.print(f"no PENDING dead letters{whose}: nothing to replay")
            return []
        busy: set[int] = set()
    else:
        due = set(make_due(pipeline, ids=ids, include_failed=True))
        statuses = _statuses(pipeline, ids)
        # A REPLAYING entry may be stale (its worker died); claim_due takes only those.
        busy = {i for i in ids if i not in due and statuses.get(i) == "REPLAYING"}
        for entry_id in ids:
            if entry_id not in due and entry_id not in busy:
                hint(f"dead letter {entry_id} is {statuses.get(entry_id, 'gone')}: skipped")
        candidates = [i for i in ids if i in due or i in busy]
    claimed: list[int] = []
    for start in range(0, len(candidates), CLAIM_CHUNK):
        chunk = candidates[start : start + CLAIM_CHUNK]
        claimed.extend(claim_due(pipeline, ids=chunk, limit=len(chunk)))
    claimed_set = set(claimed)
    taken = [i for i in candidates if i not in claimed_set]
    for entry_id in (i for i in taken if i in busy):
        hint(f"dead letter {entry_id} is being replayed already: skipped")
    others = [i for i in taken if i not in busy]
    if others:
        hint(f"{len(others)} entries were claimed by the dispatcher meanwhile: {_id_list(others)}")
    return claimed


def release(pipeline: Pipeline, ids: Sequence[int]) -> None:
    """Give claimed entries that were never replayed back: PENDING, due now."""
    if not ids:
        return
    with pipeline.sessions.begin() as session:
        session.execute(
            update(DeadLetter)
            .where(DeadLetter.id.in_(list(ids)), DeadLetter.status == DeadLetterStatus.REPLAYING)
            .values(status=DeadLetterStatus.PENDING, next_attempt_at=utcnow(), updated_at=utcnow())
        )


def _statuses(pipeline: Pipeline, ids: Sequence[int]) -> dict[int, str]:
    with pipeline.sessions() as session:
        rows = session.execute(
            select(DeadLetter.id, DeadLetter.status).where(DeadLetter.id.in_(list(ids)))
        ).all()
    return {entry_id: DeadLetterStatus(status).value for entry_id, status in rows}


def _id_list(ids: Sequence[int], shown: int = 20) -> str:
    text = ", ".join(map(str, ids[:shown]))
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")

"""How ``dlq replay`` replays: hand entries to the workers, or run them here (``--now``).

An entry is replayed only by whoever claims it (``deadletters.claim_due`` marks it REPLAYING), so
the beat dispatcher, the workers and a second operator never replay one entry at once.
Sending to the workers claims every chosen entry and sends at once. Replaying here
claims one entry at a time, right before replaying it: an entry claimed early would
look stale to the dispatcher after ``deadletters.DEFAULT_REPLAY_STALE_S`` and be claimed a second
time. Whatever was claimed but not replayed (the broker was down, Ctrl-C) goes back to
PENDING, due now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.progress import (
    Progress,
)

from sheetsync import deadletters, ledger
from sheetsync.cli.output import counted, hint, id_note, out, progress_bar, table, with_ids
from sheetsync.flush.outcomes import Tally
from sheetsync.models import DeadLetter, DeadLetterStatus, TransactionType
from sheetsync.ops import replays
from sheetsync.recovery.replay import flush_here
from sheetsync.recovery.replay import replay as replay_entry
from sheetsync.services import Services


def send_to_workers(
    services: Services, *, ids: Sequence[int] | None, user_id: str | None
) -> list[int]:
    """Claim the chosen entries and send one replay task each. Returns the ids sent."""
    from sheetsync.dispatch import get_dispatcher

    get_dispatcher()  # before anything is said: without a Celery app nobody can send
    chosen = _candidates(services, ids=ids, user_id=user_id)
    result = replays.send_to_workers(services, chosen)
    _report_taken(result.taken)
    if not result.sent:
        return []
    out.print(
        f"sent {counted(len(result.sent), 'dead letter')} to the workers {id_note(result.sent)}",
        markup=False,
    )
    return result.sent


def replay_here(
    services: Services, *, ids: Sequence[int] | None, user_id: str | None
) -> tuple[list[int], int]:
    """Replay the chosen entries in this process, one by one, with a progress bar.

    Returns (the ids of entries that did not end DONE, how many entries were replayed).
    """
    candidates = _candidates(services, ids=ids, user_id=user_id).ids
    if not candidates:
        return [], 0
    outcomes: list[Outcome] = []
    taken: list[int] = []
    with progress_bar() as progress:
        for entry_id in candidates:
            if not _claim(services, [entry_id], include_failed=ids is not None):
                taken.append(entry_id)
                continue
            try:
                outcomes.append(_replay_one(services, progress, entry_id))
            except BaseException:
                release(services, [entry_id])
                raise
    _report_taken(taken)
    if not outcomes:
        return [], 0
    grid = table("id", "status", "answers in the sheet", "summary", right=("id",))
    for outcome in outcomes:
        grid.add_row(
            str(outcome.entry_id),
            outcome.status,
            f"{outcome.completed}/{outcome.total}",
            outcome.summary,
        )
    out.print(grid)
    done = DeadLetterStatus.DONE.value
    unfinished = [outcome.entry_id for outcome in outcomes if outcome.status != done]
    return unfinished, len(outcomes)


@dataclass(frozen=True)
class Outcome:
    entry_id: int
    status: str
    #: The entry's answers now COMPLETED for its sheet, of all its answers.
    completed: int
    total: int
    summary: str


def _replay_one(services: Services, progress: Progress, entry_id: int) -> Outcome:
    """Hand the entry's ids back to their buffer (as the replay task does), then flush
    that buffer here until every one of them is settled."""
    label = f"dead letter {entry_id}"
    task = progress.add_task(label, total=None)
    result = replay_entry(services, entry_id)
    _, done, _, total = _settled(services, entry_id)
    progress.update(task, completed=done, total=max(total, 1))

    def report() -> None:
        nonlocal done
        _, done, _, _ = _settled(services, entry_id)
        progress.update(task, completed=done)

    summary = result.summary
    if result.key is not None:
        here = flush_here(services, result.key, lambda: done >= total, on_progress=report)
        summary = _summary(here, _reason(services, entry_id))
    deadletters.complete_replays(services.sessions)
    status, settled, completed, total = _settled(services, entry_id)
    progress.update(
        task,
        description=f"{label}: {status}",
        total=max(total, 1),
        completed=max(total, 1) if settled >= total else settled,
    )
    return Outcome(entry_id, status, completed, total, summary)


def _summary(tally: Tally, reason: str) -> str:
    parts = [counted(tally.appended, "row") + " appended"]
    if tally.failed:
        parts.append(f"{tally.failed} FAILED")
    if tally.parked:
        parts.append(f"{counted(tally.parked, 'answer')} parked again ({reason})")
    return ", ".join(parts)


def _reason(services: Services, entry_id: int) -> str:
    with services.sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        return entry.reason.value if entry is not None else "gone"


def _settled(services: Services, entry_id: int) -> tuple[str, int, int, int]:
    """An entry's status; how many of its answers are settled for its sheet (in the
    sheet, FAILED, or parked again) and how many are in the sheet; of all its answers."""
    with services.sessions() as session:
        entry = session.get(DeadLetter, entry_id)
        if entry is None:
            return "gone", 0, 0, 0
        ids = deadletters.answer_ids(session, entry_id)
        states = ledger.states(session, ids, entry.spread_sheet_id, entry.sheet_id)
        settled = sum(states.get(i) in ledger.SETTLED for i in ids)
        if entry.status is DeadLetterStatus.FAILED:
            settled = len(ids)
        completed = sum(states.get(i) is TransactionType.COMPLETED for i in ids)
        return entry.status.value, settled, completed, len(ids)


def _candidates(
    services: Services, *, ids: Sequence[int] | None, user_id: str | None
) -> replays.Candidates:
    """The entries to try, in order, saying which named ones are skipped and why."""
    chosen = replays.candidates(services, ids=ids, user_id=user_id)
    for entry_id, state in chosen.skipped:
        hint(f"dead letter {entry_id} is {state}: skipped")
    if not chosen.named and not chosen.ids:
        whose = f" of user {user_id}" if user_id is not None else ""
        out.print(f"no PENDING dead letters{whose}: nothing to replay", markup=False)
    return chosen


def _claim(services: Services, ids: Sequence[int], *, include_failed: bool) -> list[int]:
    return replays.claim(services, ids, include_failed=include_failed)


def _report_taken(ids: Sequence[int]) -> None:
    """Entries someone else claimed first (the dispatcher, a worker, another operator)."""
    if ids:
        verb = "is" if len(ids) == 1 else "are"
        hint(f"{with_ids(ids, 'dead letter')} {verb} being replayed elsewhere already: skipped")


def release(services: Services, ids: Sequence[int]) -> None:
    """Give claimed entries that were never replayed back: PENDING, due now."""
    replays.release(services, ids)

"""``sheetsync dlq``: list, show, replay and purge dead letters.

Entries hold answer ids only; nothing here ever reads or prints an answer's values.

``dlq replay`` hands entries to the workers, or replays them here (``--now``). Sending to
the workers claims every chosen entry and sends at once. Replaying here claims one entry
at a time, right before replaying it: an entry claimed early would look stale to the
dispatcher after ``DEFAULT_REPLAY_STALE_S`` (:mod:`sheetsync.deadletters.replay`) and be
claimed a second time. Whatever was claimed but not replayed (the broker was down,
Ctrl-C) goes back to PENDING, due now.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import (
    counted,
    fail,
    heading,
    hint,
    id_note,
    out,
    print_json,
    progress_bar,
    table,
    usage_error,
    with_ids,
)
from sheetsync.cli.runtime import open_database, open_services
from sheetsync.text import clip, relative, short_time

if TYPE_CHECKING:
    from rich.progress import Progress
    from sqlalchemy.orm import Session, sessionmaker

    from sheetsync.deadletters.replay import Candidates
    from sheetsync.flush.outcomes import Tally
    from sheetsync.services import Services

#: Entries `dlq list` shows unless told otherwise.
DEFAULT_LIST_LIMIT = 100
#: DeadLetterStatus and DeadLetterReason names, spelled out here so that building the
#: command line does not import the models (a test keeps them in step).
STATUSES = ("PENDING", "REPLAYING", "DONE", "FAILED", "PURGED")
REASONS = (
    "CREDENTIAL",
    "TRANSIENT_EXHAUSTED",
    "CONFIGURATION",
    "UNEXPECTED",
    "PERMANENT",
    "SHEET_FULL",
    "PAUSED",
)

app = new_app("Dead letters: answer ids that could not reach their sheet.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _choice(
    ctx: typer.Context, option: str, choices: Sequence[str], value: str | None
) -> str | None:
    """``value`` as one of ``choices``, in any letter case; a usage error otherwise."""
    if value is None:
        return None
    if value.upper() not in choices:
        usage_error(ctx, f"{option} must be one of {', '.join(choices)}, not {value!r}")
    return value.upper()


@app.command("list", cls=HelpCommand)
def list_entries(
    ctx: typer.Context,
    *,
    user: Annotated[
        str | None, typer.Option("--user", metavar="USER", help="Only this owner's entries.")
    ] = None,
    status_name: Annotated[
        str | None,
        typer.Option(
            "--status", metavar="STATUS", help=f"Only this status: {', '.join(STATUSES)}."
        ),
    ] = None,
    reason_name: Annotated[
        str | None,
        typer.Option("--reason", metavar="REASON", help=f"Only this reason: {', '.join(REASONS)}."),
    ] = None,
    limit: Annotated[
        int,
        typer.Option("--limit", metavar="N", min=1, help="Show at most this many (oldest first)."),
    ] = DEFAULT_LIST_LIMIT,
    as_json: JsonFlag = False,
) -> None:
    """List dead letters, oldest first.

    Each row names the owner, form, sheet, reason and status, and counts the ids it holds.
    """
    status = _choice(ctx, "--status", STATUSES, status_name)
    reason = _choice(ctx, "--reason", REASONS, reason_name)
    from sheetsync.deadletters import queries

    with open_database() as sessions:
        page = queries.list_entries(
            sessions, user_id=user, status=status, reason=reason, limit=limit
        )
    if as_json:
        print_json({"total": page.total, "entries": page.entries})
        return
    if not page.entries:
        filtered = user is not None or status is not None or reason is not None
        out.print("no dead letters" + (" match" if filtered else ""), markup=False)
        return
    grid = table(
        "id",
        "owner",
        "form",
        "spreadsheet / gid",
        "reason",
        "status",
        "ids",
        "attempts",
        "next attempt",
        "error",
        right=("id", "ids", "attempts"),
    )
    for item in page.entries:
        grid.add_row(
            str(item["id"]),
            item["user_id"],
            item["submission_id"],
            f"{item['spread_sheet_id']} / {item['sheet_id']}",
            item["reason"],
            item["status"],
            str(item["answer_count"]),
            str(item["attempts"]),
            _next_attempt(item),
            clip(item["error_message"], 48),
        )
    out.print(grid)
    if page.total > len(page.entries):
        hint(
            f"showing {len(page.entries)} of {counted(page.total, 'dead letter')}; "
            "raise --limit to see more"
        )


def _next_attempt(item: dict[str, Any]) -> str:
    if item["status"] != "PENDING":
        return "-"
    return relative(item["next_attempt_at"])


@app.command("show", cls=HelpCommand)
def show(
    entry_id: Annotated[int, typer.Argument(metavar="ID", help="The dead letter's id.")],
    as_json: JsonFlag = False,
) -> None:
    """Show one dead letter in full, its answer ids included."""
    from sheetsync.deadletters import queries

    with open_database() as sessions:
        details = queries.get_entry(sessions, entry_id)
    if details is None:
        fail(f"dead letter {entry_id} does not exist")
    if as_json:
        print_json(details)
        return
    heading(f"dead letter {entry_id}")
    grid = table("field", "value")
    for name in (
        "user_id",
        "submission_id",
        "spread_sheet_id",
        "sheet_id",
        "reason",
        "status",
        "attempts",
        "answer_count",
    ):
        grid.add_row(name, str(details[name]))
    for name in ("next_attempt_at", "created_at", "updated_at"):
        grid.add_row(name, f"{short_time(details[name])} ({relative(details[name])})")
    grid.add_row("error_message", details["error_message"] or "-")
    out.print(grid)
    out.print("answer ids:", markup=False)
    out.print("\n".join(details["answer_ids"]) or "(none)", markup=False)


@app.command("replay", cls=HelpCommand)
def replay(
    ctx: typer.Context,
    entry_ids: Annotated[
        list[int] | None,
        typer.Argument(metavar="ID", help="Entries to replay.", show_default=False),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", metavar="USER", help="Every PENDING entry of this owner."),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every PENDING entry.")] = False,
    now: Annotated[
        bool,
        typer.Option("--now", help="Replay here and wait, instead of sending tasks to workers."),
    ] = False,
) -> None:
    """Replay dead letters: on the workers, or here with --now.

    Named entries are replayed even when FAILED; --user and --all take PENDING ones.
    """
    ids = list(dict.fromkeys(entry_ids or []))
    chosen = sum((bool(ids), user is not None, every))
    if chosen == 0:
        usage_error(ctx, "say what to replay: dead-letter IDs, --user USER or --all")
    if chosen > 1:
        usage_error(ctx, "give only one of: dead-letter IDs, --user USER, --all")
    with open_services() as services:
        if ids:
            require_existing(services.sessions, ids)
        if now:
            unfinished, total = _replay_here(services, ids=ids or None, user_id=user)
            if unfinished:
                fail(
                    f"{counted(total, 'dead letter')} replayed, {len(unfinished)} did not "
                    f"finish {id_note(unfinished)}: see the summary above"
                )
        else:
            _send_to_workers(services, ids=ids or None, user_id=user)


def require_existing(sessions: sessionmaker[Session], ids: Sequence[int]) -> None:
    """End the command with one line when an id names no dead letter."""
    from sheetsync.deadletters import queries

    missing = [str(entry_id) for entry_id in queries.missing_ids(sessions, ids)]
    if len(missing) == 1:
        fail(f"dead letter {missing[0]} does not exist")
    if missing:
        fail(f"dead letters {', '.join(missing)} do not exist")


def _send_to_workers(
    services: Services, *, ids: Sequence[int] | None, user_id: str | None
) -> list[int]:
    """Claim the chosen entries and send one replay task each. Returns the ids sent."""
    from sheetsync.deadletters import replay
    from sheetsync.dispatch import get_dispatcher

    get_dispatcher()  # before anything is said: without a Celery app nobody can send
    chosen = _candidates(services, ids=ids, user_id=user_id)
    result = replay.send_to_workers(services, chosen)
    _report_taken(result.taken)
    if not result.sent:
        return []
    out.print(
        f"sent {counted(len(result.sent), 'dead letter')} to the workers {id_note(result.sent)}",
        markup=False,
    )
    return result.sent


def _replay_here(
    services: Services, *, ids: Sequence[int] | None, user_id: str | None
) -> tuple[list[int], int]:
    """Replay the chosen entries in this process, one by one, with a progress bar.

    Returns (the ids of entries that did not end DONE, how many entries were replayed).
    """
    from sheetsync.deadletters import replay

    candidates = _candidates(services, ids=ids, user_id=user_id).ids
    if not candidates:
        return [], 0
    outcomes: list[Outcome] = []
    taken: list[int] = []
    with progress_bar() as progress:
        for entry_id in candidates:
            if not replay.claim(services, [entry_id], include_failed=ids is not None):
                taken.append(entry_id)
                continue
            try:
                outcomes.append(_replay_one(services, progress, entry_id))
            except BaseException:
                replay.release(services.sessions, [entry_id])
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
    unfinished = [outcome.entry_id for outcome in outcomes if outcome.status != "DONE"]
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
    from sheetsync.deadletters import queries, replay
    from sheetsync.deadletters.replay_end import complete_replays
    from sheetsync.flush.here import flush_here

    label = f"dead letter {entry_id}"
    task = progress.add_task(label, total=None)
    result = replay.replay(services, entry_id)
    now = queries.settled(services.sessions, entry_id)
    progress.update(task, completed=now.settled, total=max(now.total, 1))

    def report() -> None:
        nonlocal now
        now = queries.settled(services.sessions, entry_id)
        progress.update(task, completed=now.settled)

    summary = result.summary
    if result.key is not None:
        total = now.total
        here = flush_here(services, result.key, lambda: now.settled >= total, on_progress=report)
        summary = _summary(here, now.reason)
    complete_replays(services.sessions)
    end = queries.settled(services.sessions, entry_id)
    progress.update(
        task,
        description=f"{label}: {end.status}",
        total=max(end.total, 1),
        completed=max(end.total, 1) if end.settled >= end.total else end.settled,
    )
    return Outcome(entry_id, end.status, end.completed, end.total, summary)


def _summary(tally: Tally, reason: str) -> str:
    parts = [counted(tally.appended, "row") + " appended"]
    if tally.failed:
        parts.append(f"{tally.failed} FAILED")
    if tally.parked:
        parts.append(f"{counted(tally.parked, 'answer')} parked again ({reason})")
    return ", ".join(parts)


def _candidates(
    services: Services, *, ids: Sequence[int] | None, user_id: str | None
) -> Candidates:
    """The entries to try, in order, saying which named ones are skipped and why."""
    from sheetsync.deadletters import replay

    chosen = replay.candidates(services, ids=ids, user_id=user_id)
    for entry_id, state in chosen.skipped:
        hint(f"dead letter {entry_id} is {state}: skipped")
    if not chosen.named and not chosen.ids:
        whose = f" of user {user_id}" if user_id is not None else ""
        out.print(f"no PENDING dead letters{whose}: nothing to replay", markup=False)
    return chosen


def _report_taken(ids: Sequence[int]) -> None:
    """Entries someone else claimed first (the dispatcher, a worker, another operator)."""
    if ids:
        verb = "is" if len(ids) == 1 else "are"
        hint(f"{with_ids(ids, 'dead letter')} {verb} being replayed elsewhere already: skipped")


@app.command("purge", cls=HelpCommand)
def purge(
    entry_ids: Annotated[
        list[int], typer.Argument(metavar="ID", help="Entries to purge.", show_default=False)
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking.")] = False,
) -> None:
    """Give up on dead letters for good.

    The entries become PURGED, and their ids are recorded FAILED in the ledger.
    """
    ids = list(dict.fromkeys(entry_ids))
    chosen = with_ids(ids, "dead letter")
    if not yes:
        whose = "Its answers" if len(ids) == 1 else "Their answers"
        question = f"Purge {chosen}? {whose} will never reach the sheet"
        if not sys.stdin.isatty():
            fail(f"purging drops {chosen} for good: add --yes to confirm")
        if not typer.confirm(question, err=True):
            fail("purge cancelled")
    from sheetsync.deadletters import store

    with open_database() as sessions:
        require_existing(sessions, ids)
        purged, refused = store.purge(sessions, ids)
    if purged:
        out.print(f"purged {with_ids(purged, 'dead letter')}", markup=False)
    if refused:
        listed = ", ".join(f"{entry_id} ({state})" for entry_id, state in refused)
        fail(
            f"not purged: {listed}; only PENDING and FAILED dead letters can be purged "
            "(a REPLAYING one belongs to a running replay)"
        )

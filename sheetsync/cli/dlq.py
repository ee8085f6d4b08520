"""``sheetsync dlq``: list, show, replay and purge dead letters.

Entries hold answer ids only; nothing here ever reads or prints an answer's values.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
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
    table,
    usage_error,
    with_ids,
)
from sheetsync.cli.runtime import open_database, open_services
from sheetsync.text import clip, relative, short_time

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

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
    from sheetsync.ops import deadletters as ops_deadletters

    with open_database() as sessions:
        page = ops_deadletters.list_entries(
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
    from sheetsync.ops import deadletters as ops_deadletters

    with open_database() as sessions:
        details = ops_deadletters.get_entry(sessions, entry_id)
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
    from sheetsync.cli.replaying import replay_here, send_to_workers

    with open_services() as services:
        if ids:
            require_existing(services.sessions, ids)
        if now:
            unfinished, total = replay_here(services, ids=ids or None, user_id=user)
            if unfinished:
                fail(
                    f"{counted(total, 'dead letter')} replayed, {len(unfinished)} did not "
                    f"finish {id_note(unfinished)}: see the summary above"
                )
        else:
            send_to_workers(services, ids=ids or None, user_id=user)


def require_existing(sessions: sessionmaker[Session], ids: Sequence[int]) -> None:
    """End the command with one line when an id names no dead letter."""
    from sheetsync.ops import deadletters as ops_deadletters

    missing = [str(entry_id) for entry_id in ops_deadletters.missing_ids(sessions, ids)]
    if len(missing) == 1:
        fail(f"dead letter {missing[0]} does not exist")
    if missing:
        fail(f"dead letters {', '.join(missing)} do not exist")


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
    from sheetsync import deadletters

    with open_database() as sessions:
        require_existing(sessions, ids)
        purged, refused = deadletters.purge(sessions, ids)
    if purged:
        out.print(f"purged {with_ids(purged, 'dead letter')}", markup=False)
    if refused:
        listed = ", ".join(f"{entry_id} ({state})" for entry_id, state in refused)
        fail(
            f"not purged: {listed}; only PENDING and FAILED dead letters can be purged "
            "(a REPLAYING one belongs to a running replay)"
        )

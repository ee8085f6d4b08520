"""Operator commands around the pipeline: the database, the emulator, the demo,
credentials and personal-info keys."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sheetsync import extras
from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import counted, hint, out
from sheetsync.cli.runtime import (
    open_database,
    open_services,
    upgrade_database,
)
from sheetsync.errors import SheetSyncError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from sheetsync.rotation import PiiCheck, RotationResult, TokenIssue

#: Where the emulator listens unless told otherwise.
DEFAULT_EMULATOR_HOST = "127.0.0.1"
DEFAULT_EMULATOR_PORT = 8085
#: `sheetsync emulator` and `sheetsync demo` without the emulator package.
EMULATOR_MISSING = f"the Sheets API emulator is not installed: {extras.EMULATOR_INSTALL}"

db_app = new_app("The database schema.")
credentials_app = new_app("Owners' Google credentials.")
keys_app = new_app("Keys for personal info at rest.")
pii_app = new_app("Personal info stored in the database.")


@db_app.command("upgrade", cls=HelpCommand)
def db_upgrade() -> None:
    """Create or migrate the schema to the newest revision, and say which it did.

    Safe to run again: an up-to-date schema is left as it is. SHEETSYNC_DATABASE_URL
    must be set: without it the command refuses, rather than create sqlite:///sheetsync.db
    in the current directory.
    """
    out.print(upgrade_database(), markup=False)


@credentials_app.command("reconnect", cls=HelpCommand)
def credentials_reconnect(
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The owner's user id.")],
) -> None:
    """Mark an owner's credential VALID and their dead letters due.

    Run it once the owner has authorised Google again.
    """
    from sheetsync.recovery.reconnect import credential_reconnected

    with open_services() as services:
        due = credential_reconnected(user_id, services=services)
    verb = "is" if len(due) == 1 else "are"
    out.print(
        f"credential of {user_id} is VALID; {counted(len(due), 'dead letter')} {verb} due now",
        markup=False,
    )
    if due:
        hint(
            f"the beat replays them within a minute; to send them at once run "
            f"`sheetsync dlq replay --user {user_id}`"
        )


@keys_app.command("generate", cls=HelpCommand)
def keys_generate() -> None:
    """Print a new key for SHEETSYNC_PII_KEYS.

    Only the key goes to stdout, so `export SHEETSYNC_PII_KEYS=$(sheetsync keys generate)`
    works. At a terminal a hint follows on stderr: how to rotate to it when keys are set
    already, where to put it when none are.
    """
    from sheetsync.crypto import generate_key

    out.print(generate_key(), markup=False)
    if not sys.stdout.isatty():
        return  # captured by a script or $(...): the key alone, no advice
    if os.environ.get("SHEETSYNC_PII_KEYS", "").strip():
        hint(
            "to rotate: put it first in SHEETSYNC_PII_KEYS (keep the old keys after it), "
            "restart, run `sheetsync pii rotate`, and drop the old keys once "
            "`sheetsync pii rotate --check` finds none left"
        )
    else:
        hint(
            "set it as SHEETSYNC_PII_KEYS in every process (the web app, the workers, the "
            "CLI), e.g. export SHEETSYNC_PII_KEYS=$(sheetsync keys generate)"
        )


@pii_app.command("rotate", cls=HelpCommand)
def pii_rotate(
    batch_size: Annotated[
        int, typer.Option("--batch-size", metavar="N", min=1, help="Rows per transaction.")
    ] = 500,
    check: Annotated[
        bool,
        typer.Option(
            "--check", help="Change nothing: list the tokens left to rotate (exit 1 if any)."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Re-encrypt personal info under the first SHEETSYNC_PII_KEYS key, bound to its row.

    Answers' personal info and owners' refresh tokens alike, each as a version 2 token
    bound to its answer and question, or to its owner. Each batch commits on its own: an
    interrupted run is simply run again. A row the web app changes meanwhile is read
    again, never overwritten. A token that cannot be read is left as it is and listed,
    and the command exits 1. With --check it changes nothing: it counts the tokens still
    under an older key or version (or unreadable) per table, lists them, and exits 1 if
    any are left.
    """
    from sheetsync.crypto import default_keyring, reset_keyring
    from sheetsync.rotation import check_pii, rotate_pii

    with open_database() as sessions:
        reset_keyring()
        keyring = default_keyring()
        with sessions() as session:
            if check:
                _report_check(check_pii(session, keyring=keyring, batch_size=batch_size), as_json)
                return
            result = rotate_pii(
                session, keyring=keyring, batch_size=batch_size, commit_each_batch=True
            )
            session.commit()
    _report_rotation(result, as_json)


def _report_rotation(result: RotationResult, as_json: bool) -> None:
    """``sheetsync pii rotate``'s report; exit 1 when a token had to be skipped."""
    from sheetsync.cli.output import fail, print_json

    if as_json:
        print_json(
            {
                "answers_scanned": result.answers_scanned,
                "answers_updated": result.answers_updated,
                "values_reencrypted": result.values_reencrypted,
                "credentials_reencrypted": result.credentials_reencrypted,
                "skipped": [_issue_json(issue) for issue in result.skipped],
            }
        )
    else:
        out.print(
            f"{counted(result.answers_scanned, 'answer')} scanned, "
            f"{result.answers_updated} updated; "
            f"{counted(result.values_reencrypted, 'value')} and "
            f"{counted(result.credentials_reencrypted, 'refresh token')} re-encrypted",
            markup=False,
        )
        _list_issues(result.skipped, "skipped")
    if result.skipped:
        fail(
            f"{counted(len(result.skipped), 'token')} could not be rotated: fix or clear "
            "them (or add their key to SHEETSYNC_PII_KEYS), then run again"
        )


def _report_check(found: PiiCheck, as_json: bool) -> None:
    """``sheetsync pii rotate --check``'s report: counts per table, then the tokens; exit
    1 while any are left."""
    from sheetsync.cli.output import fail, print_json

    counts = found.counts()
    if as_json:
        print_json(
            {
                "left": len(found.left),
                "answers_scanned": found.answers_scanned,
                "credentials_scanned": found.credentials_scanned,
                "tables": counts,
                "tokens": [_issue_json(issue) for issue in found.left],
            }
        )
    else:
        for table_name, states in counts.items():
            out.print(
                f"{table_name}: {counted(sum(states.values()), 'token')} left "
                f"({states['old_key']} under an older key, {states['old_version']} of an "
                f"older version, {states['unreadable']} unreadable)",
                markup=False,
            )
        _list_issues(found.left, "left")
    if found.left:
        fail(_left_message(found))
    if not as_json:
        hint("every token is version 2 under the first key: the old keys can go")


def _left_message(found: PiiCheck) -> str:
    from sheetsync.rotation import UNREADABLE

    unreadable = sum(1 for issue in found.left if issue.state == UNREADABLE)
    message = f"{counted(len(found.left), 'token')} left: run `sheetsync pii rotate`"
    if unreadable:
        message += f"; {unreadable} cannot be read and must be fixed or cleared by hand"
    return message


def _list_issues(issues: Sequence[TokenIssue], verb: str) -> None:
    """One line per token (the first few; --json has them all), on stderr."""
    from sheetsync.cli.output import SHOWN_IDS

    for issue in issues[:SHOWN_IDS]:
        where = f"{issue.table} {issue.row_id}"
        if issue.question_id is not None:
            where += f", question {issue.question_id}"
        hint(f"{verb}: {where}: {issue.reason}")
    if len(issues) > SHOWN_IDS:
        hint(f"... and {len(issues) - SHOWN_IDS} more (--json lists them all)")


def _issue_json(issue: TokenIssue) -> dict[str, Any]:
    return {
        "table": issue.table,
        "id": issue.row_id,
        "question_id": issue.question_id,
        "state": issue.state,
        "reason": issue.reason,
    }


def emulator(
    *,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")
    ] = DEFAULT_EMULATOR_HOST,
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port (0: any free one)."),
    ] = DEFAULT_EMULATOR_PORT,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Listen on a HOST that is not loopback. Anyone who reaches it can mint "
            "tokens and read every sheet: a development tool only.",
        ),
    ] = False,
    read_per_account: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Reads per window per account (Google: 60)."),
    ] = None,
    write_per_account: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Writes per window per account (Google: 60)."),
    ] = None,
    read_per_project: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Reads per window per project (Google: 300)."),
    ] = None,
    write_per_project: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Writes per window per project (Google: 300)."),
    ] = None,
    window_s: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", min=0.001, help="Quota window in seconds (Google: 60)."),
    ] = None,
) -> None:
    """Run the Sheets API emulator (in memory) until interrupted.

    The emulator is a distribution of its own, sheetsync-emulator (`make install` installs it).
    """
    with _needs_emulator():
        from sheets_emulator import EmulatorError, serve
        from sheets_emulator.cli import is_loopback, remote_refusal

    if not allow_remote and not is_loopback(host):
        raise typer.BadParameter(remote_refusal(host), param_hint="--host")

    quotas: dict[str, Any] = {
        name: value
        for name, value in (
            ("read_per_account", read_per_account),
            ("write_per_account", write_per_account),
            ("read_per_project", read_per_project),
            ("write_per_project", write_per_project),
            ("window_s", window_s),
        )
        if value is not None
    }
    try:
        serve(host, port, announce=_Announcer(), **quotas)
    except EmulatorError as error:
        raise SheetSyncError(str(error)) from error


@contextlib.contextmanager
def _needs_emulator() -> Iterator[None]:
    """Imports of the emulator package: its absence becomes one line naming the install."""
    try:
        yield
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != "sheets_emulator":
            raise
        raise SheetSyncError(EMULATOR_MISSING) from None


class _Announcer:
    """Prints the emulator's start-up lines, then the settings that point sheetsync at it
    (once the port is bound, so ``--port 0`` shows the real one)."""

    def __init__(self) -> None:
        self.told = False

    def __call__(self, line: str) -> None:
        out.print(line, markup=False)
        found = re.search(r"https?://\S+", line)
        if found and not self.told:
            self.told = True
            url = found.group(0).rstrip("/")
            hint(
                f"point sheetsync at it: SHEETSYNC_GOOGLE_API_ENDPOINT={url} "
                f"SHEETSYNC_GOOGLE_TOKEN_URI={url}/token"
            )
        sys.stdout.flush()


def demo(
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep everything running until Ctrl-C to browse the sheets."),
    ] = False,
) -> None:
    """Run the end-to-end demo against the emulator."""
    with _needs_emulator():
        from sheetsync.dev.demo import run_demo

    code = run_demo(keep=keep)
    if code:
        raise typer.Exit(int(code))

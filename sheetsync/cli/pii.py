"""``sheetsync pii``: personal info stored in the database (its rotation to the newest
key)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import counted, hint, out
from sheetsync.cli.runtime import open_database

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sheetsync.rotation import PiiCheck, RotationResult, TokenIssue

app = new_app("Personal info stored in the database.")


@app.command("rotate", cls=HelpCommand)
def rotate(
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

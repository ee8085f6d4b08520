"""``sheetsync resend``: send FAILED answers again, once their cause is fixed."""

from __future__ import annotations

from typing import Annotated

import typer

from sheetsync.cli.output import counted, hint, out, print_json, usage_error
from sheetsync.cli.runtime import open_services


def resend(
    ctx: typer.Context,
    answer_ids: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="ANSWER_ID", help="FAILED answers to send again.", show_default=False
        ),
    ] = None,
    form: Annotated[
        str | None, typer.Option("--form", metavar="FORM", help="Every FAILED answer of this form.")
    ] = None,
    spreadsheet: Annotated[
        str | None,
        typer.Option("--spreadsheet", metavar="ID", help="Only for this spreadsheet."),
    ] = None,
    gid: Annotated[
        int | None,
        typer.Option("--gid", metavar="GID", help="Only for this tab (with --spreadsheet)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Send FAILED answers to their sheets again (the ledger says which, and why)."""
    if not answer_ids and form is None:
        usage_error(ctx, "say what to resend: ANSWER_IDs, --form FORM, or both")
    if gid is not None and spreadsheet is None:
        usage_error(ctx, "--gid needs --spreadsheet")
    from sheetsync.emit.resend import resend_failed

    with open_services() as services:
        result = resend_failed(
            answer_ids or None,
            submission_id=form,
            spread_sheet_id=spreadsheet,
            sheet_id=gid,
            services=services,
        )
    if as_json:
        print_json({"resent": result.resent, "unlinked": result.unlinked})
        return
    out.print(f"resent {counted(result.resent, 'answer')} to their sheets", markup=False)
    if result.unlinked:
        hint(f"{counted(result.unlinked, 'FAILED answer')} left as they are: their link is gone")

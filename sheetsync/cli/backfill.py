"""``sheetsync backfill``: send a form's existing answers to its newly linked sheets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.progress import (
    TaskID,
)

from sheetsync.cli.output import counted, hint, out, print_json, progress_bar
from sheetsync.cli.runtime import open_services

#: Formats ``--since`` accepts (a naive time is UTC).
SINCE_FORMATS = ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"]


def backfill(
    form: Annotated[
        str, typer.Option("--form", metavar="FORM", help="The form whose answers to send.")
    ],
    link: Annotated[
        int | None,
        typer.Option("--link", metavar="LINK", help="Only to this link (default: every link)."),
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            "--since",
            metavar="DATE",
            formats=SINCE_FORMATS,
            help="Only answers submitted at or after DATE (UTC unless it says).",
        ),
    ] = None,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Return once everything is queued (workers deliver)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Send a form's existing answers to its sheets, exactly once: what is already
    there is skipped, and running it again resumes. Workers deliver (paced, so live
    answers keep flowing); this waits for them with a progress bar."""
    from sheetsync.emit.backfill import BackfillProgress
    from sheetsync.emit.backfill import backfill as run_backfill

    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    # Started by the first report, so a form or link that does not exist is one line.
    bar = progress_bar()
    tasks: dict[str, TaskID] = {}

    def show(progress: BackfillProgress) -> None:
        if not tasks:
            bar.start()
            tasks["read"] = bar.add_task("answers read (once per link)", total=None)
        bar.update(tasks["read"], completed=progress.read)
        if progress.sent and "sent" not in tasks:
            tasks["sent"] = bar.add_task("sent, settled by the workers", total=progress.sent)
        if "sent" in tasks:
            bar.update(tasks["sent"], completed=progress.drained, total=progress.sent)

    try:
        with open_services() as services:
            result = run_backfill(
                form,
                link_id=link,
                since=since,
                wait=not no_wait,
                services=services,
                on_progress=show,
            )
    finally:
        bar.stop()
    if as_json:
        print_json(
            {
                "form": result.form_id,
                "read": result.read,
                "sent": result.sent,
                "drained": result.drained,
            }
        )
        return
    out.print(
        f"form {result.form_id}: {counted(result.read, 'answer')} read, "
        f"{counted(result.sent, 'answer')} sent to its sheets",
        markup=False,
    )
    if result.read and not result.sent:
        hint("every answer was in its sheets already (or is on its way)")

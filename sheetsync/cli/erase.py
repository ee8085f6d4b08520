"""``sheetsync erase``: take a person's answers out of every sheet (GDPR, PIPA).

The web app knows which answers are a person's; this removes their rows from every
linked sheet and tab, and their ids from Redis and dead letters, so nothing writes them
again. It waits (``--wait``) while the sheets' flushes run, with progress, then prints
where each answer stands: "erased" only where it is. A sheet that cannot be reached
keeps its erasure pending (a dead letter, ``status``, the console) until its owner
reconnects: run the command again, or ``--check``, to see it done.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sheetsync.cli.output import (
    EXIT_PENDING,
    counted,
    fail,
    hint,
    out,
    print_json,
    progress_bar,
    table,
)
from sheetsync.cli.runtime import open_services
from sheetsync.errors import ValidationError

if TYPE_CHECKING:
    from sheetsync.emit.erasure import Erasure
    from sheetsync.services import Services

#: How often the command looks at the ledger while it waits.
POLL_S = 0.5


def erase(
    ctx: typer.Context,
    answer_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="ANSWER_ID", help="Answers to erase.", show_default=False),
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            metavar="FILE",
            help="A file of answer ids, one per line (- for standard input).",
            allow_dash=True,
        ),
    ] = None,
    wait: Annotated[
        float,
        typer.Option("--wait", metavar="SECONDS", help="How long to wait for the sheets."),
    ] = 60.0,
    check: Annotated[
        bool, typer.Option("--check", help="Only say where an earlier erasure stands.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Erase answers from every sheet they were sent to, and from Redis and dead letters,
    so that no replay or backfill writes them again; print what was removed where."""
    ids = [*(answer_ids or []), *_read_ids(from_file)]
    if not ids:
        fail("say which answers to erase: ANSWER_IDs, or --file FILE")
    from sheetsync.emit.erasure import erase as erase_answers
    from sheetsync.emit.erasure import erasure_status

    with open_services() as services:
        try:
            report = (erasure_status if check else erase_answers)(ids, services=services)
        except ValidationError as exc:
            fail(str(exc))
        if not check and not report.done and wait > 0:
            report = _wait(ids, report, wait, services)
    if as_json:
        print_json(report.as_json())
    else:
        _print(report)
    if not report.done:
        raise typer.Exit(EXIT_PENDING)


def _read_ids(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        text = typer.get_text_stream("stdin").read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or type(exc).__name__}")
    return [line.strip() for line in text.splitlines() if line.strip()]


def _wait(ids: list[str], report: Erasure, wait_s: float, services: Services) -> Erasure:
    """Poll until every sheet is done or ``wait_s`` passed, with a progress bar."""
    from sheetsync.emit.erasure import erasure_status

    deadline = time.monotonic() + wait_s
    with progress_bar() as bar:
        task = bar.add_task("erasing", total=len(report.places))
        while True:
            bar.update(task, completed=len(report.places) - len(report.pending))
            if report.done or time.monotonic() >= deadline:
                break
            if all(place.detail.startswith(("in a ", "the owner's")) for place in report.pending):
                break  # only sheets that wait for their owner are left
            time.sleep(POLL_S)
            report = erasure_status(ids, services=services)
    return report


def _print(report: Erasure) -> None:
    shown = table("answer", "spreadsheet", "gid", "outcome", "detail")
    for place in report.places:
        shown.add_row(
            place.answer_id, place.spread_sheet_id, str(place.sheet_id), place.outcome, place.detail
        )
    if report.places:
        out.print(shown)
    answers = len({place.answer_id for place in report.places})
    sheets = len({(place.spread_sheet_id, place.sheet_id) for place in report.places})
    erased = len(report.places) - len(report.pending)
    out.print(
        f"{counted(answers, 'answer')} in {counted(sheets, 'sheet')}: "
        f"{erased} erased, {len(report.pending)} pending",
        markup=False,
    )
    if report.never_sent:
        hint(f"{counted(len(report.never_sent), 'answer')} never sent to any sheet")
    if report.taken_from_dead_letters:
        hint(f"{counted(report.taken_from_dead_letters, 'id')} taken out of dead letters")
    if report.pending:
        hint("a pending erasure is applied when its sheet can be reached; see it with --check")

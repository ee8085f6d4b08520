"""``sheetsync links``: list links, resume a paused one, escape formula-like text, keep
rows on deletion.

A link pauses when row 1 of its sheet no longer matches its columns (a header a person
changed so that no column can be found again); nothing is written to it until it is
resumed. Fix row 1 first: the next write checks it again.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import counted, heading, hint, out, print_json, table
from sheetsync.cli.runtime import open_services
from sheetsync.text import clip, short_time

app = new_app("Links: which form sends its answers to which sheet.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list", cls=HelpCommand)
def list_links(
    *,
    paused: Annotated[bool, typer.Option("--paused", help="Only paused links.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """List links: form, spreadsheet, gid, owner, columns mapped, and why one is paused."""
    from sheetsync.ops import links

    with open_services() as services:
        rows = links.list_links(services, paused_only=paused)
    if as_json:
        print_json({"links": [dataclasses.asdict(row) for row in rows]})
        return
    heading(counted(len(rows), "link"))
    shown = table(
        "id", "form", "spreadsheet", "gid", "owner", "columns", "tab", "cells", "formulas",
        "on delete", "paused", right=("id", "cells"),
    )  # fmt: skip
    for row in rows:
        why = f"{short_time(row.paused_at)}: {clip(row.paused_reason)}" if row.paused_reason else ""
        shown.add_row(
            str(row.id), row.form, row.spreadsheet, str(row.gid), row.owner,
            str(row.columns), str(row.tab), f"{row.tab_cells:,}",
            "escaped" if row.escape_formulas else "as typed",
            "blank PII" if row.blank_on_delete else "delete row", why,
        )  # fmt: skip
    out.print(shown)


@app.command("resume", cls=HelpCommand)
def resume(
    link_id: Annotated[int, typer.Argument(metavar="LINK", help="The link's id.")],
    *,
    as_json: JsonFlag = False,
) -> None:
    """Resume a paused link: row 1 is checked again before its next write, and the
    answers that waited (a PAUSED dead letter) are due now."""
    from sheetsync.ops import links

    with open_services() as services:
        resumed = links.resume(services, link_id)
    if as_json:
        print_json(dataclasses.asdict(resumed))
        return
    state = "resumed" if resumed.was_paused else "was not paused"
    out.print(
        f"link {link_id} {state}; {counted(resumed.due_dead_letters, 'dead letter')} due now",
        markup=False,
    )
    if resumed.due_dead_letters:
        hint("the beat replays them within a minute; `sheetsync dlq replay` sends them at once")


@app.command("escape-formulas", cls=HelpCommand)
def escape_formulas(
    link_id: Annotated[int, typer.Argument(metavar="LINK", help="The link's id.")],
    *,
    off: Annotated[bool, typer.Option("--off", help="Write text as typed again.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Write a respondent's text that begins with =, +, -, @, a tab or a carriage return
    after an apostrophe, so the sheet's CSV export runs no formula in other programs.
    Google Sheets itself never runs it (cells are sent RAW). Rows already written stay."""
    from sheetsync.ops import links

    with open_services() as services:
        was = links.escape_formulas(services, link_id, on=not off)
    now = not off
    if as_json:
        print_json({"link_id": link_id, "escape_formulas": now, "was": was})
        return
    state = "escapes formula-like text" if now else "writes text as typed"
    same = " (unchanged)" if was == now else ""
    out.print(f"link {link_id} {state}{same}; rows written from now on", markup=False)


@app.command("on-delete", cls=HelpCommand)
def on_delete(
    link_id: Annotated[int, typer.Argument(metavar="LINK", help="The link's id.")],
    *,
    blank_pii: Annotated[
        bool,
        typer.Option(
            "--blank-pii/--delete-row",
            help="Blank the personal-info cells and the submitter, keeping the row; or "
            "delete the row (the default).",
        ),
    ],
    as_json: JsonFlag = False,
) -> None:
    """What a deleted or erased answer does to its row in this link's sheet: deleted
    (the default), or kept with its personal-info cells and submitter blanked, for owners
    who keep row counts. Deletions from now on follow it."""
    from sheetsync.ops import links

    with open_services() as services:
        was = links.blank_on_delete(services, link_id, on=blank_pii)
    if as_json:
        print_json({"link_id": link_id, "blank_on_delete": blank_pii, "was": was})
        return
    state = (
        "blanks a deleted answer's personal info" if blank_pii else "deletes a deleted answer's row"
    )
    same = " (unchanged)" if was == blank_pii else ""
    out.print(f"link {link_id} {state}{same}", markup=False)

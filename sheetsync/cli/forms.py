"""``sheetsync forms``: list forms, and show a form's questions with their ids.

An answer names its questions by id (``questionId``, docs/integration/schema.md): ``forms
show FORM`` is where a web app's developer finds them, with each question's type and the
column it has in every linked sheet. Titles are the owner's text: shown as they are,
never read as markup, with terminal control characters escaped.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import counted, heading, hint, out, print_json, table
from sheetsync.cli.runtime import open_database
from sheetsync.text import clip, printable

if TYPE_CHECKING:
    from sheetsync.ops.forms import QuestionLine

#: Forms `forms list` shows unless told otherwise.
DEFAULT_LIST_LIMIT = 100
#: Widest a form's or a question's title gets in a table (``--json`` has it whole).
TITLE_CHARS = 40

app = new_app("Forms: their questions, the ids answers name, and their columns.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list", cls=HelpCommand)
def list_forms(
    *,
    owner: Annotated[
        str | None, typer.Option("--owner", metavar="USER", help="Only this owner's forms.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="Show at most this many (by id).")
    ] = DEFAULT_LIST_LIMIT,
    as_json: JsonFlag = False,
) -> None:
    """List forms by id: title, owner, how many questions and linked sheets."""
    from sheetsync.ops import forms

    with open_database() as sessions:
        page = forms.list_forms(sessions, owner=owner, limit=limit)
    if as_json:
        print_json({"total": page.total, "forms": [dataclasses.asdict(f) for f in page.forms]})
        return
    if not page.forms:
        out.print("no forms" + (" match" if owner is not None else ""), markup=False)
        return
    heading(counted(page.total, "form"))
    shown = table("form", "title", "owner", "questions", "links", right=("questions", "links"))
    for form in page.forms:
        shown.add_row(
            form.id, clip(form.title, TITLE_CHARS), form.owner, str(form.questions), str(form.links)
        )
    out.print(shown)
    if page.total > len(page.forms):
        hint(f"showing {len(page.forms)} of {counted(page.total, 'form')}; raise --limit")
    hint("`sheetsync forms show FORM` lists a form's questions and their ids")


@app.command("show", cls=HelpCommand)
def show(
    form_id: Annotated[str, typer.Argument(metavar="FORM", help="The form's id.")],
    *,
    as_json: JsonFlag = False,
) -> None:
    """Show a form's questions in order: step, position, question id, title, type,
    personal info or display-only, and the column each has in every linked sheet
    (pending: its title goes into row 1 at the next write)."""
    from sheetsync.ops import forms

    with open_database() as sessions:
        form = forms.show_form(sessions, form_id)
    if as_json:
        print_json(dataclasses.asdict(form))
        return
    heading(printable(f"form {form.id}: {clip(form.title, 2 * TITLE_CHARS)}"))
    sheets = ", ".join(
        f"{link.id} ({link.spreadsheet}, gid {link.gid}{', paused' if link.paused else ''})"
        for link in form.links
    )
    linked = f"{counted(len(form.links), 'link')}" + (f": {sheets}" if sheets else "")
    out.print(printable(f"owner {form.owner}; {linked}"), markup=False)
    if not form.questions:
        out.print("no questions", markup=False)
        return
    link_headers = [f"link {link.id}" for link in form.links]
    shown = table(
        "step", "pos", "question", "title", "type", "notes", *link_headers, right=("step", "pos")
    )
    for question in form.questions:
        columns = {place.link: place.column or "pending" for place in question.columns}
        shown.add_row(
            str(question.step),
            str(question.position),
            question.id,
            clip(question.title, TITLE_CHARS),
            question.type,
            _notes(question),
            *(columns.get(link.id, "-") for link in form.links),
        )
    out.print(shown)
    if form.links and not any(question.columns for question in form.questions):
        hint("no columns yet: a link's column map is made on its first write")


def _notes(question: QuestionLine) -> str:
    if question.display_only:
        return "display-only (no column)"
    if question.personal_info:
        return "personal info (encrypted)"
    return ""

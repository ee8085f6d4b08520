"""``sheetsync credentials``: owners' Google credentials."""

from __future__ import annotations

from typing import Annotated

import typer

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import counted, hint, out
from sheetsync.cli.runtime import open_services

app = new_app("Owners' Google credentials.")


@app.command("reconnect", cls=HelpCommand)
def reconnect(
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

"""``sheetsync db``: the database schema."""

from __future__ import annotations

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import out
from sheetsync.cli.runtime import upgrade_database

app = new_app("The database schema.")


@app.command("upgrade", cls=HelpCommand)
def upgrade() -> None:
    """Create or migrate the schema to the newest revision, and say which it did.

    Safe to run again: an up-to-date schema is left as it is. SHEETSYNC_DATABASE_URL
    must be set: without it the command refuses, rather than create sqlite:///sheetsync.db
    in the current directory.
    """
    out.print(upgrade_database(), markup=False)

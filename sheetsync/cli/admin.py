"""Operator commands around the pipeline: the database, the emulator, the demo,
credentials and personal-info keys."""

from __future__ import annotations

import re
import sys
from typing import Annotated, Any

import typer

from sheetsync.cli.helpformat import HelpCommand, new_app
from sheetsync.cli.output import counted, hint, out
from sheetsync.cli.runtime import load_settings, open_database, open_pipeline, require_database
from sheetsync.ops.text import mask_url

#: Where the emulator listens unless told otherwise.
DEFAULT_EMULATOR_HOST = "127.0.0.1"
DEFAULT_EMULATOR_PORT = 8085

db_app = new_app("The database schema.")
credentials_app = new_app("Owners' Google credentials.")
keys_app = new_app("Keys for personal info at rest.")
pii_app = new_app("Personal info stored in the database.")


@db_app.command("upgrade", cls=HelpCommand)
def db_upgrade() -> None:
    """Create or migrate the schema to the newest revision.

    Safe to run again: an up-to-date schema is left as it is.
    """
    from sheetsync.db import upgrade

    settings = load_settings()
    require_database(settings.database_url, create=True)
    upgrade(settings.database_url)
    out.print(f"{mask_url(settings.database_url)}: schema up to date", markup=False)


@credentials_app.command("reconnect", cls=HelpCommand)
def credentials_reconnect(
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The owner's user id.")],
) -> None:
    """Mark an owner's credential VALID and their dead letters due.

    Run it once the owner has authorised Google again.
    """
    from sheetsync.recovery.replay import credential_reconnected

    with open_pipeline() as pipeline:
        due = credential_reconnected(user_id, pipeline=pipeline)
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
    """Print a new key for SHEETSYNC_PII_KEYS."""
    from sheetsync.crypto import generate_key

    out.print(generate_key(), markup=False)
    hint(
        "put it first in SHEETSYNC_PII_KEYS (keep the old keys after it), restart, "
        "then run `sheetsync pii rotate`"
    )


@pii_app.command("rotate", cls=HelpCommand)
def pii_rotate(
    batch_size: Annotated[
        int, typer.Option("--batch-size", metavar="N", min=1, help="Rows per transaction.")
    ] = 500,
) -> None:
    """Re-encrypt personal info under the first SHEETSYNC_PII_KEYS key.

    Answers' personal info and owners' refresh tokens alike. Each batch commits on its
    own: an interrupted run is simply run again.
    """
    from sheetsync.crypto import default_keyring, reset_keyring, rotate_pii

    with open_database() as sessions:
        reset_keyring()
        keyring = default_keyring()
        with sessions() as session:
            result = rotate_pii(
                session, keyring=keyring, batch_size=batch_size, commit_each_batch=True
            )
            session.commit()
    out.print(
        f"{counted(result.answers_scanned, 'answer')} scanned, "
        f"{result.answers_updated} updated; "
        f"{counted(result.values_reencrypted, 'value')} and "
        f"{counted(result.credentials_reencrypted, 'refresh token')} re-encrypted",
        markup=False,
    )


def emulator(
    *,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Interface to listen on.")
    ] = DEFAULT_EMULATOR_HOST,
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", min=0, max=65535, help="Port (0: any free one)."),
    ] = DEFAULT_EMULATOR_PORT,
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
    """Run the Sheets API emulator (in memory) until interrupted."""
    from sheetsync.dev.emulator import serve

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
    serve(host, port, announce=_Announcer(), **quotas)


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
    from sheetsync.dev.demo import run_demo

    code = run_demo(keep=keep)
    if code:
        raise typer.Exit(int(code))

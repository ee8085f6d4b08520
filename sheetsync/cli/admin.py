"""Operator commands around the pipeline: the database, the emulator, the demo,
credentials and personal-info keys."""

from __future__ import annotations

import re
import sys
from typing import Annotated, Any

import typer

from sheetsync.cli.output import hint, mask_url, out
from sheetsync.cli.runtime import load_settings, open_database, open_pipeline

#: Where the emulator listens unless told otherwise (SPEC 4.2).
DEFAULT_EMULATOR_HOST = "127.0.0.1"
DEFAULT_EMULATOR_PORT = 8085

db_app = typer.Typer(help="The database schema.", no_args_is_help=True)
credentials_app = typer.Typer(help="Owners' Google credentials.", no_args_is_help=True)
keys_app = typer.Typer(help="Keys for personal info at rest.", no_args_is_help=True)
pii_app = typer.Typer(help="Personal info stored in the database.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the schema to the newest revision (safe to run again)."""
    from sheetsync.db import upgrade

    settings = load_settings()
    upgrade(settings.database_url)
    out.print(f"{mask_url(settings.database_url)}: schema up to date", markup=False)


@credentials_app.command("reconnect")
def credentials_reconnect(
    user_id: Annotated[str, typer.Argument(metavar="USER", help="The owner's user id.")],
) -> None:
    """The owner reconnected Google: mark the credential VALID, make their entries due."""
    from sheetsync.replay import credential_reconnected

    with open_pipeline() as pipeline:
        due = credential_reconnected(user_id, pipeline=pipeline)
    noun = "dead letter is" if len(due) == 1 else "dead letters are"
    out.print(f"credential of {user_id} is VALID; {len(due)} {noun} due now", markup=False)
    if due:
        hint(
            f"the beat replays them within a minute; to send them at once run "
            f"`sheetsync dlq replay --user {user_id}`"
        )


@keys_app.command("generate")
def keys_generate() -> None:
    """Print a new key for SHEETSYNC_PII_KEYS."""
    from sheetsync.crypto import generate_key

    out.print(generate_key(), markup=False)
    hint(
        "put it first in SHEETSYNC_PII_KEYS (keep the old keys after it), restart, "
        "then run `sheetsync pii rotate`"
    )


@pii_app.command("rotate")
def pii_rotate(
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Rows per transaction.")
    ] = 500,
) -> None:
    """Re-encrypt personal info and refresh tokens under the first key of SHEETSYNC_PII_KEYS.

    Each batch commits on its own: an interrupted run is simply run again.
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
        f"answers scanned {result.answers_scanned}, updated {result.answers_updated}, "
        f"values re-encrypted {result.values_reencrypted}, "
        f"refresh tokens re-encrypted {result.credentials_reencrypted}",
        markup=False,
    )


def emulator(
    *,
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = (
        DEFAULT_EMULATOR_HOST
    ),
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port.")] = (
        DEFAULT_EMULATOR_PORT
    ),
    read_per_account: Annotated[
        int | None, typer.Option(min=1, help="Reads per window per account (Google: 60).")
    ] = None,
    write_per_account: Annotated[
        int | None, typer.Option(min=1, help="Writes per window per account (Google: 60).")
    ] = None,
    read_per_project: Annotated[
        int | None, typer.Option(min=1, help="Reads per window per project (Google: 300).")
    ] = None,
    write_per_project: Annotated[
        int | None, typer.Option(min=1, help="Writes per window per project (Google: 300).")
    ] = None,
    window_s: Annotated[
        float | None, typer.Option(min=0.001, help="Quota window in seconds (Google: 60).")
    ] = None,
) -> None:
    """Run the Sheets API emulator (in memory) until interrupted."""
    from sheetsync.emulator import serve

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
    from sheetsync.demo import run_demo

    code = run_demo(keep=keep)
    if code:
        raise typer.Exit(int(code))

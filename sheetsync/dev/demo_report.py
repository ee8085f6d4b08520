"""The end of the demo: the sheets read back, the dead letters, the Sheets API requests,
and the commands to try next, with the environment they need in ``.demo/env``.

Each check returns the problems it found, so the demo fails when an answer of a valid
owner did not land exactly once, or an answer of a revoked owner is not in a PENDING
dead letter. Nothing here prints an answer's value: sheets are read for their id column,
and dead letters hold ids only.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from sheets_emulator import EmulatorAdmin
from sheetsync.deadletters import store
from sheetsync.dev.demo_data import SHEET_TITLE, DemoOwner, DemoSeed, expected_rows
from sheetsync.models import DeadLetter, DeadLetterReason, DeadLetterStatus
from sheetsync.text import clip, relative

#: The variables the read-only ``dlq`` commands need once the demo's stack is gone.
DATABASE_VARIABLE = "SHEETSYNC_DATABASE_URL"
#: Where ``.demo/env`` says the demo's Redis is once the demo has ended: a socket in the
#: demo's directory that nothing listens on. A command that needs Redis (``sheetsync
#: status``) then fails in one line naming it, instead of reporting on whatever Redis
#: the shell's SHEETSYNC_REDIS_URL, or the default localhost:6379, holds.
STOPPED_REDIS_SOCKET = "redis-stopped-with-the-demo.sock"
#: What ``.demo/env`` says once the demo has ended.
ENDED_NOTES = (
    "The demo has ended: its database stays, its Redis stopped with it. SHEETSYNC_REDIS_URL",
    "points where nothing listens, so `sheetsync status` says it cannot reach it rather than",
    "report on another Redis. `sheetsync demo --keep` keeps the demo's Redis up until Ctrl-C.",
)


def report_sheets(
    console: Console, admin: EmulatorAdmin, emulator_url: str, seeded: DemoSeed
) -> list[str]:
    """Rows per sheet, read back from the emulator; returns what is wrong with them."""
    console.print("\nSheets, read back from the emulator:")
    problems: list[str] = []
    in_sheets = 0
    for number, sheet in enumerate(seeded.sheets, start=1):
        values = admin.sheet_values(sheet.spreadsheet_id, sheet.gid)
        ids = [row[0] for row in values[1:] if row]  # below the header row
        in_sheets += len(ids)
        owner = sheet.form.owner
        expected = set() if owner.revoked else set(seeded.ids_by_form[sheet.form])
        duplicates = len(ids) - len(set(ids))
        if duplicates:
            problems.append(f"sheet {number} holds {duplicates} duplicate rows")
        if missing := len(expected - set(ids)):
            problems.append(f"sheet {number} lacks {missing} of its {len(expected)} answers")
        if unexpected := len(set(ids) - expected):
            problems.append(f"sheet {number} holds {unexpected} rows it should not")
        who = f"{owner.plan.value} owner" + (" who revoked Google access" if owner.revoked else "")
        console.print(
            f"  sheet {number}  {sheet.title} / {SHEET_TITLE}  (form “{sheet.form.title}”, "
            f"{who})  {len(ids)} rows" + (f", {duplicates} DUPLICATES" if duplicates else ""),
            markup=False,
        )
        view = f"{emulator_url}/_emulator/spreadsheets/{sheet.spreadsheet_id}/sheets/{sheet.gid}"
        console.print(f"           {view}", markup=False)
    console.print(f"  total    {in_sheets} rows (expected {expected_rows()})")
    return problems


@dataclass(frozen=True)
class DeadLetterView:
    id: int
    user_id: str
    reason: str
    status: str
    answer_count: int


def report_dead_letters(
    console: Console, sessions: sessionmaker[Session], seeded: DemoSeed
) -> tuple[list[DeadLetterView], list[str]]:
    """Every dead letter (ids counted, never listed); returns them and what is wrong:
    every answer of a revoked owner must be in a PENDING CREDENTIAL entry, and no
    other owner may have one."""
    with sessions() as session:
        entries = list(session.scalars(select(DeadLetter).order_by(DeadLetter.id)))
        ids_of = {entry.id: store.answer_ids(session, entry.id) for entry in entries}
    revoked = {owner.user_id for owner in seeded.accounts if owner.revoked}
    console.print("\nDead letters, in the database:")
    if not entries:
        console.print("  none")
    views: list[DeadLetterView] = []
    parked: dict[tuple[str, str, int], set[str]] = {}
    problems: list[str] = []
    for entry in entries:
        view = DeadLetterView(
            entry.id, entry.user_id, entry.reason.value, entry.status.value, len(ids_of[entry.id])
        )
        views.append(view)
        if entry.user_id not in revoked:
            problems.append(f"owner {entry.user_id} has dead letter {entry.id}")
        elif (entry.reason, entry.status) == (
            DeadLetterReason.CREDENTIAL,
            DeadLetterStatus.PENDING,
        ):
            target = (entry.user_id, entry.spread_sheet_id, entry.sheet_id)
            parked.setdefault(target, set()).update(ids_of[entry.id])
        retry = (
            f"retried {relative(entry.next_attempt_at)}"
            if entry.status is DeadLetterStatus.PENDING
            else "not retried on its own"
        )
        console.print(
            f"  dead letter {entry.id}  owner {entry.user_id}  {view.reason}, {view.status}  "
            f"{view.answer_count} answer ids  {retry}",
            markup=False,
        )
        console.print(f"           {clip(entry.error_message, 100)}", markup=False)
    for sheet in seeded.sheets:
        if not sheet.form.owner.revoked:
            continue
        target = (sheet.form.owner.user_id, sheet.spreadsheet_id, sheet.gid)
        expected = set(seeded.ids_by_form[sheet.form])
        if missing := len(expected - parked.get(target, set())):
            problems.append(
                f"{missing} answers of revoked owner {sheet.form.owner.user_id} are not in a "
                "PENDING dead letter"
            )
    return views, problems


def report_requests(console: Console, admin: EmulatorAdmin) -> None:
    """The Sheets API requests the emulator served, and how close they came to quota."""
    stats = admin.stats()
    requests = stats["requests"]
    kinds = ", ".join(f"{kind} {n}" for kind, n in requests["by_kind"].items())
    busiest = max(
        (account["max_in_window"]["all"] for account in stats["by_account"].values()), default=0
    )
    console.print(f"\nSheets API requests: {requests['total']} ({kinds})")
    console.print(
        f"  429 responses: {stats['rate_limited']['total']}; busiest {stats['window_s']:.0f} s "
        f"of one account: {busiest} requests (quota: 60)"
    )


def ended_environment(workdir: Path, database_url: str) -> dict[str, str]:
    """What ``.demo/env`` sets once the demo's stack is gone: its database, and its Redis
    and broker as a socket in ``workdir`` that nothing listens on."""
    stopped = f"unix://{workdir.absolute() / STOPPED_REDIS_SOCKET}"
    return {
        DATABASE_VARIABLE: database_url,
        "SHEETSYNC_REDIS_URL": stopped,
        "SHEETSYNC_BROKER_URL": stopped,
    }


def write_env_file(path: Path, env: Mapping[str, str], notes: Sequence[str] = ()) -> None:
    """``export`` lines for ``source``, after ``notes`` as comments; readable by the user
    alone (it may hold a PII key)."""
    lines = ["# sheetsync demo: `source` this file to point `sheetsync` at the demo's data."]
    lines += [f"# {note}" for note in notes]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")


def venv_script(name: str) -> Path | None:
    """A script installed next to this Python (``.venv/bin/<name>``), if there is one."""
    script = Path(sys.executable).parent / name
    return script if script.exists() else None


def shown(path: Path) -> str:
    """``path`` relative to the current directory when it lies below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def print_next_steps(
    console: Console,
    *,
    keep: bool,
    env_file: Path,
    database_path: Path,
    dead_letters: list[DeadLetterView],
    revoked: list[DemoOwner],
) -> None:
    """The commands to try next, runnable as printed from the current directory."""
    script = venv_script("sheetsync")
    sheetsync = shlex.quote(shown(script)) if script else "sheetsync"
    source = f"source {shlex.quote(shown(env_file))}"
    if keep:
        console.print(
            "\nEverything keeps running until Ctrl-C. Try these in another terminal, "
            "in this directory:"
        )
        commands = [(source, "point sheetsync at the demo's database, Redis and emulator")]
        commands.append((f"{sheetsync} status", "buffers, dead letters, live workers"))
    else:
        console.print(
            f"\nThe database stays in {shown(database_path)}, so the dead letters can be "
            "looked at after the demo. Try:"
        )
        commands = [(source, "points sheetsync at the demo's database")]
    commands.append((f"{sheetsync} dlq list", "every dead letter"))
    for entry in dead_letters:
        commands.append(
            (f"{sheetsync} dlq show {entry.id}", "one of them, its answer ids included")
        )
    if keep:
        for owner in revoked:
            user = shlex.quote(owner.user_id)
            commands += [
                (
                    f"{sheetsync} credentials reconnect {user}",
                    "they authorised Google again: the demo restored their access in the emulator",
                ),
                (f"{sheetsync} dlq replay --user {user} --now", "their answers reach the sheet"),
            ]
        commands.append((f"{sheetsync} dlq list", "now DONE"))
    width = max(len(command) for command, _ in commands)
    for command, note in commands:
        console.print(f"  {command:<{width}}  # {note}", markup=False)
    if script is not None and (activate := venv_script("activate")) is not None:
        console.print(
            f"  or `source {shlex.quote(shown(activate))}` to put `sheetsync` on your PATH",
            markup=False,
        )
    if not keep:
        demo = f"{sheetsync} demo --keep"
        console.print(
            "The emulator, Redis and the worker stopped with the demo, so the sheet URLs "
            "above stop answering, and `sheetsync status` needs the demo's Redis: with "
            f"{shown(env_file)} it says it cannot reach it. Run `{demo}` to keep everything "
            "up until Ctrl-C, and to reconnect the revoked owner and replay their dead letter.",
            markup=False,
        )

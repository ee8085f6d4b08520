"""``make demo-web``: the demo forms in a web app a person can click, on the real pipeline.

The stack of ``sheetsync demo`` (:mod:`sheetsync.dev.demo_stack`: its own redis-server,
SQLite in ``.demo/``, the Sheets API emulator, a real Celery worker, the seeded demo
forms) plus the form web app of ``examples/webapp`` under uvicorn. A person picks a form,
answers it, and the thank-you page links to the sheet in the emulator, where the row
appears within seconds. It prints the URLs and runs until Ctrl-C; everything it started
stops then.

One owner (:attr:`sheetsync.dev.demo_data.DemoOwner.revoked`) has revoked Google access,
as in ``sheetsync demo``: an answer to their form goes to a dead letter, and the owner
hook (``examples/webapp/notifications.py``) is called once; the worker's log shows it.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from sheetsync.dev.demo_data import revoke_access
from sheetsync.dev.demo_report import shown
from sheetsync.dev.demo_stack import (
    DEMO_DIR,
    DemoError,
    run_until_stopped,
    start_stack,
)
from sheetsync.dev.local import (
    free_port,
    stop_process_group,
    wait_until,
)

#: The web app, in the repository (``make demo-web`` runs from a checkout).
WEBAPP_DIR = Path(__file__).resolve().parents[2] / "examples" / "webapp"
#: A short debounce: a person waits for one row.
DEMO_WEB_FLUSH_DELAY_S = 1.0
DEFAULT_PORT = 8000
WEBAPP_START_TIMEOUT_S = 20.0


def run_demo_web(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> int:
    """Run until Ctrl-C (or SIGTERM); returns the exit code."""
    console = Console(highlight=False, soft_wrap=True)
    workdir = Path.cwd() / DEMO_DIR
    return run_until_stopped(console, lambda cleanup: _run(console, cleanup, workdir, host, port))


def _run(console: Console, cleanup: ExitStack, workdir: Path, host: str, port: int) -> None:
    if not (WEBAPP_DIR / "app.py").exists():
        raise DemoError(f"no web app at {WEBAPP_DIR}: run it from a checkout of the repository")
    console.print("[bold]sheetsync demo-web[/]: click a form, watch its row arrive\n")
    stack = start_stack(
        console,
        cleanup,
        workdir,
        flush_delay_s=DEMO_WEB_FLUSH_DELAY_S,
        answers=False,  # a person submits them
        # The owner hook runs in the worker, which imports it from the web app's folder.
        extra_env={"SHEETSYNC_OWNER_HOOK": "notifications:email_owner"},
        extra_path=WEBAPP_DIR,
    )
    for owner in revoke_access(stack.admin, stack.seeded):
        console.print(
            f"revoked   {owner.user_id} withdrew Google access: answers to their form go to a "
            "dead letter, and the owner hook tells them once (see the worker log)",
            markup=False,
        )

    # The operator console (`sheetsync web`), on loopback: with no SHEETSYNC_WEB_TOKEN it
    # serves nothing else, whatever --host the web app was given.
    console_url = f"http://127.0.0.1:{free_port()}"
    console_command = [
        sys.executable, "-m", "sheetsync", "web", "--host", "127.0.0.1",
        "--port", console_url.rpartition(":")[2],
    ]  # fmt: skip
    operator = _start_child(cleanup, console_command, {}, workdir / "console.log")

    webapp_url = f"http://{host}:{port}"
    webapp_command = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(WEBAPP_DIR), "--factory",
        "app:create_app", "--host", host, "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    webapp_env = {"WEBAPP_EMULATOR_URL": stack.emulator.url, "WEBAPP_CONSOLE_URL": console_url}
    webapp = _start_child(cleanup, webapp_command, webapp_env, workdir / "webapp.log")
    for name, child, url, log in (
        ("web app", webapp, webapp_url, "webapp.log"),
        ("console", operator, console_url, "console.log"),
    ):
        if not wait_until(functools.partial(_up_or_exited, child, url), WEBAPP_START_TIMEOUT_S):
            raise DemoError(f"the {name} did not answer within {WEBAPP_START_TIMEOUT_S:.0f} s")
        if child.poll() is not None:
            raise DemoError(
                f"the {name} exited with {child.returncode} (log: {shown(workdir / log)})"
            )
    console.print(f"webapp    uvicorn, pid {webapp.pid}, log {shown(workdir / 'webapp.log')}")
    console.print(
        f"console   sheetsync web, pid {operator.pid}, log {shown(workdir / 'console.log')}"
    )
    console.print(f"\n[bold]Open {webapp_url}/[/] to fill in a form.", markup=True)
    console.print(f"Sheets:   {stack.emulator.url}/_emulator/", markup=False)
    console.print(f"Console:  {console_url}/", markup=False)
    console.print("Press Ctrl-C to stop.")
    while stack.worker.alive and webapp.poll() is None and operator.poll() is None:
        time.sleep(0.5)
    if not stack.worker.alive:
        raise DemoError(f"the Celery worker exited with {stack.worker.process.returncode}")
    if operator.poll() is not None:
        raise DemoError(f"the console exited with {operator.returncode}")
    raise DemoError(f"the web app exited with {webapp.returncode}")


def _start_child(
    cleanup: ExitStack, command: list[str], env: dict[str, str], log_path: Path
) -> subprocess.Popen[bytes]:
    """``command`` in its own process group, with the demo's SHEETSYNC_* environment
    (this process's, set by the stack) plus ``env``; stopped when the demo ends."""
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            command,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cleanup.callback(stop_process_group, child, 10.0)
    return child


def _up_or_exited(child: subprocess.Popen[bytes], url: str) -> bool:
    return child.poll() is not None or _answers(url)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (our own URL)
            return bool(response.status == 200)
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sheetsync.dev.demo_web")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    arguments = parser.parse_args()
    sys.exit(run_demo_web(arguments.host, arguments.port))


if __name__ == "__main__":
    main()

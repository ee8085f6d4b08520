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
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import redis
from rich.console import Console

from sheetsync.dev.demo_data import revoke_access
from sheetsync.dev.demo_report import shown
from sheetsync.dev.demo_stack import (
    DEMO_DIR,
    DemoError,
    DemoStack,
    error_line,
    signals_held,
    sigterm_as_interrupt,
    start_stack,
)
from sheetsync.dev.local import (
    REDIS_INSTALL_HINT,
    RedisNotInstalledError,
    stop_process_group,
    wait_until,
)
from sheetsync.errors import SheetSyncError

#: The web app, in the repository (``make demo-web`` runs from a checkout).
WEBAPP_DIR = Path(__file__).resolve().parents[2] / "examples" / "webapp"
#: A short debounce: a person waits for one row.
DEMO_WEB_FLUSH_DELAY_S = 1.0
DEFAULT_PORT = 8000
WEBAPP_START_TIMEOUT_S = 20.0
EXIT_OK, EXIT_ERROR = 0, 1


def run_demo_web(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> int:
    """Run until Ctrl-C (or SIGTERM); returns the exit code."""
    console = Console(highlight=False, soft_wrap=True)
    workdir = Path.cwd() / DEMO_DIR
    cleanup = ExitStack()
    try:
        with sigterm_as_interrupt():
            _run(console, cleanup, workdir, host, port)
    except RedisNotInstalledError as failure:
        error_line(
            f"the demo starts a redis-server of its own, but {failure}: {REDIS_INSTALL_HINT}"
        )
        return EXIT_ERROR
    except (SheetSyncError, redis.RedisError) as failure:
        error_line(str(failure))
        return EXIT_ERROR
    except KeyboardInterrupt:
        console.print("stopping everything the demo started…")
    finally:
        with signals_held():
            cleanup.close()
    return EXIT_OK


def _run(console: Console, cleanup: ExitStack, workdir: Path, host: str, port: int) -> None:
    if not (WEBAPP_DIR / "app.py").exists():
        raise DemoError(f"no web app at {WEBAPP_DIR}: run it from a checkout of the repository")
    console.print("[bold]sheetsync demo-web[/]: click a form, watch its row arrive\n")
    stack = start_stack(
        console,
        cleanup,
        workdir,
        flush_delay_s=DEMO_WEB_FLUSH_DELAY_S,
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

    # --- the operator console (`sheetsync web`) -------------------------------------------
    # Start it here and set its URL; the thank-you page links to it when set.
    console_url: str | None = os.environ.get("WEBAPP_CONSOLE_URL")
    # ---------------------------------------------------------------------------------------

    webapp_url = f"http://{host}:{port}"
    webapp = _start_webapp(stack, host, port, console_url, workdir / "webapp.log")
    cleanup.callback(stop_process_group, webapp, 10.0)
    if not wait_until(
        lambda: webapp.poll() is not None or _answers(webapp_url), WEBAPP_START_TIMEOUT_S
    ):
        raise DemoError(f"the web app did not answer within {WEBAPP_START_TIMEOUT_S:.0f} s")
    if webapp.poll() is not None:
        raise DemoError(
            f"the web app exited with {webapp.returncode} (log: {shown(workdir / 'webapp.log')})"
        )
    console.print(f"webapp    uvicorn, pid {webapp.pid}, log {shown(workdir / 'webapp.log')}")
    console.print(f"\n[bold]Open {webapp_url}/[/] to fill in a form.", markup=True)
    console.print(f"Sheets:   {stack.emulator.url}/_emulator/", markup=False)
    if console_url:
        console.print(f"Console:  {console_url}", markup=False)
    console.print("Press Ctrl-C to stop.")
    while stack.worker.alive and webapp.poll() is None:
        time.sleep(0.5)
    if not stack.worker.alive:
        raise DemoError(f"the Celery worker exited with {stack.worker.process.returncode}")
    raise DemoError(f"the web app exited with {webapp.returncode}")


def _start_webapp(
    stack: DemoStack, host: str, port: int, console_url: str | None, log_path: Path
) -> subprocess.Popen[bytes]:
    """uvicorn serving ``examples/webapp`` in its own process group, with the demo's
    SHEETSYNC_* environment (this process's, set by the stack)."""
    env = {**os.environ, "WEBAPP_EMULATOR_URL": stack.emulator.url}
    if console_url:
        env["WEBAPP_CONSOLE_URL"] = console_url
    command = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(WEBAPP_DIR), "--factory",
        "app:create_app", "--host", host, "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


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

"""What the install test's steps share: running commands, background servers, waiting."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Seconds a server's start may take.
TIMEOUT_S = 120
#: Seconds a command may take before it counts as hung: a `pip install` of every extra
#: took up to 120 s on a loaded machine (a run beside a CPU hog failed there), so the
#: bound is for hangs, not for speed.
COMMAND_TIMEOUT_S = 600


class InstallTestError(Exception):
    """One check failed; the message says which."""


def log(message: str) -> None:
    print(f"install-test: {message}", flush=True)


def run(
    argv: Sequence[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end; an exit other than 0 is an :class:`InstallTestError`."""
    result = attempt(argv, env=env, cwd=cwd)
    if result.returncode != 0:
        shown = " ".join(str(part) for part in argv)
        output = result.stdout + result.stderr
        raise InstallTestError(f"{shown} exited {result.returncode}:\n{output}")
    return result


def attempt(
    argv: Sequence[str | Path], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end, whatever its exit code."""
    return subprocess.run(
        [str(part) for part in argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def background(
    argv: Sequence[str | Path], env: dict[str, str], cwd: Path, name: str
) -> Iterator[Path]:
    """A process of its own group for the block; its output goes to ``cwd/name.log``."""
    log_path = cwd / f"{name}.log"
    with open(log_path, "wb") as output:
        process = subprocess.Popen(
            [str(part) for part in argv],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            yield log_path
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def wait_for_http(url: str, what: str, log_path: Path) -> bytes:
    """The body ``url`` answers with once ``what`` is up (its log if it never is)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            # Always http://127.0.0.1:<port>/..., built by the caller.
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310
                body: bytes = response.read()
                return body
        except OSError as exc:
            if time.monotonic() > deadline:
                shown = log_path.read_text(errors="replace")
                raise InstallTestError(f"{what} never answered {url} ({exc}):\n{shown}") from None
            time.sleep(0.2)

"""Real Celery worker processes started by tests, killed and stopped by them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

from sheetsync.dispatch import QUEUES
from support.lifetime import dies_with_this_process
from support.paths import ROOT

#: How long a process group is given to stop on SIGTERM before it is killed.
STOP_GRACE_S = 30


def stop_groups(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each process's group, then SIGKILL those still running after the grace.

    Celery lets a SIGTERM that comes while its consumer retries the broker connection go
    by (it connects and consumes on), as a worker left reconnecting by a failover or a
    Redis restart does at a test's end: such a worker is stopped the hard way."""
    for process in processes:
        if process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class WorkerProcesses:
    """Real ``celery -A sheetsync.celery worker`` processes with the test's environment."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        count: int = 1,
        *,
        queues: tuple[str, ...] = QUEUES,
        concurrency: int = 1,
        extra_args: tuple[str, ...] = (),
        source: Path | None = None,
    ) -> list[subprocess.Popen[bytes]]:
        """Start ``count`` workers; ``source``: a directory holding another version's
        ``sheetsync`` package, which they run instead of this one."""
        env = {**os.environ, **self.env}
        if source is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
        started = []
        for _ in range(count):
            n = len(self.procs)
            log = open(self.log_dir / f"worker{n}.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(
                dies_with_this_process(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "sheetsync.celery",
                        "worker",
                        "-P",
                        "prefork",
                        "-c",
                        str(concurrency),
                        "-Q",
                        ",".join(queues),
                        "-n",
                        f"test{n}-{os.getpid()}@%h",
                        "--without-gossip",
                        "--without-mingle",
                        "--loglevel=INFO",
                        *extra_args,
                    ]
                ),
                cwd=source or ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.procs.append(proc)
            started.append(proc)
        return started

    def kill_children(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the pool processes of one worker (the task runs in a child)."""
        out = subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, check=False
        )
        for pid in out.stdout.split():
            with suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)

    def stop(self) -> None:
        stop_groups(self.procs)
        self.procs.clear()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("*.log")))

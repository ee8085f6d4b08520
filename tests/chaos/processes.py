"""The run's Celery processes: workers (one under faketime) and beat. They are killed on
purpose, replaced when they die on their own, and their clocks are checked from their logs."""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sheetsync.dev.local import WORKER_READY_MARKER, stop_process_group
from sheetsync.dispatch import QUEUES

#: ``tests/``, where ``chaos.skewed`` is found.
TESTS = Path(__file__).resolve().parents[1]
#: The name every worker gets after its ``@``: heartbeats are found by it.
HOST = "chaos"
#: A live worker whose heartbeat is this old is stuck: it is replaced.
STUCK_AFTER_S = 45.0
#: A Celery log line: ``[2024-05-01 12:00:00,123: INFO/ForkPoolWorker-1] ...``.
_LOG_LINE = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): \w+/([A-Za-z]+)", re.M)
_UNRECOVERABLE = re.compile(rb"Unrecoverable error: (.{0,160})")


@dataclass
class ChaosProcess:
    role: str
    name: str
    slot: int
    skew_s: int
    popen: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    killed: bool = False
    last_heartbeat: float = field(default_factory=time.monotonic)
    log_offset: int = 0

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def ready(self) -> bool:
        if self.role != "worker":
            return self.alive
        try:
            return self.alive and WORKER_READY_MARKER in self.log_path.read_bytes()
        except OSError:
            return False

    def celery_pid(self) -> int | None:
        """The Celery main process: the child of ``faketime`` for a skewed worker."""
        if not self.skew_s:
            return self.popen.pid
        children = _children(self.popen.pid)
        return children[0] if children else None

    def death_reason(self) -> str:
        try:
            text = self.log_path.read_bytes()
        except OSError:
            return f"exit {self.popen.returncode}"
        found: list[bytes] = _UNRECOVERABLE.findall(text)
        if found:
            return "Unrecoverable error: " + found[-1].decode(errors="replace").strip()
        last = [line for line in text.splitlines() if line.strip()][-1:] or [b""]
        return f"exit {self.popen.returncode}: {last[0].decode(errors='replace')[:160]}"


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in out.stdout.split()]


class Fleet:
    """Workers and beat, with replacements under new names (``w<slot>.<generation>``)."""

    def __init__(
        self, env: Mapping[str, str], log_dir: Path, workers: int, concurrency: int, skew_s: int
    ) -> None:
        self.env = dict(env)
        self.log_dir = log_dir
        self.slots = workers
        self.concurrency = concurrency
        self.skew_s = skew_s
        self.workers: dict[int, ChaosProcess] = {}
        self.beat: ChaosProcess | None = None
        self.retired: list[ChaosProcess] = []
        self._generation: Counter[int] = Counter()
        #: What happened to processes we did not kill: (name, reason).
        self.deaths: list[tuple[str, str]] = []
        self.stuck: list[str] = []
        self.skew_samples: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.RLock()

    # -- starting -----------------------------------------------------------------------

    def start(self) -> None:
        for slot in range(self.slots):
            self._start_worker(slot)
        self._start_beat()

    def wait_ready(self, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        for proc in self.workers.values():
            while not proc.ready():
                if not proc.alive or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {proc.name} did not start: {proc.death_reason()}")
                time.sleep(0.1)

    def _skew_for(self, slot: int) -> int:
        return self.skew_s if slot == self.slots - 1 else 0

    def _start_worker(self, slot: int) -> ChaosProcess:
        generation = self._generation[slot]
        self._generation[slot] += 1
        name = f"w{slot}.{generation}@{HOST}"
        skew = self._skew_for(slot)
        # A skewed worker runs Celery through chaos.skewed (see there why).
        prefix = ["faketime", "-m", "--exclude-monotonic", "-f", f"{skew:+d}"] if skew else []
        command = [
            *prefix,
            *(sys.executable, "-m", "chaos.skewed" if skew else "celery"),
            *("-A", "sheetsync.celery", "worker"),
            *("-P", "prefork", "-c", str(self.concurrency), "-Q", ",".join(QUEUES)),
            *("-n", name, "--without-gossip", "--without-mingle", "--loglevel=INFO"),
        ]
        proc = self._spawn("worker", name, slot, skew, command)
        self.workers[slot] = proc
        return proc

    def _start_beat(self) -> None:
        generation = self._generation[-1]
        self._generation[-1] += 1
        schedule = self.log_dir / f"beat-schedule.{generation}"
        command = [
            *(sys.executable, "-m", "celery", "-A", "sheetsync.celery", "beat"),
            *("--schedule", str(schedule), "--loglevel=INFO"),
        ]
        self.beat = self._spawn("beat", f"beat.{generation}", -1, 0, command)

    def _spawn(
        self, role: str, name: str, slot: int, skew: int, command: list[str]
    ) -> ChaosProcess:
        log_path = self.log_dir / f"{name.partition('@')[0]}.log"
        env = dict(self.env)
        if skew:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                command,
                cwd=self.log_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return ChaosProcess(role, name, slot, skew, popen, log_path)

    # -- faults -------------------------------------------------------------------------

    def kill_pool(self, slot: int) -> int:
        """SIGKILL the pool processes of one worker (its master forks new ones)."""
        with self._lock:
            main = self.workers[slot].celery_pid()
        pids = _children(main) if main else []
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def kill_worker(self, slot: int) -> str:
        """SIGKILL a whole worker (its process group) and start a replacement."""
        with self._lock:
            proc = self.workers[slot]
            proc.killed = True
            with suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
            proc.popen.wait()
            self.retired.append(proc)
            return self._start_worker(slot).name

    # -- watching -----------------------------------------------------------------------

    def check(self, live_names: set[str] | None) -> list[str]:
        """Replace processes that died on their own or stopped beating; returns what
        happened. ``live_names``: the workers with a fresh heartbeat (None: unknown)."""
        with self._lock:
            return self._check(live_names)

    def _check(self, live_names: set[str] | None) -> list[str]:
        events = []
        now = time.monotonic()
        for slot, proc in list(self.workers.items()):
            self._sample_skew(proc)
            if not proc.alive:
                reason = proc.death_reason()
                self.deaths.append((proc.name, reason))
                self.retired.append(proc)
                events.append(
                    f"{proc.name} died ({reason}); replaced by {self._start_worker(slot).name}"
                )
                continue
            if live_names is None or proc.name in live_names or not proc.ready():
                proc.last_heartbeat = now
            elif now - proc.last_heartbeat > STUCK_AFTER_S:
                self.stuck.append(proc.name)
                events.append(
                    f"{proc.name} stuck (no heartbeat); replaced by {self.kill_worker(slot)}"
                )
        if self.beat is not None and not self.beat.alive:
            self.deaths.append((self.beat.name, self.beat.death_reason()))
            self.retired.append(self.beat)
            events.append(f"{self.beat.name} died ({self.beat.death_reason()}); restarted")
            self._start_beat()
        return events

    def _sample_skew(self, proc: ChaosProcess) -> None:
        """Lines a worker logged since the last look were written just now: their
        timestamps against our clock show the worker's (and its pool's) clock offset."""
        try:
            with open(proc.log_path, "rb") as log:
                log.seek(proc.log_offset)
                fresh = log.read()
        except OSError:
            return
        proc.log_offset += len(fresh)
        now = datetime.now()
        kind = "skewed" if proc.skew_s else "normal"
        for stamp, process_name in _LOG_LINE.findall(fresh):
            when = datetime.strptime(stamp.decode(), "%Y-%m-%d %H:%M:%S,%f")
            role = "pool" if process_name.startswith(b"ForkPoolWorker") else "main"
            self.skew_samples[f"{kind} {role}"].append((when - now).total_seconds())

    def measured_skew(self) -> dict[str, float]:
        """Median clock offset per process kind, in seconds."""
        return {k: statistics.median(v) for k, v in sorted(self.skew_samples.items()) if v}

    # -- stopping -----------------------------------------------------------------------

    def all_processes(self) -> list[ChaosProcess]:
        current = [*self.workers.values(), *([self.beat] if self.beat else [])]
        return [*self.retired, *current]

    def stop(self) -> None:
        current = [*self.workers.values(), *([self.beat] if self.beat else [])]
        for proc in current:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.popen.pid, signal.SIGTERM)
        for proc in current:
            stop_process_group(proc.popen, 10.0)
        for proc in self.retired:
            stop_process_group(proc.popen, 0.1)

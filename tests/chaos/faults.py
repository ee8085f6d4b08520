"""The seeded fault schedule and the hands that inject each kind of fault.

The schedule (which fault, when, with which parameters) depends on the seed only; what a
fault hits depends on timing (which batch is in flight, which rows the sheet has).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import text

from chaos import changes
from chaos.config import HANG_S, ChaosConfig
from chaos.processes import Fleet
from chaos.services import RedisServer
from chaos.webapp import WebApp
from sheets_emulator import EmulatorAdmin

#: A worker kill timed to land mid-append waits behind a hang this long (shorter than
#: GOOGLE_TIMEOUT_S: the append commits after the kill).
MID_APPEND_HANG_S = 1.5
#: Rows a person never deletes at the end of a sheet (those may be in flight).
ROWS_KEPT_AT_END = 10
#: A fault that found nothing to act on is tried again this much later.
RETRY_AFTER_S = 2.0
#: A revoked owner is reconnected at the latest this long after the revocation.
REVOKED_AT_MOST_S = 12.0


@dataclass(frozen=True, order=True)
class FaultEvent:
    at_s: float
    kind: str
    index: int

    def rng(self, seed: int) -> random.Random:
        return random.Random(f"{seed}:{self.kind}:{self.index}")


def schedule(config: ChaosConfig) -> list[FaultEvent]:
    """``faults_per_kind`` events of every kind, spread over the emit phase."""
    rng = random.Random(f"{config.seed}:schedule")
    span = config.emit_duration_s
    events = [
        FaultEvent(round(rng.uniform(0.05, 0.92) * span, 3), kind, index)
        for kind in config.kinds
        for index in range(config.faults_per_kind)
    ]
    return sorted(events)


@dataclass(frozen=True)
class RowDeletion:
    spreadsheet_id: str
    gid: int
    answer_ids: tuple[str, ...]
    #: The ledger state of each id when the person deleted its row.
    states: tuple[str, ...]
    at_s: float


@dataclass
class EmulatorFault:
    kind: str
    action: str
    status: int | None
    seconds: float | None
    count: int


@dataclass
class FaultRecord:
    injected: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    emulator: list[EmulatorFault] = field(default_factory=list)
    deletions: list[RowDeletion] = field(default_factory=list)
    revoked_dead_lettered: int = 0
    lines: list[str] = field(default_factory=list)


class Injector:
    def __init__(
        self,
        config: ChaosConfig,
        *,
        redis_server: RedisServer,
        fleet: Fleet,
        admin: EmulatorAdmin,
        webapp: WebApp,
        before_redis_restart: Callable[[], None],
        log_path: Path,
    ) -> None:
        self.config = config
        self.redis_server = redis_server
        self.fleet = fleet
        self.admin = admin
        self.webapp = webapp
        self.before_redis_restart = before_redis_restart
        self.record = FaultRecord()
        self._log_path = log_path
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._handlers: dict[str, Callable[[random.Random], str | None]] = {
            "worker_kill": self._worker_kill,
            "redis_restart": self._redis_restart,
            "google_5xx": self._google_5xx,
            "google_429": self._google_429,
            "google_hang": self._google_hang,
            "google_drop": self._google_drop,
            "reemit": lambda rng: "re-emitted " + ", ".join(self.webapp.reemit(rng)),
            "duplicate_link": self.webapp.add_duplicate_link,
            "form_edit": self.webapp.edit_form,
            "row_delete": self._row_delete,
            "revoke_reconnect": self._revoke_reconnect,
            "answer_edit": lambda rng: changes.edit_answers(self.webapp, rng),
            "answer_delete": lambda rng: changes.delete_answers(self.webapp, rng),
            "erasure": lambda rng: changes.erase_answers(self.webapp, rng),
            "row_sort": lambda rng: changes.sort_rows(self.webapp, self.admin, rng),
            "row_insert": lambda rng: changes.insert_rows(self.webapp, self.admin, rng),
        }

    def now_s(self) -> float:
        return time.monotonic() - self._started

    def log(self, line: str) -> None:
        stamped = f"{self.now_s():8.2f}s {line}"
        with self._lock:
            self.record.lines.append(stamped)
            with open(self._log_path, "a", encoding="utf-8") as out:
                out.write(stamped + "\n")

    def run(self, events: list[FaultEvent], started: float, stop: threading.Event) -> None:
        """Inject ``events`` in order, each at its time after ``started``; a fault that
        finds nothing to act on (a sheet too short) is tried again a little later."""
        self._started = started
        pending = list(events)
        while pending and not stop.is_set():
            event = pending.pop(0)
            delay = started + event.at_s - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            try:
                outcome = self._handlers[event.kind](event.rng(self.config.seed))
            except Exception as exc:
                outcome = f"failed: {type(exc).__name__}: {exc}"
                self.record.skipped[event.kind] += 1
            else:
                if outcome is None and event.at_s < self.config.emit_duration_s:
                    retry = FaultEvent(event.at_s + RETRY_AFTER_S, event.kind, event.index)
                    pending = sorted([*pending, retry])
                    continue
                if outcome is None:
                    outcome = "nothing to act on before the emit phase ended"
                    self.record.skipped[event.kind] += 1
                else:
                    self.record.injected[event.kind] += 1
            self.log(f"{event.kind}#{event.index}: {outcome}")

    # -- processes and Redis ------------------------------------------------------------

    def _worker_kill(self, rng: random.Random) -> str:
        slot = rng.randrange(self.config.workers)
        mode = rng.choice(("pool", "pool", "whole"))
        if rng.random() < 0.5:
            # Timed to land mid-append: an append hangs, and every pool dies during it.
            self.admin.add_fault("values.append", 1, "hang", seconds=MID_APPEND_HANG_S)
            fired = _wait(lambda: not self._hang_pending(), 5.0)
            time.sleep(MID_APPEND_HANG_S / 3)
            killed = sum(self.fleet.kill_pool(s) for s in range(self.config.workers))
            return f"mid-append ({'hit' if fired else 'no append seen'}): {killed} pool processes"
        if mode == "pool":
            return f"w{slot} pool: {self.fleet.kill_pool(slot)} processes"
        return f"w{slot} whole worker; replaced by {self.fleet.kill_worker(slot)}"

    def _hang_pending(self) -> bool:
        return any(
            f["action"] == "hang" and f["seconds"] == MID_APPEND_HANG_S for f in self.admin.faults()
        )

    def _redis_restart(self, rng: random.Random) -> str:
        self.before_redis_restart()
        started = time.monotonic()
        self.redis_server.restart()
        return f"redis-server killed and restarted empty in {time.monotonic() - started:.2f}s"

    # -- Google -------------------------------------------------------------------------

    def _add(
        self,
        rng: random.Random,
        kinds: tuple[str, ...],
        action: str,
        count: int,
        *,
        status: int | None = None,
        seconds: float | None = None,
    ) -> str:
        kind = rng.choice(kinds)
        account = None
        if kind != "token" and rng.random() < 0.5:
            account = self.webapp.account(rng.choice(self.webapp.owners))
        self.admin.add_fault(kind, count, action, status=status, seconds=seconds, account=account)
        self.record.emulator.append(EmulatorFault(kind, action, status, seconds, count))
        detail = f" {status}" if status else ""
        return f"{action}{detail} x{count} on {kind} for {account or 'any account'}"

    def _google_5xx(self, rng: random.Random) -> str:
        # Mostly one or two; sometimes more than RETRY_MAX in a row (a dead letter).
        count = rng.choice((1, 1, 1, 2, 3, 7))
        kinds = (
            "values.append",
            "values.append",
            "values.get",
            "spreadsheets.getByDataFilter",
            "token",
        )
        status = rng.choice((500, 502, 503))
        return self._add(rng, kinds, "error", count, status=status)

    def _google_429(self, rng: random.Random) -> str:
        kinds = ("values.append", "values.append", "any")
        return self._add(rng, kinds, "error", rng.randint(1, 3), status=429)

    def _google_hang(self, rng: random.Random) -> str:
        kinds = ("values.append", "values.append", "values.get", "token")
        return self._add(rng, kinds, "hang", 1, seconds=HANG_S)

    def _google_drop(self, rng: random.Random) -> str:
        return self._add(rng, ("values.append",), "drop", rng.randint(1, 2))

    def pending_emulator_faults(self) -> Counter[str]:
        """Faults not used up, by our kind names (the rest fired)."""
        left: Counter[str] = Counter()
        for fault in self.admin.faults():
            left[_kind_of(fault["action"], fault.get("status"), fault.get("seconds"))] += int(
                fault["count"]
            )
        return left

    # -- people -------------------------------------------------------------------------

    def _row_delete(self, rng: random.Random) -> str | None:
        links = list(self.webapp.links)
        rng.shuffle(links)
        for link in links:
            values = self.admin.sheet_values(link.spreadsheet_id, link.gid)
            body = len(values) - 1
            if body < ROWS_KEPT_AT_END + 5:
                continue
            count = rng.randint(1, 4)
            start = rng.randint(1, body - ROWS_KEPT_AT_END - count + 1)
            ids = tuple(row[0] if row else "" for row in values[start : start + count])
            states = self._ledger_states(ids, link.spreadsheet_id, link.gid)
            self.admin.delete_rows(link.spreadsheet_id, link.gid, start, start + count)
            self.record.deletions.append(
                RowDeletion(link.spreadsheet_id, link.gid, ids, states, self.now_s())
            )
            return f"deleted rows {start + 1}-{start + count} of {link.spreadsheet_id}: {ids}"
        return None  # no sheet long enough yet

    def _ledger_states(
        self, ids: tuple[str, ...], spreadsheet_id: str, gid: int
    ) -> tuple[str, ...]:
        query = text(
            "SELECT submission_answer_id, type FROM sheet_transaction"
            " WHERE spread_sheet_id = :s AND sheet_id = :g"
            " AND submission_answer_id = ANY(:ids)"
        )
        with self.webapp.pipeline.engine.connect() as connection:
            params = {"s": spreadsheet_id, "g": gid, "ids": list(ids)}
            found: dict[str, str] = {a: t for a, t in connection.execute(query, params)}
        return tuple(str(found.get(i, "none")) for i in ids)

    def _revoke_reconnect(self, rng: random.Random) -> str:
        owner = rng.choice(self.webapp.owners)
        hold = rng.uniform(1.0, 4.0)
        self.webapp.revoke(owner)
        parked = _wait(
            lambda: str(self.webapp.credential_status(owner)) != "VALID", REVOKED_AT_MOST_S - hold
        )
        if parked:
            self.record.revoked_dead_lettered += 1
        time.sleep(hold)
        self.webapp.reconnect(owner)
        seen = "credential marked INVALID" if parked else "no flush noticed"
        return f"{owner} revoked, {seen}, reconnected after {hold:.1f}s more"


def _kind_of(action: str, status: int | None, seconds: float | None) -> str:
    if action == "hang":
        return "worker_kill" if seconds == MID_APPEND_HANG_S else "google_hang"
    if action == "drop":
        return "google_drop"
    return "google_429" if status == 429 else "google_5xx"


def _wait(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True

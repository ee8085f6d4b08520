"""The chaos run: the real stack, the web app emitting while faults fire, then quiet, the
accounting of every (answer, sheet) and the PII audit."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import Engine, text
from support.alerts import AlertSink

from chaos.accounting import Accounting, account
from chaos.config import (
    QUOTA_PER_ACCOUNT,
    QUOTA_PER_PROJECT,
    QUOTA_WINDOW_S,
    REQUEST_BYTES_MAX,
    SHORT_TIMINGS,
    ChaosConfig,
)
from chaos.faults import FaultRecord, Injector, schedule
from chaos.pii import PiiAudit
from chaos.processes import Fleet
from chaos.services import Database, RedisServer, child_environment, process_settings
from chaos.webapp import WebApp
from sheets_emulator import EmulatorAdmin, EmulatorServer
from sheetsync.crypto import generate_key
from sheetsync.db import upgrade
from sheetsync.dispatch import set_dispatcher
from sheetsync.ops import heartbeats
from sheetsync.redis_keys import BUFFER_INDEX
from sheetsync.services import get_services
from sheetsync.settings import get_settings

#: Dead letters due this soon still count as work in progress while quiescing.
DUE_SOON_S = 10


@dataclass
class ChaosReport:
    config: ChaosConfig
    log_dir: Path
    accounting: Accounting = field(default_factory=Accounting)
    pii: PiiAudit = field(default_factory=PiiAudit)
    faults: FaultRecord = field(default_factory=FaultRecord)
    #: Emulator fault requests injected but never used, by kind.
    unfired: Counter[str] = field(default_factory=Counter)
    clock_skew: dict[str, float] = field(default_factory=dict)
    deaths: list[tuple[str, str]] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    emulator: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    quiet: bool = False
    quiet_state: str = ""
    emit_failures: list[tuple[str, str]] = field(default_factory=list)
    links_accepted: int = 0
    links_refused: int = 0
    #: Answer id -> "oversized" or "surrogates" (webapp.Journal.hostile).
    hostile: dict[str, str] = field(default_factory=dict)
    #: Answers the app edited, deleted and erased (webapp.Journal).
    edited: int = 0
    deleted: int = 0
    erased: int = 0

    @property
    def ok(self) -> bool:
        return self.accounting.failures == 0 and self.pii.leaks == 0


class Chaos:
    def __init__(self, config: ChaosConfig, *, out: Callable[[str], None] = print) -> None:
        self.config = config
        self.out = out

    def run(self) -> ChaosReport:
        config = self.config
        log_dir = config.log_dir or Path(tempfile.mkdtemp(prefix=f"sheetsync-chaos-{config.seed}-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        report = ChaosReport(config, log_dir)
        started = time.monotonic()
        with ExitStack() as stack:
            redis_server = RedisServer()
            stack.callback(redis_server.stop)
            redis_server.start()
            database = Database(config.postgres_url, config.database_name)
            stack.callback(database.drop)
            database.create()
            emulator = stack.enter_context(EmulatorServer())
            sink = AlertSink()
            stack.callback(sink.close)
            settings = _settings(config, redis_server, database, emulator, sink)
            stack.enter_context(process_settings(settings))
            stack.enter_context(_own_dispatcher())
            stack.enter_context(_captured_logs(log_dir / "webapp.log"))
            upgrade(database.url)
            admin = EmulatorAdmin(emulator.url)
            admin.set_quotas(
                read_per_account=QUOTA_PER_ACCOUNT,
                write_per_account=QUOTA_PER_ACCOUNT,
                read_per_project=QUOTA_PER_PROJECT,
                write_per_project=QUOTA_PER_PROJECT,
                window_s=QUOTA_WINDOW_S,
            )
            admin.set_settings(max_request_bytes=REQUEST_BYTES_MAX)
            webapp = WebApp(config, get_services(), admin)
            webapp.seed()
            env = child_environment(settings)
            fleet = Fleet(env, log_dir, config.workers, config.concurrency, config.skew_s)
            stack.callback(fleet.stop)
            fleet.start()
            fleet.wait_ready()
            report.phases["setup"] = time.monotonic() - started
            self.out(
                f"seed {config.seed}: stack up in {report.phases['setup']:.1f}s "
                f"(redis :{redis_server.port}, {database.name}, logs {log_dir})"
            )
            self._chaos(report, redis_server, fleet, admin, webapp)
            fleet.stop()  # nothing may change while the sheets and the ledger are read
            self._account(report, redis_server, fleet, admin, webapp, sink)
        report.phases["total"] = time.monotonic() - started
        return report

    def _account(
        self,
        report: ChaosReport,
        redis_server: RedisServer,
        fleet: Fleet,
        admin: EmulatorAdmin,
        webapp: WebApp,
        sink: AlertSink,
    ) -> None:
        engine = webapp.pipeline.engine
        journal = webapp.journal
        report.accounting = account(
            engine=engine,
            admin=admin,
            links=webapp.links,
            journal=journal,
            deletions=report.faults.deletions,
        )
        report.pii.scan_redis(redis_server.url, "end")
        report.pii.scan_files(sorted(report.log_dir.glob("*.log")))
        report.pii.scan_alerts(sink.texts)
        report.pii.scan_database(engine)
        report.emulator = admin.stats()
        report.clock_skew = fleet.measured_skew()
        report.deaths = list(fleet.deaths)
        report.stuck = list(fleet.stuck)
        report.emit_failures = list(journal.emit_failures)
        report.links_refused = journal.duplicate_links_refused
        report.hostile = dict(journal.hostile)
        report.edited, report.deleted = len(journal.edited), len(journal.deleted)
        report.erased = len(journal.erased)
        report.links_accepted = report.faults.injected["duplicate_link"] - report.links_refused

    def _chaos(
        self,
        report: ChaosReport,
        redis_server: RedisServer,
        fleet: Fleet,
        admin: EmulatorAdmin,
        webapp: WebApp,
    ) -> None:
        config = self.config

        def before_restart() -> None:
            # Redis is about to lose everything: audit what it held until now.
            report.pii.scan_redis(redis_server.url, f"before restart {redis_server.restarts + 1}")

        injector = Injector(
            config,
            redis_server=redis_server,
            fleet=fleet,
            admin=admin,
            webapp=webapp,
            before_redis_restart=before_restart,
            log_path=report.log_dir / "faults.log",
        )
        report.faults = injector.record
        events = schedule(config)
        revocations = [e for e in events if e.kind == "revoke_reconnect"]
        others = [e for e in events if e.kind != "revoke_reconnect"]
        stop, monitor_stop = threading.Event(), threading.Event()
        started = time.monotonic()
        threads = [
            threading.Thread(target=self._emit, args=(webapp, n, started), name=f"emit{n}")
            for n in range(config.emitters)
        ]
        threads += [
            threading.Thread(target=injector.run, args=(group, started, stop), name=name)
            for name, group in (("faults", others), ("revocations", revocations))
        ]
        monitor = threading.Thread(
            target=_monitor, args=(fleet, redis_server.url, injector, monitor_stop)
        )
        # Daemons: on Ctrl-C or an error the run's services go away; so may they.
        for thread in [monitor, *threads]:
            thread.daemon = True
            thread.start()
        try:
            for thread in threads:
                thread.join()
            report.phases["emit"] = time.monotonic() - started
            report.unfired = injector.pending_emulator_faults()
            admin.clear_faults()
            injector.log(f"emit phase over; unfired emulator faults {dict(report.unfired)}")
            self.out(f"seed {config.seed}: emitted in {report.phases['emit']:.1f}s, quiescing")
            quiet_started = time.monotonic()
            report.quiet, report.quiet_state = self._quiesce(
                webapp.pipeline.engine, redis_server.url
            )
            report.phases["quiesce"] = time.monotonic() - quiet_started
        finally:
            stop.set()
            monitor_stop.set()
        monitor.join()

    def _emit(self, webapp: WebApp, lane: int, started: float) -> None:
        interval = self.config.emit_duration_s / self.config.answers
        for number in range(lane, self.config.answers, self.config.emitters):
            delay = started + number * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the app's traffic arrives over time, not at once
            webapp.emit(number)

    def _quiesce(self, engine: Engine, redis_url: str) -> tuple[bool, str]:
        """Wait until nothing is in progress for ``settle_s`` in a row, or the timeout."""
        deadline = time.monotonic() + self.config.quiesce_timeout_s
        quiet_since: float | None = None
        last_print = 0.0
        state = ""
        while time.monotonic() < deadline:
            busy, state = _in_progress(engine, redis_url)
            now = time.monotonic()
            if busy:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= self.config.settle_s:
                return True, state
            if now - last_print > 15:
                self.out(f"seed {self.config.seed}: quiescing: {state}")
                last_print = now
            time.sleep(0.5)
        return False, state


def _settings(
    config: ChaosConfig,
    redis_server: RedisServer,
    database: Database,
    emulator: EmulatorServer,
    sink: AlertSink,
) -> dict[str, str]:
    """The SHEETSYNC_* environment of every process of the run, the web app's included."""
    return {
        "SHEETSYNC_REDIS_URL": redis_server.url,
        "SHEETSYNC_BROKER_URL": redis_server.broker_url,
        "SHEETSYNC_DATABASE_URL": database.url,
        "SHEETSYNC_PII_KEYS": generate_key(),
        "SHEETSYNC_GOOGLE_API_ENDPOINT": emulator.url,
        "SHEETSYNC_GOOGLE_TOKEN_URI": emulator.token_uri,
        "SHEETSYNC_GOOGLE_CLIENT_ID": "sheetsync-chaos",
        "SHEETSYNC_GOOGLE_CLIENT_SECRET": "not-a-secret",
        "SHEETSYNC_DEVELOPMENT": "true",  # the emulator stands in for Google
        "SHEETSYNC_ALERT_WEBHOOK_URL": sink.url,
        **{f"SHEETSYNC_{name}": value for name, value in SHORT_TIMINGS.items()},
        **{f"SHEETSYNC_{k.upper()}": v for k, v in config.extra_settings.items()},
    }


def _in_progress(engine: Engine, redis_url: str) -> tuple[bool, str]:
    with engine.connect() as connection:
        enqueued = connection.scalar(
            text("SELECT count(*) FROM sheet_transaction WHERE type = 'ENQUEUED'")
        )
        dead_letters = connection.scalar(
            text(
                "SELECT count(*) FROM dead_letter WHERE status = 'REPLAYING' OR "
                f"(status = 'PENDING' AND next_attempt_at < now() + interval '{DUE_SOON_S} s')"
            )
        )
    client = redis.Redis.from_url(redis_url, socket_timeout=2)
    try:
        buffers: int | str = client.zcard(BUFFER_INDEX)
    except redis.RedisError as exc:
        buffers = type(exc).__name__
    finally:
        client.close()
    state = f"{enqueued} ENQUEUED, {dead_letters} dead letters replaying or due, {buffers} buffers"
    return bool(enqueued or dead_letters or buffers), state


def _monitor(fleet: Fleet, redis_url: str, injector: Injector, stop: threading.Event) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1)
    try:
        while not stop.wait(0.5):
            live: set[str] | None
            try:
                live = {beat.name for beat in heartbeats.live(client)}
            except redis.RedisError:
                live = None
            for event in fleet.check(live):
                injector.log(f"monitor: {event}")
    finally:
        client.close()


@contextmanager
def _own_dispatcher() -> Iterator[None]:
    # The web app's sends go through a Celery app of its own on the run's broker (the
    # packaged app may hold a connection pool to another broker in a test session).
    from celery import Celery

    from sheetsync.celery.config import config_for
    from sheetsync.celery.dispatcher import CeleryDispatcher

    app = Celery("sheetsync-chaos-webapp", set_as_current=False)
    app.conf.update(config_for(get_settings()))
    set_dispatcher(CeleryDispatcher(app))
    try:
        yield
    finally:
        set_dispatcher(None)
        app.close()


@contextmanager
def _captured_logs(path: Path) -> Iterator[None]:
    """The web app's own log lines (sheetsync's, Celery's) go to a file the audit reads."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.INFO) if level else logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()

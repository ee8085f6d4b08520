"""The metrics endpoint during a real run: real worker processes, the emulator, and
``sheetsync metrics`` scraped over HTTP. The values move as the pipeline works, and a
rate-limited buffer's oldest age keeps growing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from support.scrape import Scraper, metrics_endpoint
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.services import get_services

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "sheetsync.json"
APPEND = "spreadsheets.values.append"


def test_values_move_during_a_real_run(world, worker_processes, admin, tmp_path):
    workers = worker_processes(rate_limit_per_account=20, rate_window_s=60)
    env = workers.env
    healthy, gone, revoked, limited = (
        world.form(name) for name in ("healthy", "gone", "revoked", "limited")
    )
    healthy_sheet = world.sheet(healthy)
    admin.delete_spreadsheet(world.sheet(gone).spreadsheet_id)
    world.sheet(revoked)
    world.sheet(limited)
    admin.revoke("google-revoked")
    admin.add_fault("values.append", 1, "error", status=429, account="google-healthy")
    for _ in range(20):  # the limited owner's window is full for a minute
        get_services().limiter.take("google-limited")

    with metrics_endpoint({**os.environ, **env}, tmp_path) as scrape:
        before = scrape.samples()
        assert before[("sheetsync_rows_appended_total", frozenset())] == 0
        assert scrape.value("sheetsync_source_up", source="redis") == 1
        assert scrape.value("sheetsync_source_up", source="database") == 1
        workers.start()
        for form in (healthy, gone, revoked, limited):
            for answer_id in world.answers(form, 3, prefix=form.owner_id):
                emit_answer_submitted(answer_id)

        wait_until(lambda: len(world.ids_in(healthy_sheet)) == 3, timeout=30)
        wait_until(lambda: scrape.value("sheetsync_rows_appended_total") == 3, timeout=15)
        wait_until(
            lambda: _dead_letters(scrape) == {("FAILED", "PERMANENT"), ("PENDING", "CREDENTIAL")}
        )
        now = scrape.samples()
        assert (
            now[_key("sheetsync_sheets_requests_total", kind=APPEND, outcome="rate_limited")] >= 1
        )
        assert now[_key("sheetsync_sheets_requests_total", kind=APPEND, outcome="ok")] >= 1
        assert now[_key("sheetsync_ledger_transitions_total", to="ENQUEUED")] == 12
        assert now[_key("sheetsync_ledger_transitions_total", to="COMPLETED")] == 3
        assert now[_key("sheetsync_ledger_transitions_total", to="DEAD_LETTERED")] >= 3
        assert now[_key("sheetsync_credentials", status="INVALID")] == 1
        assert now[_key("sheetsync_flush_duration_seconds_count")] >= 2
        assert now[_key("sheetsync_batch_size_rows_count")] == 1  # one append of 3 rows
        assert now[_key("sheetsync_batch_size_rows_bucket", le="5.0")] == 1
        assert now[_key("sheetsync_batch_size_rows_bucket", le="1.0")] == 0
        assert now[_key("sheetsync_limiter_accounts", use="full")] == 1
        assert now[_key("sheetsync_limiter_account_used_max")] == 20

        # The limited buffer waits for its slot: its depth stays, its age keeps growing.
        first_age = now[_key("sheetsync_buffer_oldest_age_seconds")]
        assert now[_key("sheetsync_buffer_depth")] == 3
        assert now[_key("sheetsync_jobs", state="scheduled")] == 1

        def aged() -> bool:
            later = scrape.samples()
            return (
                later[_key("sheetsync_buffer_depth")] == 3
                and later[_key("sheetsync_buffer_oldest_age_seconds")] >= first_age + 1.5
            )

        wait_until(aged, timeout=10)
        # It waits at the quota, parked (its account's window is full), and its account
        # is the busiest one named, the only one with writes in its window.
        later = scrape.samples()
        assert later[_key("sheetsync_limiter_waiting_buffers", kind="write", state="parked")] == 1
        assert later[_key("sheetsync_limiter_waiting_buffers", kind="write", state="queued")] == 0
        busiest = {
            dict(labels)["account"]: value
            for (name, labels), value in later.items()
            if name == "sheetsync_limiter_busiest_account_used" and dict(labels)["kind"] == "write"
        }
        assert busiest["google-limited"] == 20 and len(busiest) <= 5
        assert later[_key("sheetsync_limiter_window_used", kind="write")] >= 20
        assert later[_key("sheetsync_limiter_window_limit", kind="read")] >= 1
        assert world.ids_in(healthy_sheet) and scrape.value("sheetsync_rows_appended_total") == 3
        _check_dashboard(scrape)


def _key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def _dead_letters(scrape: Scraper) -> set[tuple[str, str]]:
    return {
        (dict(labels)["status"], dict(labels)["reason"])
        for (name, labels), value in scrape.samples().items()
        if name == "sheetsync_dead_letters" and value > 0
    }


def _check_dashboard(scrape: Scraper) -> None:
    """Every metric the Grafana dashboard queries is one the endpoint serves."""
    served = set(scrape.families) | {name for name, _ in scrape.samples()}
    exprs = [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]
    assert len(exprs) >= 10
    used = {name for expr in exprs for name in re.findall(r"\bsheetsync_[a-z_]+", expr)}
    assert used and used <= served, used - served

"""Two Google Cloud projects saturated at once: owners who consented to different OAuth
clients are paced by their own project's windows, each full at the same time, with no
429 from the emulator (which counts each client's requests in its own project). Scaled
down in time: a 2 s window, 6 writes per project in it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import update
from support.waiting import wait_until
from support.world import World

from sheetsync import emit_answers_submitted
from sheetsync.models import GoogleCredential
from sheetsync.ops.status import collect_limiter
from sheetsync.services import get_services

WINDOW_S = 2.0
PER_PROJECT = 6
SHEETS = 3
PER_SHEET = 30
#: The other client, and the Cloud project the emulator puts it in.
OTHER, OTHER_CLIENT_ID, OTHER_PROJECT = "acme", "acme-client", "222222222222"
#: The emulator's own project, where every other client is.
DEFAULT_PROJECT = "123456789012"
SETTINGS = {
    "rate_window_s": WINDOW_S,
    "rate_margin_s": 0.05,
    "rate_limit_per_account": PER_PROJECT,
    "rate_limit_per_project": PER_PROJECT,
    "flush_delay_s": 0.3,
    "flush_idle_s": 0.2,
    "batch_size": 5,
    "flush_threshold": 5,
    "lease_s": 20,
}


@pytest.mark.slow  # two backlogs of about 10 s each, drained at once
def test_two_projects_each_fill_their_own_window_at_once_without_a_429(
    world: World, worker_processes: Callable[..., object], tmp_path: Path
) -> None:
    clients = tmp_path / "google-clients.json"
    clients.write_text(
        json.dumps({OTHER: {"client_id": OTHER_CLIENT_ID, "client_secret": "acme-secret"}})
    )
    workers = worker_processes(**SETTINGS, google_clients_file=clients)
    answers: dict[str, list[str]] = {}
    for owner in ("home", OTHER):
        form = world.form(owner)
        for n in range(SHEETS):
            world.sheet(form, f"Responses {n}")
        answers[owner] = world.answers(form, PER_SHEET, prefix=f"{owner}-")
    with world.pipeline.sessions.begin() as session:
        session.execute(
            update(GoogleCredential)
            .where(GoogleCredential.user_id == OTHER)
            .values(google_client=OTHER)
        )
    world.admin.set_quotas(
        read_per_account=PER_PROJECT,
        write_per_account=PER_PROJECT,
        read_per_project=PER_PROJECT,
        write_per_project=PER_PROJECT,
        window_s=WINDOW_S,
    )
    world.admin.set_projects({OTHER_CLIENT_ID: OTHER_PROJECT})
    world.admin.reset_stats()
    workers.start(2, concurrency=3)  # type: ignore[attr-defined]

    both_full: list[float] = []
    full_in_status: list[bool] = []

    def drained() -> bool:
        # As the emulator counts them: each project's writes in its current window.
        use = world.admin.stats()["quota_usage"]["by_project"]
        if all(use.get(p, {}).get("project", {}).get("write") == PER_PROJECT for p in projects):
            both_full.append(time.monotonic())
            if not full_in_status:  # what `sheetsync status` and the console read
                shown = collect_limiter(get_services())["projects"]
                if all(w["write"]["used"] == PER_PROJECT for w in shown.values()):
                    full_in_status.append(True)
        return world.ledger_counts() == {"COMPLETED": 2 * SHEETS * PER_SHEET}

    projects = (DEFAULT_PROJECT, OTHER_PROJECT)

    emit_answers_submitted(answers["home"] + answers[OTHER])
    wait_until(drained, timeout=120, interval=0.02)

    stats = world.admin.stats()
    assert stats["rate_limited"]["total"] == 0, stats["rate_limited"]
    assert both_full, "the two projects' windows were never full at the same moment"
    # sheetsync kept a window per project, each with its own limit, and shows each.
    home = get_services().limiter
    other = home.for_client(OTHER)
    assert (home.google_client, other.google_client) == ("default", OTHER)
    assert other.usage().limit == home.usage().limit == PER_PROJECT
    shown = collect_limiter(get_services())["projects"]
    assert set(shown) == {"default", OTHER}
    assert {name: use["write"]["limit"] for name, use in shown.items()} == {
        "default": PER_PROJECT,
        OTHER: PER_PROJECT,
    }
    assert full_in_status, "status never showed both projects' windows full"
    rows = {row["account"]: row["client"] for row in collect_limiter(get_services())["accounts"]}
    assert rows == {"google-home": "default", f"google-{OTHER}": OTHER}

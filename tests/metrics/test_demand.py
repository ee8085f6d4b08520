"""The demand on worker processes (sheetsync/ops/demand.py), on the real pipeline: real
emits into Redis, the real limiter, the exporter's ``GET /demand`` served by a real
``sheetsync metrics`` process, and Celery's queue beside it (docs/operating/autoscaling.md)."""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
import redis
from support.redis_dbs import broker_url_for
from support.scrape import free_port, metrics_endpoint
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.dispatch import QUEUE_DEFAULT, QUEUE_PRIORITY
from sheetsync.exporter.server import app_for
from sheetsync.models import Plan
from sheetsync.ops import demand, heartbeats
from sheetsync.redis_keys import BufferKey
from sheetsync.services import Services, get_services

DOCS = "docs/operating/autoscaling.md"


def now(queue: str | None = None) -> demand.Demand:
    return demand.read(get_services(), 10_000).demand(queue)


def due_sheets(
    world: Any, count: int, *, owner: str = "due", plan: Plan = Plan.FREE
) -> list[BufferKey]:
    """``count`` owners (``<owner>0``...), each with a sheet and two answers emitted."""
    keys = []
    for n in range(count):
        form = world.form(f"{owner}{n}", plan=plan)
        sheet = world.sheet(form)
        for answer_id in world.answers(form, 2, prefix=f"{owner}{n}"):
            emit_answer_submitted(answer_id)
        keys.append(BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid))
    return keys


def test_an_idle_pipeline_needs_no_process(pipeline: Services) -> None:
    idle = now()
    assert idle.worker_processes == 0
    assert (idle.buffers_due, idle.buffers_waiting, idle.ids_waiting) == (0, 0, 0)
    assert idle.quota_waiting_runs == 0
    assert idle.write_slots_project == pipeline.settings.rate_limit("write", "project")


def test_each_due_sheet_is_one_process_while_the_quota_is_free(
    world, pipeline_env, monkeypatch
) -> None:
    monkeypatch.setattr(demand, "CHUNK", 2)  # the buffers in four calls of one round trip
    pipeline_env(flush_delay_s=600)  # their debounce outlasts the test: not due
    due_sheets(world, 4, owner="later")
    waiting = now()
    assert (waiting.buffers_waiting, waiting.ids_waiting, waiting.worker_processes) == (4, 8, 0)

    pipeline_env(flush_delay_s=0.2)
    due_sheets(world, 3, owner="soon")
    wait_until(lambda: now().buffers_due == 3, timeout=30)
    later = now()
    assert later.worker_processes == 3
    assert (later.buffers_waiting, later.ids_waiting) == (4, 14)
    assert later.buffers_counted == later.buffers_total == 7
    oldest = demand.read(get_services(), 4).demand()  # the four waiting ones came first
    assert (oldest.buffers_counted, oldest.buffers_total, oldest.worker_processes) == (4, 7, 0)


def test_a_spent_project_quota_caps_the_demand_at_its_free_slots(world, pipeline_env) -> None:
    pipeline_env(flush_delay_s=0.2, rate_limit_per_project=5)
    limiter = get_services().limiter
    for _ in range(3):  # another owner's writes in the window (60 s: they stay)
        limiter.take("google-elsewhere")
    due_sheets(world, 4)
    wait_until(lambda: now().buffers_due == 4, timeout=30)
    capped = now()
    assert capped.write_slots_project == 2
    assert capped.worker_processes == 2  # not 4: two of them would only wait

    limiter.take("google-elsewhere")
    limiter.take("google-elsewhere")
    spent = now()
    assert (spent.buffers_due, spent.write_slots_project, spent.worker_processes) == (4, 0, 0)


def test_a_due_sheet_whose_account_is_full_is_no_demand(world, pipeline_env) -> None:
    pipeline_env(flush_delay_s=0.2, rate_limit_per_account=2)
    services = get_services()
    full, _ = due_sheets(world, 2)
    for _ in range(2):
        services.limiter.take("google-due0")
    # Its run asked for a slot: its turn names its account (the quota parks it).
    assert services.limiter.reserve("google-due0", full.base) > 0
    wait_until(lambda: now().buffers_due == 2, timeout=30)
    parked = now()
    assert parked.quota_waiting_runs == 1
    assert parked.write_slots_accounts == 0
    assert parked.worker_processes == 1  # the other owner's sheet


def test_the_exporter_serves_the_demand_keda_reads(world, pipeline_env, tmp_path) -> None:
    env = pipeline_env(flush_delay_s=0.2)
    due_sheets(world, 2)  # FREE owners: the default queue
    due_sheets(world, 1, owner="paying", plan=Plan.PRO)  # the priority queue
    wait_until(lambda: now().buffers_due == 3, timeout=30)

    with metrics_endpoint({**os.environ, **env}, tmp_path) as scrape:
        url = scrape.url.removesuffix("/metrics") + "/demand"
        body = _get_json(url)
        assert body["worker_processes"] == 3  # what KEDA's valueLocation reads
        assert body["buffers_due"] == 3 and body["buffers_waiting"] == 0
        assert body["ids_waiting"] == 6 and body["quota_waiting_runs"] == 0
        assert body["write_slots_next_minute"]["project"] == 100_000
        assert _get_json(f"{url}?queue={QUEUE_DEFAULT}")["worker_processes"] == 2
        assert _get_json(f"{url}?queue={QUEUE_PRIORITY}")["worker_processes"] == 1
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get_json(f"{url}?queue=nope")
        assert refused.value.code == 400
        assert scrape.value("sheetsync_worker_demand") == 3
        assert scrape.value("sheetsync_worker_demand_buffers", state="due") == 3
        assert scrape.value("sheetsync_worker_demand_write_slots", scope="project") == 100_000


def test_an_unreadable_redis_is_a_503(pipeline: Services) -> None:
    dead = redis.Redis(port=free_port(), socket_connect_timeout=1)
    services = Services.build(pipeline.settings, engine=pipeline.engine, client=dead)
    environ: dict[str, Any] = {"PATH_INFO": "/demand", "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    answered: list[str] = []
    body = b"".join(app_for(services)(environ, lambda status, _: answered.append(status)))
    assert answered == ["503 Service Unavailable"]
    assert json.loads(body) == {"error": "Redis unreadable"}


def test_a_long_celery_queue_can_be_no_demand(world, pipeline_env, redis_url) -> None:
    """No worker runs: every due buffer's message waits in the broker, and the project's
    quota is spent, so each run would only be told to come back."""
    pipeline_env(flush_delay_s=0.2, rate_limit_per_project=1)
    get_services().limiter.take("google-elsewhere")
    broker = redis.Redis.from_url(broker_url_for(redis_url))
    due_sheets(world, 4)
    wait_until(lambda: now().buffers_due == 4, timeout=30)
    assert broker.llen(QUEUE_DEFAULT) == 4
    assert now().worker_processes == 0


def test_an_empty_celery_queue_can_hide_the_backlog(world, worker_processes, redis_url) -> None:
    """The worker took every countdown message (unacked, held until due) and cannot run
    them: stopped here, busy in production. The broker's queue is empty; the demand is
    every due sheet."""
    workers = worker_processes(flush_delay_s=5)
    [proc] = workers.start(1, concurrency=1)
    client = get_services().redis
    wait_until(lambda: any(b.role == "worker" for b in heartbeats.live(client)), timeout=60)
    broker = redis.Redis.from_url(broker_url_for(redis_url))
    keys = due_sheets(world, 3)
    wait_until(lambda: not broker.llen(QUEUE_DEFAULT) and broker.hlen("unacked") == 3, timeout=30)
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: now().buffers_due == 3, timeout=60)
        stalled = now()
        assert broker.llen(QUEUE_DEFAULT) == 0
        assert (stalled.worker_processes, stalled.ids_waiting) == (3, 6)
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
    wait_until(lambda: now().ids_waiting == 0 and now().worker_processes == 0, timeout=60)
    assert len(keys) == 3


def test_the_docs_state_the_formula_and_the_endpoint() -> None:
    from support.paths import ROOT

    text = (ROOT / DOCS).read_text()
    formula = "running + min(project_free, sum_a min(due_a, free_a) + due_unknown)"
    assert formula in text
    assert formula in (demand.__doc__ or "")
    assert "GET /demand" in text and "worker_processes" in text


def _get_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.headers["Content-Type"] == "application/json"
        body: dict[str, Any] = json.loads(reply.read())
        return body


def test_each_project_feeds_its_own_due_buffers() -> None:
    """Two OAuth clients' projects: a full one feeds none of its due buffers, the other
    feeds its own up to its free slots, and buffers of no known project share the rest."""
    from sheetsync.ops.demand import BufferState, QuotaNow, Snapshot

    due = [BufferState("due", 5, "q", f"acct-{n}", "default") for n in range(3)]
    due += [BufferState("due", 5, "q", f"acct-{n}", "acme") for n in range(4)]
    due += [BufferState("due", 5, "q"), BufferState("running", 5, "q")]
    snapshot = Snapshot(
        buffers=tuple(due),
        buffers_total=len(due),
        quota={"default": QuotaNow(0, 0, ()), "acme": QuotaNow(3, 0, ())},
        account_free={
            **{("default", f"acct-{n}"): 60 for n in range(3)},
            **{("acme", f"acct-{n}"): 60 for n in range(4)},
        },
    )
    demand = snapshot.demand()
    # running 1 + min(0 + 3 fed by acme's 3 free slots + 1 unknown, 3 free in all)
    assert (demand.worker_processes, demand.write_slots_project) == (4, 3)
    assert demand.buffers_due == 8

"""Clocks that are off, a reconnect during a run, and Redis restarting under the workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support.paths import ROOT
from support.processes import stop_groups
from support.waiting import wait_until

from sheetsync import credential_reconnected, crypto, emit_answer_submitted
from sheetsync.models import CredentialStatus, GoogleCredential
from sheetsync.recovery import repair
from sheetsync.redis_keys import BufferKey
from sheetsync.services import get_services

SKEW_S = 45.0


class SkewedClock:
    """This host's wall clock, ``offset_s`` off (Redis's own clock is right)."""

    def __init__(self, monkeypatch, offset_s: float) -> None:
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + offset_s)


def redis_now_ms(client) -> float:
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


@pytest.mark.timing
def test_a_web_host_clock_45s_off_does_not_move_the_debounce(world, pipeline_env, monkeypatch):
    pipeline_env(flush_delay_s=5)
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    with monkeypatch.context() as patch:
        SkewedClock(patch, -SKEW_S)
        emit_answer_submitted(answer_id)
    due_at = float(world.pipeline.store.job_state(key)["due_at"])
    due_in_s = (due_at - redis_now_ms(world.pipeline.redis)) / 1000
    assert 4 < due_in_s <= 5


def test_a_sweeper_clock_45s_fast_does_not_resend_every_job(world, pipeline_env, monkeypatch):
    pipeline_env(flush_delay_s=5, sweep_grace_s=1)
    form = world.form()
    sheets = [world.sheet(form, f"T{n}") for n in range(3)]
    [answer_id] = world.answers(form, 1)
    emit_answer_submitted(answer_id)
    with monkeypatch.context() as patch:
        SkewedClock(patch, SKEW_S)
        resent = repair.sweep(world.pipeline)
    assert resent == [], f"{len(resent)} of {len(sheets)} jobs re-sent by a fast clock"


@pytest.mark.timing
def test_a_worker_clock_45s_slow_keeps_a_full_lease(world, pipeline_env, monkeypatch):
    pipeline_env(lease_s=10)
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    key = BufferKey(form.owner_id, form.submission_id, sheet.spreadsheet_id, sheet.gid)
    emit_answer_submitted(answer_id)
    store = get_services().store  # with lease_s=10 (world's pipeline predates it)
    token = store.job_state(key)["token"]
    with monkeypatch.context() as patch:
        SkewedClock(patch, -SKEW_S)
        assert store.claim(key, token)
    lease_until = float(store.job_state(key)["lease_until"])
    lease_left_s = (lease_until - redis_now_ms(world.pipeline.redis)) / 1000
    assert 9 < lease_left_s <= 10


def test_a_reconnect_during_a_run_is_not_undone(world, worker, admin):
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)
    account = f"google-{form.owner_id}"
    admin.revoke(account)  # the owner revoked access...
    admin.add_fault("token", 1, "hang", seconds=1.0)  # well inside GOOGLE_TIMEOUT_S (2 s)
    for answer_id in ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: admin.stats()["faults_fired"], timeout=20)
    # ...and reconnects while a run that read the old credential waits for Google.
    admin.add_account(account, "refresh-after-reconnect")
    with world.pipeline.sessions.begin() as session:
        credential = session.get(GoogleCredential, form.owner_id)
        credential.refresh_token = crypto.encrypt_refresh_token(
            "refresh-after-reconnect", user_id=form.owner_id
        )
    credential_reconnected(form.owner_id)

    wait_until(lambda: world.ids_in(sheet) == ids, timeout=30)
    with world.pipeline.sessions() as session:
        assert session.get(GoogleCredential, form.owner_id).status is CredentialStatus.VALID


@pytest.mark.slow
def test_workers_and_beat_ride_out_a_redis_restart(world, pipeline_env, tmp_path):
    """Redis restarts (losing everything) mid-run: every process lives, every answer lands once."""
    from sheetsync.dev.local import free_port, start_redis_server

    port = free_port()
    server = start_redis_server(port=port)
    env = pipeline_env(
        redis_url=f"redis://127.0.0.1:{port}/0",
        broker_url=f"redis://127.0.0.1:{port}/1",
        flush_delay_s=3,
        sweep_interval_s=1,
        sweep_grace_s=1,
        reconcile_interval_s=1,
        reconcile_after_s=1,
        dlq_dispatch_interval_s=1,
    )
    logs = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        log = open(tmp_path / f"proc{len(logs)}.log", "wb")  # noqa: SIM115
        logs.append(log)
        command = [sys.executable, "-m", "celery", "-A", "sheetsync.celery", *args]
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    processes = [
        start("worker", "-c", "2", "-n", f"w1-{os.getpid()}@%h", "--loglevel=INFO"),
        start("worker", "-c", "1", "-n", f"w2-{os.getpid()}@%h", "--loglevel=INFO"),
        start("beat", "--schedule", str(tmp_path / "beat-schedule"), "--loglevel=INFO"),
    ]
    try:
        form = world.form()
        sheets = [world.sheet(form, f"T{n}") for n in range(2)]
        before = world.answers(form, 40, prefix="before")
        held = world.answers(form, 10, prefix="held")
        during = world.answers(form, 20, prefix="during")
        after = world.answers(form, 20, prefix="after")
        for answer_id in before:
            emit_answer_submitted(answer_id)
        wait_until(lambda: all(world.ids_in(s) for s in sheets), timeout=30)
        for answer_id in held:  # their flush tasks wait in the workers (a 3 s countdown)
            emit_answer_submitted(answer_id)

        server.stop()  # SIGTERM, then SIGKILL: nothing is saved
        for answer_id in during:  # the web app keeps taking answers
            emit_answer_submitted(answer_id)
        for number in (0, 1):  # both workers noticed the lost connection
            wait_until(
                lambda n=number: (
                    b"Connection to broker lost" in (tmp_path / f"proc{n}.log").read_bytes()
                ),
                timeout=30,
            )
        server = start_redis_server(port=port)
        for answer_id in after:
            emit_answer_submitted(answer_id)

        everything = before + held + during + after
        for sheet in sheets:
            wait_until(
                lambda sheet=sheet: sorted(world.ids_in(sheet)) == sorted(everything), timeout=90
            )
        assert all(p.poll() is None for p in processes), "a worker or beat process died"
        for sheet in sheets:
            assert len(world.ids_in(sheet)) == len(everything)
    finally:
        stop_groups(processes)
        for log in logs:
            log.close()
        server.stop()

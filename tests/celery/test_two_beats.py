"""Two beat processes at once (a rolling update) send each periodic job once per
interval (``sheetsync.celery.beat``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import redis
from support.paths import ROOT
from support.redis_dbs import broker_url_for
from support.waiting import wait_until

from sheetsync.celery.beat import SHARE, ClaimJob
from sheetsync.dispatch import QUEUE_SCHEDULED
from sheetsync.lua.contract import Scripts
from sheetsync.redis_keys import beat_claim_key

JOBS = ("sheetsync.sweep", "sheetsync.reconcile", "sheetsync.dispatch_dead_letters")
INTERVAL_S = 1.0
WINDOW_S = 6.0


def test_a_job_is_granted_once_per_share_of_its_interval(redis_url):
    scripts = Scripts(redis.Redis.from_url(redis_url))
    interval_ms = 400
    job = ClaimJob(last=beat_claim_key("sheetsync-sweep"), interval_ms=interval_ms, share=SHARE)
    clock = scripts.redis

    def redis_ms() -> float:
        seconds, micros = clock.time()
        return seconds * 1000 + micros / 1000

    granted_at = redis_ms()
    assert scripts.run(job) is True
    assert scripts.run(job) is False  # a second beat, the same moment
    wait_until(lambda: redis_ms() - granted_at >= interval_ms * SHARE + 1, interval=0.01)
    assert scripts.run(job) is True
    assert scripts.run(job) is False


def sent_jobs(broker: redis.Redis) -> Counter[str]:
    messages = broker.lrange(QUEUE_SCHEDULED, 0, -1)
    return Counter(json.loads(m)["headers"]["task"] for m in messages)


def test_two_beats_send_each_periodic_job_once_per_interval(pipeline_env, redis_url, tmp_path):
    env = pipeline_env(
        sweep_interval_s=INTERVAL_S,
        reconcile_interval_s=INTERVAL_S,
        dlq_dispatch_interval_s=INTERVAL_S,
    )
    broker = redis.Redis.from_url(broker_url_for(redis_url))
    beats: list[subprocess.Popen[bytes]] = []
    for n in range(2):
        with open(tmp_path / f"beat{n}.log", "wb") as log:
            beats.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "sheetsync.celery",
                        "beat",
                        "--schedule",
                        str(tmp_path / f"schedule{n}"),
                        "--loglevel=DEBUG",
                    ],
                    cwd=ROOT,
                    env={**os.environ, **env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    try:
        # Both beats tick: each has sent a job or had one refused (the other sent it).
        def both_tick() -> bool:
            logs = [(tmp_path / f"beat{n}.log").read_text() for n in range(2)]
            return all("Sending due task" in t or "sent by another beat" in t for t in logs)

        wait_until(both_tick, timeout=60, interval=0.2)
        assert all(beat.poll() is None for beat in beats)
        before, started = sent_jobs(broker), broker.time()
        wait_until(lambda: _seconds_since(broker, started) >= WINDOW_S, timeout=60, interval=0.1)
        sent = sent_jobs(broker) - before
    finally:
        for beat in beats:
            os.killpg(beat.pid, signal.SIGTERM)
        for beat in beats:
            beat.wait(timeout=30)
    # One send per interval, on Redis's clock (the claims' clock), give or take the
    # window's two ends; two beats sending each would make it about twice that.
    expected = WINDOW_S / INTERVAL_S
    for job in JOBS:
        assert expected - 1 <= sent[job] <= expected + 1, (job, sent)


def _seconds_since(client: redis.Redis, start: tuple[int, int]) -> float:
    now = client.time()
    return (now[0] - start[0]) + (now[1] - start[1]) / 1e6

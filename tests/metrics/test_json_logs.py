"""SHEETSYNC_LOG_FORMAT=json: a real worker logs one JSON object per line, with a
``flush.run`` event per run (token, buffer, rows, duration, outcome), and no values; so
does the command line."""

from __future__ import annotations

import json
import os

from support.scrape import metrics_endpoint
from support.waiting import wait_until

from sheetsync import emit_answer_submitted


def test_a_json_worker_logs_structured_flush_events_without_values(world, worker_processes):
    workers = worker_processes(log_format="json")
    form = world.form("jsonlogs")
    sheet = world.sheet(form)
    answer_ids = world.answers(form, 3)
    workers.start()
    for answer_id in answer_ids:
        emit_answer_submitted(answer_id)
    wait_until(lambda: len(world.ids_in(sheet)) == 3, timeout=30)
    wait_until(lambda: '"flush.run"' in workers.logs(), timeout=10)

    text = workers.logs()
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert ": INFO/" not in text  # Celery's text format is gone: its lines are JSON too
    assert any(r["logger"].startswith("celery") for r in records)
    [run] = [r for r in records if r["event"] == "flush.run" and r["rows"]]
    assert run["rows"] == 3 and run["outcome"] == "done"
    assert run["buffer"] == run["token"].rpartition("#")[0]
    assert form.submission_id in run["buffer"] and sheet.spreadsheet_id in run["buffer"]
    assert isinstance(run["duration_ms"], float) and run["duration_ms"] > 0
    assert {"ts", "level", "message", "failed", "requests"} <= run.keys()

    # The values written to the sheet (every cell but the id and the time) and the
    # owner's refresh token appear nowhere in the log.
    values = {cell for row in world.rows(sheet)[1:] for cell in row[1:] if len(cell) > 3}
    values -= {row[2] for row in world.rows(sheet)[1:]}  # "Submitted at"
    assert values
    canaries = values | {"refresh-jsonlogs"}
    assert not [canary for canary in canaries if canary in text]


def test_the_command_line_logs_json_too(pipeline_env, tmp_path):
    env = {**os.environ, **pipeline_env(log_format="json")}
    with metrics_endpoint(env, tmp_path, options=("--verbose",)) as scrape:
        assert scrape.value("sheetsync_source_up", source="redis") == 1

    lines = (tmp_path / "metrics.log").read_text().splitlines()
    # What the command says to the person (stdout) stays text; its log lines are JSON.
    assert any(line.startswith("serving metrics on http://") for line in lines)
    records = [json.loads(line) for line in lines if line.startswith("{")]
    [serving] = [r for r in records if r["event"] == "metrics.serve"]
    assert serving["level"] == "info" and serving["logger"].startswith("sheetsync")
    assert isinstance(serving["port"], int) and f":{serving['port']}" in scrape.url

"""The web app's slim install has kombu but not Celery: its dispatcher writes Celery's task
messages itself (sheetsync.task_messages), and a real worker runs them. The install test
(.ci/install_test.py) runs the same in a venv that has no Celery at all."""

from __future__ import annotations

import sys
import time

import pytest
from support.waiting import wait_until

from sheetsync import dispatch, emit_answers_submitted
from sheetsync.dispatch import QUEUE_SCHEDULED, FlushTask
from sheetsync.task_messages import KombuDispatcher


@pytest.fixture
def without_celery(pipeline_env, monkeypatch):
    """The dispatcher the library picks when Celery cannot be imported."""
    monkeypatch.setattr(dispatch, "find_spec", lambda name: None if name == "celery" else 1)
    dispatch.set_dispatcher(None)
    chosen = dispatch.get_dispatcher()
    yield chosen
    dispatch.set_dispatcher(None)


def test_without_celery_the_library_sends_with_kombu_and_a_worker_runs_it(
    world, worker, without_celery
):
    assert isinstance(without_celery, KombuDispatcher)
    form = world.form()
    sheet = world.sheet(form)
    ids = world.answers(form, 5)

    emit_answers_submitted(ids)
    wait_until(lambda: world.ids_in(sheet) == ids, timeout=30)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    assert world.ledger_counts() == {"COMPLETED": 5}


def test_a_countdown_is_an_eta_the_worker_waits_for(world, pipeline_env, worker, without_celery):
    """A flush task sent with a countdown runs no sooner (the debounce's promise)."""
    pipeline_env(flush_delay_s=1.5)
    form = world.form()
    sheet = world.sheet(form)
    [answer_id] = world.answers(form, 1)
    emitted = time.monotonic()
    emit_answers_submitted([answer_id])
    wait_until(lambda: world.ids_in(sheet) == [answer_id], timeout=30, interval=0.05)
    assert time.monotonic() - emitted >= 1.4


def test_a_countdown_past_the_visibility_timeout_is_refused(pipeline_env, without_celery):
    from sheetsync.errors import ConfigError

    task = FlushTask("sheetsync:{a:b:c:0}#1", QUEUE_SCHEDULED, countdown_s=10**6)
    with pytest.raises(ConfigError, match="visibility timeout"):
        without_celery.send_flush(task)


def test_the_module_imports_no_celery() -> None:
    import subprocess

    probe = (
        "import sys, sheetsync.task_messages, sheetsync.emit.answers; "
        "print(sorted(m for m in ('celery', 'googleapiclient', 'typer', 'rich') "
        "if m in sys.modules))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert shown.stdout.strip() == "[]", shown.stderr

"""The emit's promise with the web app's Redis paused (issue 29, part 3): a request never
fails or waits because of Redis.

The web app's Redis is a ``redis-server`` this test starts and stops (SIGSTOP): the
kernel still accepts connections, and nothing answers, as with a hung server. Inside
the caller's transaction the emit does not touch Redis at all (a malformed link's alert
is deduplicated by the alert thread); without a session its push waits at most its
client's timeouts. Either way the ledger rows commit, and the reconciler pushes them
once Redis is back.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import select
from support.alerts import AlertSink
from support.world import World

from sheetsync import emit_answer_submitted
from sheetsync.dev.local import LocalRedis, start_redis_server
from sheetsync.dev.seed import link_sheet
from sheetsync.models import SheetTransaction, TransactionType
from sheetsync.recovery import repair
from sheetsync.services import Services
from sheetsync.settings import Settings

#: The web app's Redis timeouts by default (SHEETSYNC_REDIS_CONNECT_TIMEOUT_S and
#: SHEETSYNC_REDIS_TIMEOUT_S); redis-py's own default was 5 s each.
CONNECT_TIMEOUT_S = 0.5
READ_TIMEOUT_S = 1.0
#: What a slow machine may add to an emit's own work, past the timeouts.
SLACK_S = 1.5


@pytest.fixture
def own_redis() -> Iterator[LocalRedis]:
    server = start_redis_server()
    yield server
    server.stop()


@contextmanager
def paused(server: LocalRedis) -> Iterator[None]:
    """The server stopped (SIGSTOP): connections are accepted, nothing is answered."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


@pytest.fixture
def web_app(pipeline: Services, alerts: AlertSink, own_redis: LocalRedis) -> Iterator[Services]:
    """The web app's services (default timeouts) on the Redis this test pauses."""
    services = Services.build(Settings.load(redis_url=own_redis.url), engine=pipeline.engine)
    services.redis.ping()  # connected before the pause, as a running app is
    yield services
    services.redis.close()


def states(services: Services) -> dict[str, TransactionType]:
    with services.sessions() as session:
        rows = session.execute(select(SheetTransaction.spread_sheet_id, SheetTransaction.type))
        return {spreadsheet: TransactionType(state) for spreadsheet, state in rows}


def buffered(services: Services, result_key: object) -> list[str]:
    return [raw.decode() for raw in services.redis.lrange(result_key.buf, 0, -1)]  # type: ignore[attr-defined]


@pytest.mark.timing
def test_an_emit_in_the_callers_transaction_never_waits_for_a_paused_redis(
    world: World, web_app: Services, own_redis: LocalRedis, alerts: AlertSink
) -> None:
    form = world.form()
    good = world.sheet(form)
    with web_app.sessions.begin() as session:
        bad_link = link_sheet(session, form, "not a valid id!", 0).id  # raises an alert
    [answer_id] = world.answers(form, 1)

    with paused(own_redis):
        started = time.monotonic()
        with web_app.sessions.begin() as session:  # the caller's transaction
            result = emit_answer_submitted(answer_id, session=session, services=web_app)
        took = time.monotonic() - started

    # Not one Redis round trip in the transaction: far below even one timeout.
    assert took < READ_TIMEOUT_S, f"the emit and its commit took {took:.2f} s"
    assert len(result.enqueued) == 1 and len(result.invalid) == 1
    assert states(web_app) == {
        good.spreadsheet_id: TransactionType.ENQUEUED,
        "not a valid id!": TransactionType.VALIDATION_FAILED,
    }
    # The alert still goes out (once), and the id reaches its buffer: by the push
    # thread if it got to it after the pause, else by the reconciler.
    assert [text for text in alerts.texts if f"link {bad_link}" in text]
    repair.reconcile(web_app)  # RECONCILE_AFTER_S is 0 in tests
    assert buffered(web_app, result.enqueued[0]) == [answer_id]


@pytest.mark.timing
def test_an_emit_without_a_session_waits_at_most_its_timeouts(
    world: World, web_app: Services, own_redis: LocalRedis
) -> None:
    form = world.form()
    world.sheet(form)
    [answer_id] = world.answers(form, 1)

    with paused(own_redis):
        started = time.monotonic()
        result = emit_answer_submitted(answer_id, services=web_app)
        took = time.monotonic() - started

    assert took < CONNECT_TIMEOUT_S + READ_TIMEOUT_S + SLACK_S, f"the emit took {took:.2f} s"
    assert not result.pushed
    assert world.ledger_counts() == {"ENQUEUED": 1}  # committed before the push
    assert repair.reconcile(web_app).answers == 1
    assert buffered(web_app, result.enqueued[0]) == [answer_id]

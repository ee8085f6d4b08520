"""The two alternatives that ``bench_alternatives.py`` runs against sheetsync, as Celery tasks.

Imported only by worker processes, and by two different virtualenvs: the project's
``.venv`` (its Celery) for the task per answer, and a separate one with
``celery-batches`` (which pins an older Celery) for the batch task. So it imports
nothing from sheetsync: only Celery, google-api-python-client, google-auth and the
standard library.

Configured by the environment the benchmark gives the worker:

- ``ALT_BROKER_URL``: the Redis broker;
- ``ALT_DATABASE``: the SQLite file sheetsync's leg seeded (``submission_answer``);
- ``ALT_API_ENDPOINT``, ``ALT_TOKEN_URI``, ``ALT_REFRESH_TOKEN``: the emulator and the
  owner's Google account;
- ``ALT_SPREADSHEET_ID``, ``ALT_RANGE``: where the rows go;
- ``ALT_FLUSH_EVERY``, ``ALT_FLUSH_INTERVAL_S``: the batch task's flush settings;
- ``ALT_PREFETCH_MULTIPLIER``: Celery's (default 4).

Both tasks do what a developer writes first: read the answers from the database, make
one row each (the stored values as text; personal info stays an encrypted token), and
append the rows with ``values.append`` (RAW). The Sheets service and the database
connection are made once per worker process, when it starts, not once per task.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from typing import Any

from celery import Celery
from celery.signals import worker_process_init
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build

app = Celery("alternatives_tasks", broker=os.environ.get("ALT_BROKER_URL", "redis://"))
app.conf.update(
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    # 0: no limit. celery-batches needs a whole batch prefetched (the command line's
    # --prefetch-multiplier 0 falls back to the default, 4).
    worker_prefetch_multiplier=int(os.environ.get("ALT_PREFETCH_MULTIPLIER", "4")),
)

_values: Any = None
_database: sqlite3.Connection | None = None


@worker_process_init.connect
def _open(**_: Any) -> None:
    """Each pool process builds its Sheets service and opens the database once, when it
    starts (so the benchmark's CPU figures leave this one-off cost out)."""
    global _values, _database  # noqa: PLW0603 - one of each per worker process
    credentials = Credentials(  # type: ignore[no-untyped-call]
        token=None,
        refresh_token=os.environ["ALT_REFRESH_TOKEN"],
        token_uri=os.environ["ALT_TOKEN_URI"],
        client_id="bench",
        client_secret="bench",  # noqa: S106 - the emulator's, not a secret
    )
    service = build(
        "sheets",
        "v4",
        credentials=credentials,
        client_options={"api_endpoint": os.environ["ALT_API_ENDPOINT"]},
        cache_discovery=False,
    )
    # Kept: service.spreadsheets().values() builds its methods from the discovery
    # document again at every call, which costs milliseconds a task.
    _values = service.spreadsheets().values()
    _database = sqlite3.connect(os.environ["ALT_DATABASE"], timeout=30)


def _connection() -> sqlite3.Connection:
    assert _database is not None, "opened by worker_process_init"
    return _database


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)


def load_rows(answer_ids: Sequence[str]) -> list[list[str]]:
    """One row per answer found: id, submitter, submitted at, then its values."""
    marks = ",".join("?" * len(answer_ids))
    found = _connection().execute(
        "SELECT id, user_name, submitted_at, answer FROM submission_answer "  # noqa: S608
        f"WHERE id IN ({marks})",
        list(answer_ids),
    )
    by_id = {
        answer_id: [answer_id, user_name or "", str(submitted_at)]
        + [_cell(item.get("value")) for item in json.loads(answer)]
        for answer_id, user_name, submitted_at, answer in found
    }
    return [by_id[answer_id] for answer_id in answer_ids if answer_id in by_id]


def append_rows(rows: list[list[str]]) -> None:
    """One ``values.append`` (RAW, inserting rows) with every row."""
    if not rows:
        return
    _values.append(
        spreadsheetId=os.environ["ALT_SPREADSHEET_ID"],
        range=os.environ["ALT_RANGE"],
        valueInputOption="RAW",
        insertDataOption="INSERT_ROWS",
        body={"values": rows},
    ).execute()


@app.task(name="alternatives.append_one")
def append_one(answer_id: str) -> None:
    """The naive integration: a task per answer, appending its one row."""
    append_rows(load_rows([answer_id]))


try:
    from celery_batches import Batches
except ImportError:  # the project's .venv: its Celery is newer than celery-batches allows
    Batches = None

if Batches is not None:

    @app.task(
        base=Batches,
        name="alternatives.append_batch",
        flush_every=int(os.environ.get("ALT_FLUSH_EVERY", "500")),
        flush_interval=float(os.environ.get("ALT_FLUSH_INTERVAL_S", "10")),
    )
    def append_batch(requests: list[Any]) -> None:
        """celery-batches: ``append_batch.delay(answer_id)`` per answer; one append per batch."""
        append_rows(load_rows([request.args[0] for request in requests]))

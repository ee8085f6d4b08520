"""What each setting carries beside its type, default and docstring: a :class:`Setting`,
declared on the field (``Annotated[int, Setting(WRITERS)]``) and read from it.

- ``readers``: which processes it takes effect in. Every process reads and checks every
  ``SHEETSYNC_*`` setting at start, but each one acts only where the code that uses it
  runs: a debounce set on the workers alone does not change when the web app schedules a
  buffer's first flush. The settings reference of the docs shows them beside each
  setting's default, type and description.
- ``check``: why a value is refused (one of :mod:`sheetsync.settings.checks`), run on
  the parsed value by :class:`sheetsync.settings.Settings` for every field that has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic.fields import FieldInfo

ENV_PREFIX = "SHEETSYNC_"


class Process(StrEnum):
    """The processes that read ``SHEETSYNC_*`` settings."""

    WEB_APP = "web app"  # the app's processes that call emit_answer_submitted & co.
    WORKER = "worker"  # celery -A sheetsync.celery worker
    BEAT = "beat"  # celery -A sheetsync.celery beat (or worker -B)
    CONSOLE = "console"  # sheetsync web
    EXPORTER = "exporter"  # sheetsync metrics
    CLI = "CLI"  # the other sheetsync commands
    LAUNCHERS = "make worker, docker-compose"  # not read by Python: the process counts


#: What a setting does in one process, when that needs saying ("" when it does not).
Readers = Mapping[Process, str]
#: Why a value is refused (a phrase for the one-line error), or None. It gets the value
#: as text: a secret's text, and a tuple of texts for a comma-separated setting.
Check = Callable[[Any], str | None]


@dataclass(frozen=True, eq=False)
class Setting:
    """The metadata of one field of :class:`sheetsync.settings.Settings`."""

    readers: Readers
    check: Check | None = None

    def __post_init__(self) -> None:
        if not self.readers:
            raise ValueError("a setting takes effect in at least one process")


def setting_of(field: FieldInfo) -> Setting:
    """The :class:`Setting` declared on ``field``; LookupError when it has none."""
    found = [item for item in field.metadata if isinstance(item, Setting)]
    if len(found) != 1:
        raise LookupError(f"a setting declares one Setting(...), not {len(found)}")
    return found[0]


WEB_APP, WORKER, BEAT = Process.WEB_APP, Process.WORKER, Process.BEAT
CONSOLE, EXPORTER, CLI = Process.CONSOLE, Process.EXPORTER, Process.CLI
#: Every process of a deployment.
ALL: Readers = {p: "" for p in (WEB_APP, WORKER, BEAT, CONSOLE, EXPORTER, CLI)}
#: ``sheetsync dlq replay --now`` flushes in the CLI process itself.
REPLAY_NOW = "dlq replay --now"
#: What writes rows: the workers, and the CLI when it replays.
WRITERS: Readers = {WORKER: "", CLI: REPLAY_NOW}
#: What a backfill reads, from the CLI or from the web app.
BACKFILL: Readers = {CLI: "backfill", WEB_APP: "sheetsync.backfill"}
#: The readers of Redis and the database that show the pipeline's state.
OBSERVERS: Readers = {CONSOLE: "", EXPORTER: "", CLI: "status"}
#: The rate limits and their window: what takes slots, and what shows them.
RATES: Readers = {**WRITERS, **OBSERVERS, CLI: f"status, {REPLAY_NOW}"}
#: The client of ``REDIS_URL``: buffers, the limiter, alerts' dedupe.
REDIS_CLIENTS: Readers = {
    WEB_APP: "the push after commit (emit without session=: the request), alerts",
    WORKER: "",
    BEAT: "",
    CLI: "",
}
#: One process kind alone.
ONLY_WEB_APP: Readers = {WEB_APP: ""}
ONLY_WORKER: Readers = {WORKER: ""}
ONLY_BEAT: Readers = {BEAT: ""}
#: The web app and the workers.
WEB_APP_AND_WORKER: Readers = {WEB_APP: "", WORKER: ""}
#: Not read by Python: the process counts of ``make worker`` and docker-compose.
LAUNCHERS: Readers = {Process.LAUNCHERS: ""}

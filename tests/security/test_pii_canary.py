"""The PII canary: a respondent's national id number, quoted back by Google, reaches no sink.

A stub Sheets server answers as Google does: the OAuth token endpoint, spreadsheets.get,
getByDataFilter, values.get, and every values.append with an error whose message quotes
the request's cells (``Invalid values[1][4]: string_value: "<value>"``), as Google's 400s
do. A real
Celery worker flushes answers whose personal info (stored encrypted) is the canary. Then
the canary is searched for everywhere sheetsync keeps or shows anything: every key and
value in Redis (buffers and broker), every column of every table, every log record, the
alerts, the command line (``dlq list``, ``dlq show``, ``status``, plain and ``--json``)
and the task results a real Flower process shows. It must be nowhere, but in the
stub's requests (it did go out) and in DEBUG records of ``GOOGLE_TEXT_LOGGER``, the one
logger meant for Google's raw text. And the operator still learns why: the ledger and
the dead letters name the HTTP status and Google's codes.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import redis
from sqlalchemy import MetaData, select
from support.cli import Cli
from support.databases import BOTH_DATABASES
from support.paths import ROOT
from support.waiting import wait_until

from sheetsync import emit_answer_submitted
from sheetsync.crypto import encrypt_answer_value
from sheetsync.dev.seed import SeededForm, link_sheet
from sheetsync.models import DeadLetterReason, QuestionType, SheetTransaction, SubmissionAnswer
from sheetsync.sheets.google_errors import GOOGLE_TEXT_LOGGER

#: A fake Korean resident registration number, unique to this run: the personal info.
CANARY = f"851107-2{secrets.randbelow(10**6):06d}"
#: Text Google's token endpoint adds to a refusal (``error_description``).
OAUTH_MARKER = f"oauth-description-{secrets.token_hex(6)}"
TAB = "Responses"
#: How each spreadsheet of the stub answers values.append.
REFUSES, MISTYPED, DENIED, BUSY = "sheet-refuses", "sheet-mistyped", "sheet-denied", "sheet-busy"
ALL_REFUSING = (REFUSES, MISTYPED, DENIED, BUSY)
#: Appends land there (Flower's warm-up), and the revoked owner's sheet is never reached.
HEALTHY, UNREACHED = "sheet-healthy", "sheet-unreached"
#: Google refuses this owner's refresh token.
REVOKED_OWNER = "owner_revoked"
APPEND = re.compile(r"/v4/spreadsheets/(?P<sid>[^/]+)/values/(?P<range>.+):append")
VALUES = re.compile(r"/v4/spreadsheets/(?P<sid>[^/]+)/values/(?P<range>.+)")
SPREADSHEET = re.compile(r"/v4/spreadsheets/(?P<sid>[^/]+)")
PROTO = "type.googleapis.com/google.rpc"
NOT_FOUND = {
    "error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}
}


class StubGoogle:
    """Google's token endpoint and the Sheets calls of a flush, on a free port. Only
    appends are refused: the canary is in rows, never in row 1, so the header's titles
    and formats (one batchUpdate) are always accepted."""

    def __init__(self) -> None:
        self.appended: list[tuple[str, str]] = []
        self._rows: dict[str, int] = {}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = unquote(urlsplit(self.path).path)
                if found := VALUES.fullmatch(path):
                    self.answer(200, {"range": found["range"], "majorDimension": "ROWS"})
                elif found := SPREADSHEET.fullmatch(path):
                    sheet = {"properties": {"sheetId": 0, "title": TAB}}
                    self.answer(200, {"spreadsheetId": found["sid"], "sheets": [sheet]})
                else:
                    self.answer(404, NOT_FOUND)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                path = unquote(urlsplit(self.path).path)
                if path == "/token":
                    self.answer(*stub.token(parse_qs(body)))
                elif found := APPEND.fullmatch(path):
                    stub.appended.append((found["sid"], body))
                    self.answer(*stub.append(found["sid"], json.loads(body)["values"]))
                elif path.endswith(":getByDataFilter"):  # the tab's title and row 1
                    sheet = {"properties": {"sheetId": 0, "title": TAB}, "data": [{}]}
                    self.answer(200, {"spreadsheetId": path.split("/")[3], "sheets": [sheet]})
                elif path.endswith(":batchUpdate"):
                    self.answer(200, {"spreadsheetId": path.split("/")[3], "replies": [{}]})
                else:
                    self.answer(404, NOT_FOUND)

            def answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.token_uri = f"{self.url}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        if form.get("refresh_token") == [f"refresh-{REVOKED_OWNER}"]:
            description = f"Token has been expired or revoked. ({OAUTH_MARKER})"
            return 400, {"error": "invalid_grant", "error_description": description}
        token = {"access_token": secrets.token_hex(8), "expires_in": 3599, "token_type": "Bearer"}
        return 200, token

    def append(self, spreadsheet_id: str, rows: list[list[str]]) -> tuple[int, dict[str, Any]]:
        """Google's answer to values.append: each refusal quotes a cell of the request, the
        canary's when the request holds it (protobuf text format, as Google prints it)."""
        row, column, cell = quoted_cell(rows)
        if spreadsheet_id == REFUSES:
            message = f'Invalid values[{row}][{column}]: string_value: "{cell}"\n'
            return 400, google_error(400, "INVALID_ARGUMENT", message)
        if spreadsheet_id == MISTYPED:
            message = (
                f"Invalid value at 'data.values[{row}]' "
                f'(type.googleapis.com/google.protobuf.ListValue), "{cell}"'
            )
            violation = {"field": f"data.values[{row}]", "description": message}
            bad_request = {"@type": f"{PROTO}.BadRequest", "fieldViolations": [violation]}
            return 400, google_error(400, "INVALID_ARGUMENT", message, details=[bad_request])
        if spreadsheet_id == DENIED:
            # Neither status nor errors[]: googleapiclient then logs the message at
            # WARNING as the 403's "reason" (sheetsync's log filter must withhold it).
            return 403, {"error": {"code": 403, "message": f'No permission to write "{cell}"'}}
        if spreadsheet_id == BUSY:
            info = {"@type": f"{PROTO}.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED"}
            message = f"Quota exceeded for quota metric 'Write requests' while writing \"{cell}\""
            return 429, google_error(429, "RESOURCE_EXHAUSTED", message, details=[info])
        first = self._rows.get(spreadsheet_id, 0) + 1
        self._rows[spreadsheet_id] = last = first + len(rows) - 1
        updates = {"updatedRange": f"'{TAB}'!A{first}:Z{last}", "updatedRows": len(rows)}
        return 200, {"spreadsheetId": spreadsheet_id, "updates": updates}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def google_error(status: int, state: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": state, **extra}}


def quoted_cell(rows: list[list[str]]) -> tuple[int, int, str]:
    cells = [(r, c, str(cell)) for r, row in enumerate(rows) for c, cell in enumerate(row)]
    return next((found for found in cells if CANARY in found[2]), cells[-1])


@pytest.fixture
def google_stub(pipeline_env: Any) -> Iterator[StubGoogle]:
    stub = StubGoogle()
    pipeline_env(google_api_endpoint=stub.url, google_token_uri=stub.token_uri)
    yield stub
    stub.close()


@pytest.fixture
def flower(google_stub: StubGoogle, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A real Flower process on the test's broker: ``(port, its log file)``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log_path = tmp_path / "flower.log"
    flower_args = ["-A", "sheetsync.celery", "flower", f"--port={port}", "--address=127.0.0.1"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", *flower_args],
            cwd=ROOT,
            env={**os.environ, "FLOWER_UNAUTHENTICATED_API": "true"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield port, log_path
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)


def flower_api_tasks(port: int) -> dict[str, dict[str, Any]]:
    """Every task Flower knows of, as its API shows them (none while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/tasks", timeout=2) as reply:
            tasks: dict[str, dict[str, Any]] = json.loads(reply.read())
    except OSError:
        return {}
    return tasks


def flower_tasks(port: int) -> list[dict[str, Any]]:
    """The flush tasks Flower knows of."""
    return [t for t in flower_api_tasks(port).values() if t.get("name") == "sheetsync.flush.run"]


@pytest.mark.slow
@BOTH_DATABASES
def test_the_canary_reaches_google_and_no_sink(google_stub, flower, alerts, worker, world, caplog):
    caplog.set_level(logging.DEBUG)
    port, flower_log = flower
    warm_up_flower(world, port)

    form = canary_form(world, "owner_canary", ALL_REFUSING)
    revoked_form = canary_form(world, REVOKED_OWNER, [UNREACHED])
    answer_ids = store_canary_answers(world, form, 3) + store_canary_answers(world, revoked_form, 2)
    for answer_id in answer_ids:
        emit_answer_submitted(answer_id)
    # FAILED: 3 rows refused alone, 3 + 3 with their sheet's PERMANENT dead letter;
    # DEAD_LETTERED: 3 after the retries of 429s, 2 of the revoked owner.
    wait_until(lambda: unsettled_counts(world) == {"FAILED": 9, "DEAD_LETTERED": 5}, timeout=60)
    wait_until(lambda: not world.leftover_keys(), timeout=30)
    flower_saw = wait_until(lambda: final_runs_in_flower(port, form, revoked_form), timeout=30)

    # It went out: Google was sent the canary, and quoted it back in every refusal.
    sent_it = {sid for sid, body in google_stub.appended if CANARY in body}
    assert sent_it == set(ALL_REFUSING)
    # The operator still learns why, from the ledger, the dead letters and the alerts.
    assert_reasons_name_status_and_codes(world, alerts.texts)
    # Flower was shown the retries' exceptions (ours), so that sink was exercised.
    assert any(
        "Sheets API 429 RESOURCE_EXHAUSTED" in (t.get("exception") or "") for t in flower_saw
    )
    # Google's raw text went to its DEBUG logger, and only there.
    google_text = [r for r in caplog.records if r.name == GOOGLE_TEXT_LOGGER]
    assert {r.levelno for r in google_text} == {logging.DEBUG}
    assert any(CANARY in r.getMessage() for r in google_text)
    assert any(OAUTH_MARKER in r.getMessage() for r in google_text)

    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}
    cli = Cli(env, env["SHEETSYNC_DATABASE_URL"], world.pipeline.sessions, world.pipeline.redis)
    printed = [cli.ok(*command) for command in cli_commands(world)]
    assert any("Sheets API 400 INVALID_ARGUMENT" in result.stdout for result in printed)

    broker = redis.Redis.from_url(env["SHEETSYNC_BROKER_URL"])
    sinks = {
        "Redis (buffers)": redis_texts(world.pipeline.redis),
        "Redis (broker)": redis_texts(broker),
        "the database": database_texts(world.pipeline.sessions),
        "the alerts": alerts.texts,
        "the command line": [r.stdout + r.stderr for r in printed],
        "Flower's tasks": [json.dumps(flower_api_tasks(port))],
        "Flower's log": [flower_log.read_text(errors="replace")],
        "logs at INFO and above": [
            formatted(r) for r in caplog.records if r.levelno > logging.DEBUG
        ],
        "logs but GOOGLE_TEXT_LOGGER": [
            formatted(r) for r in caplog.records if r.name != GOOGLE_TEXT_LOGGER
        ],
    }
    for sink, texts in sinks.items():
        assert texts or sink.startswith("Redis"), f"nothing to search in {sink}"
        text = "\n".join(texts)
        assert CANARY not in text, f"the canary leaked into {sink}"
        assert OAUTH_MARKER not in text, f"Google's OAuth description leaked into {sink}"
    broker.close()


def warm_up_flower(world: Any, port: int) -> None:
    """Flower can answer before its event receiver listens: flush one answer at a time to
    a sheet that takes them until Flower has seen a flush succeed."""
    form = world.form("owner_warmup", pii=0)
    with world.pipeline.sessions.begin() as session:
        link_sheet(session, form, HEALTHY, 0)
    for answer_id in world.answers(form, 10, prefix="warmup"):
        emit_answer_submitted(answer_id)
        with suppress(AssertionError):
            wait_until(lambda: [t for t in flower_tasks(port) if t["state"] == "SUCCESS"], 8)
            return
    raise AssertionError("Flower saw no flush succeed")


def canary_form(world: Any, owner: str, spreadsheet_ids: Sequence[str]) -> SeededForm:
    """A form with one PERSONAL_INFO question among two others, linked to the sheets."""
    form: SeededForm = world.form(owner, steps=1, questions_per_step=3, pii=1, jumbotrons=0)
    with world.pipeline.sessions.begin() as session:
        for spreadsheet_id in spreadsheet_ids:
            link_sheet(session, form, spreadsheet_id, 0)
    return form


def store_canary_answers(world: Any, form: SeededForm, count: int) -> list[str]:
    """Answers whose personal info is the canary, encrypted as the web app stores it."""
    [pii] = form.pii_question_ids
    others = [q.id for q in form.columns if q.type is not QuestionType.PERSONAL_INFO]
    ids = [f"{form.submission_id}_a{n}" for n in range(1, count + 1)]
    with world.pipeline.sessions.begin() as session:
        for answer_id in ids:
            token = encrypt_answer_value(CANARY, answer_id=answer_id, question_id=pii)
            items = [{"questionId": pii, "value": token}]
            items += [{"questionId": question, "value": "Platform"} for question in others]
            session.add(
                SubmissionAnswer(
                    id=answer_id,
                    submission_id=form.submission_id,
                    user_name="Respondent",
                    answer=items,
                )
            )
    return ids


def unsettled_counts(world: Any) -> dict[str, int]:
    """The ledger but the warm-up's COMPLETED rows."""
    return {state: n for state, n in world.ledger_counts().items() if state != "COMPLETED"}


def final_runs_in_flower(port: int, form: SeededForm, revoked: SeededForm) -> list[dict[str, Any]]:
    """Flower's flush tasks of the canary's buffers, once it has seen each one's last run
    (the one that found its list empty: ``done``); else nothing."""
    bases = {f"{{{form.owner_id}:{form.submission_id}:{sid}:0}}" for sid in ALL_REFUSING}
    bases.add(f"{{{revoked.owner_id}:{revoked.submission_id}:{UNREACHED}:0}}")
    mine = [t for t in flower_tasks(port) if t["uuid"].split("#")[0].split(":", 1)[1] in bases]
    last_runs = [t for t in mine if t["state"] == "SUCCESS" and "done:" in (t["result"] or "")]
    seen = {t["uuid"].split("#")[0].split(":", 1)[1] for t in last_runs}
    return mine if seen == bases else []


def assert_reasons_name_status_and_codes(world: Any, alert_texts: list[str]) -> None:
    with world.pipeline.sessions() as session:
        rows = session.execute(
            select(
                SheetTransaction.spread_sheet_id,
                SheetTransaction.type,
                SheetTransaction.error_message,
            )
        ).all()
    refused = [(state.value, error) for sid, state, error in rows if sid == REFUSES]
    assert len(refused) == 3
    assert all(state == "FAILED" and "(400 INVALID_ARGUMENT)" in error for state, error in refused)
    entries = {entry.spread_sheet_id: entry for entry in world.dead_letters()}
    expected = {
        MISTYPED: (DeadLetterReason.PERMANENT, "Sheets API 400 INVALID_ARGUMENT: "),
        DENIED: (DeadLetterReason.PERMANENT, "Sheets API 403: "),
        BUSY: (
            DeadLetterReason.TRANSIENT_EXHAUSTED,
            "Sheets API 429 RESOURCE_EXHAUSTED (RATE_LIMIT_EXCEEDED): ",
        ),
        UNREACHED: (DeadLetterReason.CREDENTIAL, "Google OAuth invalid_grant: "),
    }
    assert set(entries) == set(expected)
    for sid, (reason, named) in expected.items():
        assert entries[sid].reason is reason
        assert named in (entries[sid].error_message or ""), entries[sid].error_message
        assert any(named in text for text in alert_texts), f"no alert names {named!r}"
    for sid, state, error in rows:
        if sid in (MISTYPED, DENIED):
            assert (state.value, error) == ("FAILED", entries[sid].error_message)


def cli_commands(world: Any) -> list[tuple[str, ...]]:
    shows = [("dlq", "show", str(entry.id)) for entry in world.dead_letters()]
    return [("dlq", "list"), ("dlq", "list", "--json"), ("status",), ("status", "--json"), *shows]


def redis_texts(client: redis.Redis) -> list[str]:
    """Every key and every value of a Redis database as text, with the base64 bodies of
    kombu's messages decoded."""
    texts: list[str] = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        if kind == b"string":
            values = [client.get(key)]
        elif kind == b"list":
            values = client.lrange(key, 0, -1)
        elif kind == b"hash":
            values = [part for pair in client.hgetall(key).items() for part in pair]
        elif kind == b"set":
            values = list(client.smembers(key))
        elif kind == b"zset":
            values = client.zrange(key, 0, -1)
        else:
            values = [repr(client.xrange(key)).encode()] if kind == b"stream" else []
        texts.append(key.decode(errors="replace"))
        texts += [text for value in values if value is not None for text in decoded(value)]
    return texts


def decoded(value: bytes) -> list[str]:
    text = value.decode(errors="replace")
    found = [text]
    for candidate in re.findall(r"[A-Za-z0-9+/=]{16,}", text):
        with suppress(ValueError):
            found.append(base64.b64decode(candidate, validate=True).decode(errors="replace"))
    return found


def database_texts(sessions: Any) -> list[str]:
    """Every value of every row of every table, as text (tables reflected, not modelled:
    a table added later is searched too)."""
    texts: list[str] = []
    with sessions() as session:
        metadata = MetaData()
        metadata.reflect(bind=session.get_bind())
        assert "submission_answer" in metadata.tables
        for table in metadata.sorted_tables:
            for row in session.execute(select(table)):
                texts += [str(value) for value in row if value is not None]
    return texts


def formatted(record: logging.LogRecord) -> str:
    """A record as a handler writes it, traceback and ``extra`` fields included."""
    return logging.Formatter("%(name)s %(levelname)s %(message)s").format(record) + repr(
        {k: v for k, v in record.__dict__.items() if k not in ("msg", "args", "exc_info")}
    )

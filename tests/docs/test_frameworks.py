"""docs/integration/frameworks.md (and the owner hook of notifications.md), run as written.

Each snippet is a module of an app called ``yourapp`` (its block's ``title``): the test
writes it, read from the page, into a fresh ``yourapp/`` beside the parts the page says
are the reader's own (``yourapp/forms.py``: ``new_answer_id``, ``items_from``,
``AnswerIn``; for Django, models of the tables and a URLconf), then drives the real
framework in a process of its own through its test client: one answer is posted to a
seeded form, and a real worker writes it to the linked sheet in the emulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.markdown import page, titled_block
from support.waiting import wait_until

from sheetsync.dev.seed import SeededForm
from sheetsync.models import QuestionType

FRAMEWORKS = "integration/frameworks.md"
NOTIFICATIONS = "integration/notifications.md"
#: What the page leaves to the reader: a fresh id, the items (personal info encrypted for
#: the answer), and FastAPI's request body. Questions come from DOCS_TEST_QUESTIONS.
FORMS = """\
import json
import os
import uuid

from pydantic import BaseModel

from sheetsync import crypto

QUESTIONS = json.loads(os.environ["DOCS_TEST_QUESTIONS"])  # {question id: its type}


class AnswerIn(BaseModel):
    answers: dict[str, str]


def new_answer_id():
    return f"docs_{uuid.uuid4().hex[:16]}"


def items_from(data, answer_id):
    values = data.answers if isinstance(data, AnswerIn) else data
    items = []
    for question_id, kind in QUESTIONS.items():
        value = values.get(question_id)
        if kind == "PERSONAL_INFO":
            value = crypto.encrypt_answer_value(
                value, answer_id=answer_id, question_id=question_id
            )
        items.append({"questionId": question_id, "value": value})
    return items
"""
#: Django: the reader's models of two tables (managed = False) and a URLconf.
DJANGO_MODELS = """\
from django.db import models
from django.utils import timezone


class SubmissionAnswer(models.Model):
    id = models.CharField(primary_key=True, max_length=128)
    submission_id = models.CharField(max_length=128)
    user_name = models.CharField(max_length=255, null=True)
    submitted_at = models.DateTimeField(default=timezone.now)
    answer = models.JSONField()

    class Meta:
        managed = False
        db_table = "submission_answer"


class User(models.Model):
    id = models.CharField(primary_key=True, max_length=128)
    email = models.CharField(max_length=255)

    class Meta:
        managed = False
        db_table = "users"
"""
DJANGO_URLS = """\
from django.http import HttpResponse
from django.urls import path

from yourapp import views

urlpatterns = [
    path("forms/<form_id>/", views.submit),
    path("thanks/<answer_id>/", lambda request, answer_id: HttpResponse(), name="thanks"),
]
"""
#: Each driver posts DOCS_TEST_ANSWERS to DOCS_TEST_FORM and prints the response's
#: status and where it sends the browser (or its JSON).
DJANGO_DRIVER = """\
import json, os, sys
import django
from django.conf import settings

settings.configure(
    ALLOWED_HOSTS=["testserver"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
    EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    INSTALLED_APPS=["yourapp"],
    MIDDLEWARE=[],
    ROOT_URLCONF="yourapp.urls",
    SECRET_KEY="docs-test",
    USE_TZ=True,
)
django.setup()  # yourapp.apps.FormsConfig.ready(): sheetsync.check_settings()

from django.apps import apps
from django.core import mail
from django.test import Client

from sheetsync.notify import Notification
from yourapp.notifications import email_owner

assert type(apps.get_app_config("yourapp")).__name__ == "FormsConfig"
form = os.environ["DOCS_TEST_FORM"]
response = Client().post(f"/forms/{form}/", json.loads(os.environ["DOCS_TEST_ANSWERS"]))
print(response.status_code, response["Location"])

owner = os.environ["DOCS_TEST_OWNER"]
email_owner(Notification("credential_invalid", owner, form, None, None, "Reconnect", "now"))
[sent] = mail.outbox
print("mail", json.dumps({"to": sent.to, "body": sent.body}))
"""
FASTAPI_DRIVER = """\
import json, os
from fastapi.testclient import TestClient
from yourapp.main import app

with TestClient(app) as client:  # runs the lifespan: sheetsync.check_settings()
    form, answers = os.environ["DOCS_TEST_FORM"], json.loads(os.environ["DOCS_TEST_ANSWERS"])
    response = client.post(f"/forms/{form}/answers", json={"answers": answers})
print(response.status_code, response.json()["id"])
"""
FLASK_DRIVER = """\
import json, os
from yourapp import create_app

client = create_app().test_client()
form = os.environ["DOCS_TEST_FORM"]
response = client.post(f"/forms/{form}", data=json.loads(os.environ["DOCS_TEST_ANSWERS"]))
print(response.status_code, response.headers["Location"])
"""


@pytest.fixture
def post(tmp_path: Path, pipeline_env, world, worker) -> Callable[..., tuple[list[str], str]]:
    """``post(modules, driver)``: writes ``yourapp/`` (the page's modules, by file name,
    and the reader's forms.py), seeds a form linked to a sheet, runs the driver, waits
    for the row and checks its cells; returns (the driver's output lines, the answer id)."""

    def run(modules: dict[str, str], driver: str) -> tuple[list[str], str]:
        form: SeededForm = world.form("docs_owner", steps=1, questions_per_step=2, pii=1)
        sheet = world.sheet(form)
        [text, secret] = sorted(form.columns, key=lambda q: q.type is QuestionType.PERSONAL_INFO)
        answers = {text.id: "Kim Minjun", secret.id: "010-1234-5678"}
        app_dir = tmp_path / "yourapp"
        app_dir.mkdir()
        for name, source in {"__init__.py": "", "forms.py": FORMS, **modules}.items():
            (app_dir / name).write_text(source, encoding="utf-8")
        (tmp_path / "driver.py").write_text(driver, encoding="utf-8")
        database = os.environ["SHEETSYNC_DATABASE_URL"].removeprefix("sqlite:///")
        env = {
            **os.environ,
            "PYTHONPATH": str(tmp_path),
            "DOCS_TEST_FORM": form.submission_id,
            "DOCS_TEST_OWNER": form.owner_id,
            "DOCS_TEST_ANSWERS": json.dumps(answers),
            "DOCS_TEST_QUESTIONS": json.dumps({q.id: q.type.value for q in (text, secret)}),
        }
        done = subprocess.run(
            [sys.executable, "driver.py", database],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        answer_id = lines[0].rstrip("/").rsplit("/", 1)[-1].split()[-1]
        wait_until(lambda: answer_id in world.ids_in(sheet), timeout=30)
        header, *rows = world.rows(sheet)
        [row] = [row for row in rows if row[0] == answer_id]
        cells = dict(zip(header, row, strict=False))
        assert cells[text.title] == "Kim Minjun"
        assert cells[secret.title] == "010-1234-5678"  # encrypted by items_from, decrypted
        return lines, answer_id

    return run


def test_the_django_snippets_run_as_written(post) -> None:
    frameworks, notifications = page(FRAMEWORKS), page(NOTIFICATIONS)
    modules = {
        "apps.py": titled_block(frameworks, "yourapp/apps.py"),
        "views.py": titled_block(frameworks, "yourapp/views.py"),
        "notifications.py": titled_block(notifications, "yourapp/notifications.py"),
        "models.py": DJANGO_MODELS,
        "urls.py": DJANGO_URLS,
    }
    lines, answer_id = post(modules, DJANGO_DRIVER)
    assert lines[0] == f"302 /thanks/{answer_id}/"
    mail = json.loads(lines[1].removeprefix("mail "))
    assert mail["to"] == ["docs_owner@example.com"]  # the owner's email, from the users table
    assert mail["body"].startswith("Reconnect. Open the form's settings: /forms/")


def test_the_fastapi_snippet_runs_as_written(post) -> None:
    modules = {"main.py": titled_block(page(FRAMEWORKS), "yourapp/main.py")}
    lines, answer_id = post(modules, FASTAPI_DRIVER)
    assert lines[0] == f"200 {answer_id}"


def test_the_flask_snippet_runs_as_written(post) -> None:
    modules = {"__init__.py": titled_block(page(FRAMEWORKS), "yourapp/__init__.py")}
    lines, answer_id = post(modules, FLASK_DRIVER)
    assert lines[0] == f"303 /thanks/{answer_id}"

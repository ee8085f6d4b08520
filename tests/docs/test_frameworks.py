"""docs/integration/frameworks.md (and the owner hook of notifications.md), run as written.

Each snippet is a module of an app called ``yourapp`` (its block's ``title``): the test
writes it, read from the page, into a fresh ``yourapp/``, with the page's
``yourapp/forms.py`` (``AnswerIn``, ``items_from``, ``new_answer_id``: the same text as
``examples/yourapp/forms.py``) and, for Django, the page's models and a URLconf of the
test's. Then it drives the real framework in a process of its own through its test
client: a refused answer first (the page's 400), then one answer posted to a seeded form
by a named submitter, and a real worker writes it to the linked sheet in the emulator,
the Submitter cell filled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select
from support.markdown import page, titled_block
from support.paths import ROOT
from support.waiting import wait_until

from sheetsync.dev.seed import SeededForm
from sheetsync.models import QuestionType, SheetTransaction, SubmissionAnswer, TransactionType

FRAMEWORKS = "integration/frameworks.md"
NOTIFICATIONS = "integration/notifications.md"
#: The module the page gives in full, as the repository ships it.
EXAMPLE_FORMS = ROOT / "examples" / "yourapp" / "forms.py"
#: Who submits (Django: the logged-in user's first and last name).
SUBMITTER = "Minjun Kim"

#: Django: the test's URLconf (the page leaves routes to the reader).
DJANGO_URLS = """\
from django.http import HttpResponse
from django.urls import path

from yourapp import views

urlpatterns = [
    path("forms/<form_id>/", views.submit),
    path("thanks/<answer_id>/", lambda request, answer_id: HttpResponse(), name="thanks"),
]
"""
#: Each driver first posts an answer the page's code refuses and prints its status, then
#: posts DOCS_TEST_ANSWERS to DOCS_TEST_FORM as DOCS_TEST_SUBMITTER and prints the
#: response's status and where it sends the browser (or its JSON).
DJANGO_DRIVER = """\
import json, os, sys
import django
from django.conf import settings

settings.configure(
    ALLOWED_HOSTS=["testserver"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
    EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    INSTALLED_APPS=[
        "django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions",
        "yourapp",
    ],
    MIDDLEWARE=[
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
    ],
    ROOT_URLCONF="yourapp.urls",
    SECRET_KEY="docs-test",
    USE_TZ=True,
)
django.setup()  # yourapp.apps.FormsConfig.ready(): sheetsync.check_settings()

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.test import Client

from sheetsync.notify import Notification
from yourapp.notifications import email_owner

assert type(apps.get_app_config("yourapp")).__name__ == "FormsConfig"
call_command("migrate", verbosity=0)  # auth and sessions; yourapp's models are unmanaged
first, last = os.environ["DOCS_TEST_SUBMITTER"].split()
client = Client()
client.force_login(get_user_model().objects.create_user("minjun", first_name=first, last_name=last))
form, answers = os.environ["DOCS_TEST_FORM"], json.loads(os.environ["DOCS_TEST_ANSWERS"])
refused = client.post("/forms/no_such_form/", answers)
print(refused.status_code, refused.content.decode())
response = client.post(f"/forms/{form}/", {**answers, "csrfmiddlewaretoken": "ignored"})
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

form, answers = os.environ["DOCS_TEST_FORM"], json.loads(os.environ["DOCS_TEST_ANSWERS"])
items = [{"questionId": question, "value": value} for question, value in answers.items()]
with TestClient(app) as client:  # runs the lifespan: sheetsync.check_settings()
    refused = client.post(
        f"/forms/{form}/answers", json={"items": [{"questionId": "q_nope", "value": "x"}]}
    )
    print(refused.status_code, refused.json()["detail"])
    body = {"items": items, "user_name": os.environ["DOCS_TEST_SUBMITTER"]}
    response = client.post(f"/forms/{form}/answers", json=body)
print(response.status_code, response.json()["id"])
"""
FLASK_DRIVER = """\
import json, os
from yourapp import create_app

client = create_app().test_client()
form, answers = os.environ["DOCS_TEST_FORM"], json.loads(os.environ["DOCS_TEST_ANSWERS"])
refused = client.post("/forms/no_such_form", data=answers)
print(refused.status_code, "form no_such_form does not exist" in refused.text)
fields = {**answers, "submitter": os.environ["DOCS_TEST_SUBMITTER"], "csrf_token": "ignored"}
response = client.post(f"/forms/{form}", data=fields)
print(response.status_code, response.headers["Location"])
"""


def _module_text() -> str:
    """The page's yourapp/forms.py, which must be the repository's example as it is."""
    shown = titled_block(page(FRAMEWORKS), "yourapp/forms.py")
    assert shown == EXAMPLE_FORMS.read_text(encoding="utf-8"), (
        "docs/integration/frameworks.md shows another yourapp/forms.py than "
        "examples/yourapp/forms.py: make them the same"
    )
    return shown


@pytest.fixture
def post(tmp_path: Path, pipeline_env, world, worker) -> Callable[..., tuple[list[str], str]]:
    """``post(modules, driver)``: writes ``yourapp/`` (the page's modules, by file name,
    and its forms.py), seeds a form linked to a sheet, runs the driver, waits for the row
    and checks its cells, the stored answer and its ledger row; returns (the driver's
    output lines, the answer id)."""

    def run(modules: dict[str, str], driver: str) -> tuple[list[str], str]:
        # One step: a JUMBOTRON, a SHORT_TEXT, a PERSONAL_INFO and a MULTI_CHOICE question.
        form: SeededForm = world.form("docs_owner", steps=1, questions_per_step=3, pii=1)
        sheet = world.sheet(form)
        kinds = {q.type: q for q in form.questions}
        text, secret, topics = (
            kinds[QuestionType.SHORT_TEXT],
            kinds[QuestionType.PERSONAL_INFO],
            kinds[QuestionType.MULTI_CHOICE],
        )
        answers = {text.id: "Kim Minjun", secret.id: "010-1234-5678", topics.id: ["AI", "Data"]}
        app_dir = tmp_path / "yourapp"
        app_dir.mkdir()
        for name, source in {"__init__.py": "", "forms.py": _module_text(), **modules}.items():
            (app_dir / name).write_text(source, encoding="utf-8")
        (tmp_path / "driver.py").write_text(driver, encoding="utf-8")
        database = os.environ["SHEETSYNC_DATABASE_URL"].removeprefix("sqlite:///")
        env = {
            **os.environ,
            "PYTHONPATH": str(tmp_path),
            "DOCS_TEST_FORM": form.submission_id,
            "DOCS_TEST_OWNER": form.owner_id,
            "DOCS_TEST_ANSWERS": json.dumps(answers),
            "DOCS_TEST_SUBMITTER": SUBMITTER,
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
        answer_id = lines[1].rstrip("/").rsplit("/", 1)[-1].split()[-1]
        with world.pipeline.sessions() as session:
            stored = session.get(SubmissionAnswer, answer_id)
            assert stored is not None and stored.user_name == SUBMITTER
            # Nothing of the refused answer; the personal info stored encrypted.
            assert session.scalars(select(SubmissionAnswer.id)).all() == [answer_id]
            assert "010-1234-5678" not in json.dumps(stored.answer)
            assert {item["questionId"] for item in stored.answer} == {text.id, secret.id, topics.id}
        wait_until(lambda: answer_id in world.ids_in(sheet), timeout=30)
        header, *rows = world.rows(sheet)
        [row] = [row for row in rows if row[0] == answer_id]
        cells = dict(zip(header, row, strict=False))
        assert cells["Submitter"] == SUBMITTER
        assert cells[text.title] == "Kim Minjun"
        assert cells[secret.title] == "010-1234-5678"  # encrypted by items_from, decrypted
        assert cells[topics.title] == "AI, Data"

        def ledger() -> list[TransactionType]:
            with world.pipeline.sessions() as session:
                return list(
                    session.scalars(
                        select(SheetTransaction.type).where(
                            SheetTransaction.submission_answer_id == answer_id
                        )
                    )
                )

        # The run records the row after Google took it: the row shows first.
        wait_until(lambda: ledger() == [TransactionType.COMPLETED], timeout=30)
        return lines, answer_id

    return run


def test_the_page_shows_the_example_module_as_it_is() -> None:
    _module_text()


def test_the_django_snippets_run_as_written(post) -> None:
    frameworks, notifications = page(FRAMEWORKS), page(NOTIFICATIONS)
    modules = {
        "models.py": titled_block(frameworks, "yourapp/models.py"),
        "apps.py": titled_block(frameworks, "yourapp/apps.py"),
        "views.py": titled_block(frameworks, "yourapp/views.py"),
        "notifications.py": titled_block(notifications, "yourapp/notifications.py"),
        "urls.py": DJANGO_URLS,
    }
    lines, answer_id = post(modules, DJANGO_DRIVER)
    assert lines[0] == "400 form no_such_form does not exist"
    assert lines[1] == f"302 /thanks/{answer_id}/"
    mail = json.loads(lines[2].removeprefix("mail "))
    assert mail["to"] == ["docs_owner@example.com"]  # the owner's email, from the users table
    assert mail["body"].startswith("Reconnect. Open the form's settings: /forms/")


def test_the_fastapi_snippet_runs_as_written(post) -> None:
    modules = {"main.py": titled_block(page(FRAMEWORKS), "yourapp/main.py")}
    lines, answer_id = post(modules, FASTAPI_DRIVER)
    assert lines[0].startswith("422 form ") and lines[0].endswith(" has no question q_nope")
    assert lines[1] == f"200 {answer_id}"


def test_the_flask_snippet_runs_as_written(post) -> None:
    modules = {"__init__.py": titled_block(page(FRAMEWORKS), "yourapp/__init__.py")}
    lines, answer_id = post(modules, FLASK_DRIVER)
    assert lines[0] == "400 True"
    assert lines[1] == f"303 /thanks/{answer_id}"

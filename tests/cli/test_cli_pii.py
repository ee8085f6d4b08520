"""`sheetsync pii`, through the console script."""

from __future__ import annotations

import base64
import json

from support.cli import Cli

from sheetsync.crypto import Keyring, answer_value_context, generate_key, refresh_token_context
from sheetsync.dev.seed import seed_answers, seed_form
from sheetsync.models import (
    GoogleCredential,
    SubmissionAnswer,
)


def test_pii_rotate_moves_everything_to_the_newest_key(cli: Cli) -> None:
    old_key = cli.env["SHEETSYNC_PII_KEYS"]
    old = Keyring([base64.urlsafe_b64decode(old_key)])
    with cli.sessions.begin() as session:
        form = seed_form(session, owner_id="owner_1", pii=2, keyring=old)
        seed_answers(session, form, 5, keyring=old, seed=1)
    new_key = generate_key()

    both = {"SHEETSYNC_PII_KEYS": f"{new_key},{old_key}"}
    before = cli("pii", "rotate", "--check", "--json", env=both)
    result = cli.ok("pii", "rotate", env=both)

    assert before.code == 1
    assert json.loads(before.stdout)["tables"]["google_credential"]["old_key"] == 1
    assert "5 answers scanned, 5 updated" in result.stdout
    assert "and 1 refresh token re-encrypted" in result.stdout
    new_only = Keyring([base64.urlsafe_b64decode(new_key)])
    with cli.sessions() as session:
        credential = session.get(GoogleCredential, "owner_1")
        assert credential is not None
        context = refresh_token_context("owner_1")
        assert new_only.decrypt(credential.refresh_token, context) == "refresh-owner_1"
        pii_ids = set(form.pii_question_ids)
        values = [
            (item["value"], answer_value_context(answer.id, item["questionId"]))
            for answer in session.query(SubmissionAnswer)
            for item in answer.answer
            if item["questionId"] in pii_ids
        ]
    assert values
    for value, context in values:
        new_only.decrypt(value, context)  # raises if any value stayed under the old key
    after = cli.ok("pii", "rotate", "--check", env=both)
    assert "submission_answer: 0 tokens left" in after.stdout
    assert "google_credential: 0 tokens left" in after.stdout

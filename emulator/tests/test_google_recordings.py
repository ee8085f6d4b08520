"""The emulator against recordings of the real Sheets API (google_recordings/):
every Sheets call replayed, Google's answers compared with the emulator's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httplib2
from emulator_support.google import credentials
from emulator_support.recordings import (
    MUST_MATCH_KINDS,
    RECORDINGS,
    Outcome,
    Replayer,
    cassettes,
)
from google_auth_httplib2 import AuthorizedHttp

from sheets_emulator import EmulatorAdmin, EmulatorServer

#: Share of the recorded Sheets interactions the emulator must answer as Google did.
REQUIRED_MATCH_RATE = 0.95


def replay_all(
    server: EmulatorServer, admin: EmulatorAdmin, paths: list[Path] | None = None
) -> list[Outcome]:
    admin.set_quotas(
        read_per_account=100_000,
        write_per_account=100_000,
        read_per_project=100_000,
        write_per_project=100_000,
    )
    admin.add_account("owner", "refresh-owner")
    http = AuthorizedHttp(credentials(server, "refresh-owner"), http=httplib2.Http(timeout=10))
    replayer = Replayer(server.url, http, admin)
    outcomes: list[Outcome] = []
    for cassette in cassettes() if paths is None else paths:
        outcomes.extend(replayer.replay(cassette))
    return outcomes


def test_the_emulator_answers_as_google_did(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin, capsys: Any
) -> None:
    outcomes = replay_all(emulator_server, emulator_admin)

    matched = sum(outcome.matched for outcome in outcomes)
    by_kind = Counter(outcome.kind for outcome in outcomes)
    missed = [outcome for outcome in outcomes if not outcome.matched]
    with capsys.disabled():
        print(
            f"\nGoogle recordings: {matched}/{len(outcomes)} interactions match "
            f"({matched / len(outcomes):.1%}); by kind: {dict(sorted(by_kind.items()))}"
        )
        for outcome in missed:
            print("  differs:", outcome.describe()[:300])
    assert len(cassettes()) == 27
    assert matched / len(outcomes) >= REQUIRED_MATCH_RATE
    assert [o.describe() for o in missed if o.kind in MUST_MATCH_KINDS] == []


def test_the_replay_notices_an_answer_google_did_not_give(
    emulator_server: EmulatorServer, emulator_admin: EmulatorAdmin, tmp_path: Path
) -> None:
    recorded = json.loads((RECORDINGS / "WorksheetTest.test_update_acell.json").read_text())
    for interaction in recorded["interactions"]:
        body = interaction["response"]["body"]["string"]
        if '"range": "Sheet1!A2"' in body:
            interaction["response"]["body"]["string"] = body.replace("acell 1", "acell 2")
            break
    else:
        raise AssertionError("the recording has no read of A2")
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(recorded))

    outcomes = replay_all(emulator_server, emulator_admin, [tampered])

    assert [o.differences for o in outcomes if not o.matched] == [
        ["$.values[0][0]: 'test_update_acell 1' != 'test_update_acell 2'"]
    ]

"""docs/getting-started.md, run as written.

"A minimal integration to run": the page's shell block, read from the page at test time,
runs verbatim in bash, in a directory laid out as the repository's root after
``make install`` (its ``.venv`` and ``examples/``), with no ``SHEETSYNC_*`` variable of the
test's. The block names fixed addresses (Redis on 127.0.0.1:6379, the emulator on port
8085), so it runs in network and PID namespaces of its own (``unshare``): its loopback is
its own, a fresh ``redis-server`` answers on 6379 there, no Redis or port of this machine
is touched, and every process it starts in the background ends with its shell.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session
from support.markdown import code_blocks, page, section
from support.paths import ROOT

from sheetsync.models import SheetTransaction, SpreadSheet, SubmissionAnswer, TransactionType

PAGE = "getting-started.md"
#: The example's own timeout is 60 s; this only stops a hang.
RUN_TIMEOUT_S = 240
#: What the example stores as the answer's personal info (its own made-up data).
EXAMPLE_PHONE = "010-0000-0000"

#: Before the page's text: the machine the page assumes, inside the namespaces.
PRELUDE = """\
ip link set lo up
redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --daemonize yes \\
  --dir "$PWD" --logfile "$PWD/redis.log"
for _ in $(seq 1 50); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done
"""
#: After it: the example's exit status, then the sheet as the emulator holds it.
EPILOGUE = """
status=$?
echo "docs-test: the example exited $status"
python check_sheet.py
exit $status
"""
SHEET_LINE = "docs-test: sheet "
#: Run by the epilogue (the page's environment, its python): the linked sheet's values.
CHECK_SHEET = """\
import json, os, urllib.request
from sqlalchemy import create_engine, text

with create_engine(os.environ["SHEETSYNC_DATABASE_URL"]).connect() as db:
    spreadsheet, gid = db.execute(text("SELECT spread_sheet_id, sheet_id FROM spread_sheet")).one()
emulator = os.environ["SHEETSYNC_GOOGLE_API_ENDPOINT"]
url = f"{emulator}/_emulator/spreadsheets/{spreadsheet}/sheets/{gid}"
request = urllib.request.Request(url, headers={"Accept": "application/json"})
with urllib.request.urlopen(request, timeout=10) as response:
    print("docs-test: sheet", json.dumps(json.load(response)["values"]))
"""


def minimal_integration() -> str:
    """Every shell block of the page's "A minimal integration to run", in order."""
    blocks = code_blocks(section(page(PAGE), "## A minimal integration to run"), "sh")
    assert blocks, f"{PAGE} has a shell block under 'A minimal integration to run'"
    return "\n".join(block.text for block in blocks)


def clean_environment() -> dict[str, str]:
    """This process's environment without SHEETSYNC_* and without the venv on PATH: the
    page's own `source .venv/bin/activate` must bring the commands."""
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SHEETSYNC_") and name not in {"VIRTUAL_ENV", "PYTHONPATH"}
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def namespaces() -> list[str]:
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


@pytest.mark.slow  # the whole stack: a redis-server, the emulator, a worker with beat
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not on PATH")
def test_the_minimal_integration_lands_its_row_as_written(tmp_path: Path) -> None:
    text = minimal_integration()
    assert "SHEETSYNC_DEVELOPMENT=true" in text  # without it the worker exits at once
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "check_sheet.py").write_text(CHECK_SHEET)
    # The block's own directory for the example's files (it makes a temporary one if
    # unset): here, one the test can read afterwards.
    env = {**clean_environment(), "EXAMPLE_DIR": str(tmp_path / "example")}

    run = subprocess.run(
        [*namespaces(), "bash", "-c", PRELUDE + text + EPILOGUE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    output = f"{run.stdout}\n{run.stderr}"
    assert run.returncode == 0, output
    assert "docs-test: the example exited 0" in run.stdout, output

    with Session(create_engine(f"sqlite:///{tmp_path / 'example' / 'example.db'}")) as session:
        answer = session.scalars(select(SubmissionAnswer)).one()
        link = session.scalars(select(SpreadSheet)).one()
        ledger = session.scalars(select(SheetTransaction)).one()
    assert (ledger.submission_answer_id, ledger.type) == (answer.id, TransactionType.COMPLETED)
    assert f"answer {answer.id} is in spreadsheet {link.spread_sheet_id}" in run.stdout

    [sheet_line] = [
        line for line in run.stdout.splitlines() if line.startswith("docs-test: sheet ")
    ]
    header, *rows = json.loads(sheet_line.removeprefix("docs-test: sheet "))
    assert [row[0] for row in rows] == [answer.id], output  # once, in the emulator's sheet
    assert rows[0][header.index("Phone")] == EXAMPLE_PHONE  # decrypted by the worker


def test_the_quick_start_commands_are_make_targets() -> None:
    """Each command of the quick start is a target of the Makefile (``make -n`` knows it);
    tests/dev/test_demo.py and test_demo_web.py run what ``make demo`` and
    ``make demo-web`` run."""
    [block] = code_blocks(section(page(PAGE), "## Quick start"), "sh")
    commands = [line.split("#", 1)[0].strip() for line in block.text.splitlines()]
    commands = [command for command in commands if command]
    assert commands == ["make demo", "make demo-web", "make test"], commands
    for command in commands:
        dry = subprocess.run(
            [*command.split(), "-n"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert dry.returncode == 0, f"{command}: {dry.stderr}"

"""A small seeded chaos run: every (answer, sheet) ends in one place, at its latest
version (or, deleted, nowhere), and no PII leaks.

The whole stack runs for real (see ``chaos.runner``); it needs PostgreSQL
(``SHEETSYNC_TEST_POSTGRES_URL``), ``redis-server`` and ``faketime`` on PATH. The
fault schedule is the seed's; what each fault hits depends on timing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from chaos import Chaos, ChaosConfig
from chaos.report import format_report

SEED = 7


@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_a_small_seeded_chaos_run_loses_duplicates_strands_and_leaks_nothing(
    tmp_path: Path,
) -> None:
    server = os.environ.get("SHEETSYNC_TEST_POSTGRES_URL")
    if not server:
        pytest.skip("SHEETSYNC_TEST_POSTGRES_URL is not set: the chaos run needs PostgreSQL")
    for program in ("redis-server", "faketime"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not on PATH (apt-get install {program})")
    config = ChaosConfig(
        seed=SEED,
        answers=300,
        sheets=6,
        faults_per_kind=2,
        emit_s=25,
        quiesce_timeout_s=75,
        postgres_url=server,
        log_dir=tmp_path / "chaos",
    )
    report = Chaos(config, out=lambda line: None).run()
    print(format_report(report))
    outcomes = report.accounting.outcomes
    assert outcomes["landed once"] + outcomes["deleted by a person"] > 0
    assert (outcomes["lost"], outcomes["duplicated"], outcomes["stranded"]) == (0, 0, 0), (
        format_report(report)
    )
    # The sheet follows the answer: edits and deletions happened, none left behind.
    assert report.edited and report.deleted and report.erased, format_report(report)
    assert outcomes["deleted"] > 0
    assert (outcomes["stale"], outcomes["row of a deleted answer"]) == (0, 0), format_report(report)
    assert report.pii.leaks == 0, format_report(report)

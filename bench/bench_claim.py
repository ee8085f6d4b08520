"""What the emit's claim costs as the driver's SQL against the statement object it is
compiled from (sheetsync/ledger/claim.py: ``_claim_by_driver_sql``, ``_claim_by_statement``).

Usage::

    python bench/bench_claim.py [--rounds 1000]

One answer's claim is what an emit runs in the web app's request. Each round, for a form
linked to 1 and to 3 sheets, the app's transaction inserts one answer and claims it,
once through each path (interleaved, so a busy machine slows both alike); the claim
alone and the whole transaction (begin to commit) are timed. Medians are printed, the
statement's beside the driver SQL's, measured in the same run.

PostgreSQL only (the driver's SQL runs where the driver takes named parameters: psycopg;
SQLite's driver takes qmark, and its claim is always the statement). PostgreSQL comes
from ``SHEETSYNC_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``; a scratch database is created and dropped).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_rows import DEFAULT_POSTGRES_URL, postgres_scratch  # noqa: E402

from sheetsync import crypto  # noqa: E402
from sheetsync.db import make_engine, session_factory, upgrade  # noqa: E402
from sheetsync.dev.seed import answer_items, link_sheet, seed_form  # noqa: E402
from sheetsync.ledger import claim  # noqa: E402
from sheetsync.models import SubmissionAnswer  # noqa: E402

Claim = Callable[[Session, Mapping[str, list[Any]]], Iterable[Any]]
PATHS: dict[str, Claim] = {
    "driver SQL": claim._claim_by_driver_sql,
    "statement": claim._claim_by_statement,
}


def bench(url: str, rounds: int) -> dict[tuple[int, str], tuple[list[int], list[int]]]:
    upgrade(url)
    engine = make_engine(url)
    factory = session_factory(engine)
    keyring = crypto.Keyring([os.urandom(32)])
    rng = random.Random(5)
    samples: dict[tuple[int, str], tuple[list[int], list[int]]] = {}
    try:
        forms = {}
        with factory.begin() as session:
            for sheets in (1, 3):
                form = seed_form(session, owner_id=f"owner{sheets}", pii=2, keyring=keyring)
                for n in range(sheets):
                    link_sheet(session, form, f"bench-{sheets}-{n}", 0)
                forms[sheets] = form
        counter = iter(range(10**9))

        def one(sheets: int, claim: Claim) -> tuple[int, int]:
            form = forms[sheets]
            answer_id = f"{form.submission_id}-{next(counter)}"
            items = answer_items(form, rng, keyring=keyring, answer_id=answer_id)
            start = time.perf_counter_ns()
            with factory.begin() as session:
                session.add(
                    SubmissionAnswer(
                        id=answer_id, submission_id=form.submission_id, answer=items, user_name="x"
                    )
                )
                session.flush()
                claim_start = time.perf_counter_ns()
                rows = list(claim(session, {"answer_ids": [answer_id]}))
                claim_took = time.perf_counter_ns() - claim_start
            took = time.perf_counter_ns() - start
            assert len(rows) == sheets, rows
            return claim_took, took

        for sheets in (1, 3):  # warm: compiled statements, the pool
            for claim in PATHS.values():
                one(sheets, claim)
        samples = {(sheets, name): ([], []) for sheets in (1, 3) for name in PATHS}
        for _ in range(rounds):
            for sheets in (1, 3):
                for name, claim in PATHS.items():
                    claim_took, took = one(sheets, claim)
                    samples[(sheets, name)][0].append(claim_took)
                    samples[(sheets, name)][1].append(took)
        return samples
    finally:
        engine.dispose()


def report(rounds: int, samples: dict[tuple[int, str], tuple[list[int], list[int]]]) -> None:
    print(f"PostgreSQL: one answer's claim in the app's transaction (median of {rounds}):")
    for sheets in (1, 3):
        claim = {name: statistics.median(samples[(sheets, name)][0]) / 1e6 for name in PATHS}
        whole = {name: statistics.median(samples[(sheets, name)][1]) / 1e6 for name in PATHS}
        fast, slow = claim["driver SQL"], claim["statement"]
        print(
            f"  {sheets} sheet{'s' if sheets > 1 else ' '}: claim by driver SQL {fast:6.3f} ms, "
            f"by statement {slow:6.3f} ms ({slow / fast:.2f}x); transaction "
            f"{whole['driver SQL']:6.3f} ms against {whole['statement']:6.3f} ms "
            f"({whole['statement'] / whole['driver SQL']:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    args = parser.parse_args()
    print(f"claim benchmark on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    server = os.environ.get("SHEETSYNC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    with postgres_scratch(server) as url:
        report(args.rounds, bench(url, args.rounds))


if __name__ == "__main__":
    main()

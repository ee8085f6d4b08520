"""Edits and deletions on real parts: Redis, a Celery worker process, the Sheets emulator.

Usage::

    python bench/bench_changes.py [--answers 1000]

One sheet holds ``2 x answers`` rows. Then, measured by the emulator's request count:

- **edits**: ``answers`` answers spread over the sheet (every other row) are edited in
  one transaction and emitted with ``emit_answers_updated``; the figure is the Sheets
  requests until every edited row shows its new version. Baseline, same run: one
  ``values.update`` per edit through the same client (what a per-event update costs).
- **deletions**: the other ``answers`` rows' answers are deleted and emitted with
  ``emit_answers_deleted``; the figure is the requests until no row of them is left.
  Baseline, same run: one ``deleteDimension`` per deletion on a copy of the sheet.
- **edit-to-sheet latency**: one answer edited alone, until its row shows it, less
  ``FLUSH_DELAY_S`` (the debounce it waits by design). Baseline, same run: one answer
  submitted alone, until its row lands, less the same delay.

Goal (issue 32): at most 3 requests per 1,000 edits and per 1,000 deletions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from bench_pipeline import Stack, stack_for_bench, wait_for  # noqa: E402

from sheetsync import (  # noqa: E402
    emit_answer_submitted,
    emit_answer_updated,
    emit_answers_deleted,
    emit_answers_submitted,
    emit_answers_updated,
)
from sheetsync.models import SubmissionAnswer  # noqa: E402
from sheetsync.sheets.client import SheetsClient, quote_title  # noqa: E402

DELAY_S = 1.0


def requests_so_far(stack: Stack) -> int:
    return int(sum(stack.admin.stats()["requests"]["by_kind"].values()))


def submitters(stack: Stack, link: tuple[str, int]) -> dict[str, str]:
    return {row[0]: row[1] for row in stack.admin.sheet_values(*link)[1:] if len(row) > 1}


def rename(stack: Stack, ids: list[str], version: str) -> None:
    with stack.services.sessions.begin() as session:
        for answer_id in ids:
            answer = session.get(SubmissionAnswer, answer_id)
            assert answer is not None
            answer.user_name = f"{answer_id} {version}"
        emit_answers_updated(ids, session=session)


def bench_bulk(stack: Stack, answers: int) -> None:
    form, [link] = stack.form("bulk")
    ids = stack.answers(form, 2 * answers, "bulk")
    emit_answers_submitted(ids)
    wait_for(lambda: stack.rows(link) == len(ids), timeout=300)
    edited, deleted = ids[::2], ids[1::2]  # spread over the whole sheet

    before = requests_so_far(stack)
    took = time.perf_counter()
    rename(stack, edited, "v2")
    wanted = {answer_id: f"{answer_id} v2" for answer_id in edited}
    wait_for(lambda: wanted.items() <= submitters(stack, link).items(), timeout=120, interval=0.2)
    edit_s, edit_requests = time.perf_counter() - took, requests_so_far(stack) - before

    before = requests_so_far(stack)
    took = time.perf_counter()
    emit_answers_deleted(deleted)
    wait_for(lambda: stack.rows(link) == len(edited), timeout=120, interval=0.2)
    delete_s, delete_requests = time.perf_counter() - took, requests_so_far(stack) - before
    assert not set(deleted) & set(submitters(stack, link))

    per_edit_s, per_delete_s = baselines(stack, link, edited)
    scale = 1000 / answers
    print(
        f"{answers} edits spread over a sheet of {len(ids)} rows: "
        f"{edit_requests} Sheets requests ({edit_requests * scale:.1f} per 1,000; goal <= 3), "
        f"all shown {edit_s:.1f} s after the emit; baseline, one values.update per edit: "
        f"{answers} requests ({1000:.0f} per 1,000), {per_edit_s * answers:.1f} s"
    )
    print(
        f"{answers} deletions spread over the same sheet: "
        f"{delete_requests} Sheets requests ({delete_requests * scale:.1f} per 1,000; goal <= 3), "
        f"all gone {delete_s:.1f} s after the emit; baseline, one deleteDimension per "
        f"deletion: {answers} requests ({1000:.0f} per 1,000), {per_delete_s * answers:.1f} s"
    )


def baselines(stack: Stack, link: tuple[str, int], ids: list[str]) -> tuple[float, float]:
    """Seconds per request of a per-event update and a per-event deletion, through the
    same client, on a copy of the sheet (so the pipeline's sheet is left as it is)."""
    spreadsheet_id, gids = stack.admin.create_spreadsheet("google-bulk", "Copy", ["Copy"])
    rows = stack.admin.sheet_values(*link)
    stack.admin.update_values(spreadsheet_id, f"Copy!A1:C{len(rows)}", [r[:3] for r in rows])
    client = SheetsClient("refresh-bulk")
    title = quote_title("Copy")
    took = time.perf_counter()
    for number, answer_id in enumerate(ids, start=2):
        client.update_ranges(spreadsheet_id, [(f"{title}!B{number}", [[f"{answer_id} v3"]])])
    per_edit = (time.perf_counter() - took) / len(ids)
    took = time.perf_counter()
    for number in range(len(ids), 0, -1):
        client.delete_rows(spreadsheet_id, [(gids["Copy"], number, number + 1)])
    per_delete = (time.perf_counter() - took) / len(ids)
    return per_edit, per_delete


def bench_latency(stack: Stack, runs: int = 5) -> None:
    form, [link] = stack.form("solo")
    submit, edit = [], []
    for n in range(runs):
        [answer_id] = stack.answers(form, 1, f"solo{n}")
        started = time.perf_counter()
        emit_answer_submitted(answer_id)
        wait_for(lambda a=answer_id: a in submitters(stack, link), timeout=30, interval=0.01)
        submit.append(time.perf_counter() - started - DELAY_S)
        time.sleep(DELAY_S)  # its buffer's job is done before the edit comes
        with stack.services.sessions.begin() as session:
            answer = session.get(SubmissionAnswer, answer_id)
            assert answer is not None
            answer.user_name = "edited"
            emit_answer_updated(answer, session=session)
        started = time.perf_counter()
        wait_for(
            lambda a=answer_id: submitters(stack, link).get(a) == "edited",
            timeout=30,
            interval=0.01,
        )
        edit.append(time.perf_counter() - started - DELAY_S)
    print(
        f"one edit alone (FLUSH_DELAY_S={DELAY_S:g}, {runs} runs): shown FLUSH_DELAY + "
        f"{statistics.median(edit) * 1000:.0f} ms median, {max(edit) * 1000:.0f} ms worst; "
        f"baseline, one submit alone: FLUSH_DELAY + {statistics.median(submit) * 1000:.0f} ms "
        f"median, {max(submit) * 1000:.0f} ms worst"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=1000)
    args = parser.parse_args()
    print(f"edit and deletion benchmarks on {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    with stack_for_bench() as stack:
        stack.configure(flush_delay_s=DELAY_S, batch_size=5000, flush_threshold=5000)
        stack.start_workers(1)
        bench_bulk(stack, args.answers)
        bench_latency(stack)


if __name__ == "__main__":
    main()

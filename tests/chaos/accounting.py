"""Where every (answer, linked sheet) ended, read from the sheets, the ledger and the dead
letters once the run is quiet.

The right end state of a run: every fault was transient or healed (Google answers again,
Redis is back, every revoked owner reconnected), so every (answer, sheet) should be in
the sheet exactly once, or gone by a person's hand. A PENDING dead letter is a legitimate
end only while its next attempt is still to come for a reason that still holds (retries
exhausted, due later); a CREDENTIAL one after the owner reconnected, a due one nobody took,
or a REPLAYING one is stranded.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Engine, inspect, text

from chaos.faults import RowDeletion
from chaos.webapp import Journal, Link
from sheets_emulator import EmulatorAdmin

OUTCOMES = (
    "landed once",
    "restored after a deletion",
    "deleted by a person",
    "dead letter",
    "FAILED",
    "lost",
    "duplicated",
    "stranded",
    "refused by Google",
    "deleted",
    "deletion pending",
    "edit pending",
    "stale",
    "row of a deleted answer",
)
#: The outcomes a run must not have. The run injects no refusal: a row Google refused
#: (FAILED for it, or in a PERMANENT dead letter) was a request built above Google's
#: limits, by a hostile answer or one of its neighbours.
BAD_OUTCOMES = (
    "lost",
    "duplicated",
    "stranded",
    "refused by Google",
    "stale",
    "row of a deleted answer",
)
#: How a FAILED reason says Google refused the row (sheetsync.flush.writer, batches).
_REFUSAL_WORDS = ("Google refused", "cannot be cut to fit")
#: "restored after a deletion": a person deleted the row while its append was still
#: unconfirmed (not yet COMPLETED in the ledger, e.g. the response was dropped); the
#: recovery read cannot find it, so it is appended again. The sheet holds it once. Had
#: the ledger said COMPLETED when the row was deleted, a second append is "duplicated".

Sheet = tuple[str, int]
Target = tuple[str, str, int]


@dataclass(frozen=True)
class Finding:
    answer_id: str
    sheet: Sheet
    detail: str


@dataclass
class Accounting:
    outcomes: Counter[str] = field(default_factory=Counter)
    failed_reasons: Counter[str] = field(default_factory=Counter)
    duplicate_causes: Counter[str] = field(default_factory=Counter)
    findings: dict[str, list[Finding]] = field(default_factory=lambda: defaultdict(list))
    ledger_mismatches: list[Finding] = field(default_factory=list)
    unexpected_rows: list[str] = field(default_factory=list)
    answers: int = 0
    targets: int = 0

    @property
    def failures(self) -> int:
        return sum(self.outcomes[name] for name in BAD_OUTCOMES)


@dataclass(frozen=True)
class DeadLetterRow:
    id: int
    user_id: str
    spreadsheet_id: str
    gid: int
    status: str
    reason: str
    next_attempt_at: datetime
    answer_ids: tuple[str, ...]


def read_dead_letters(engine: Engine) -> list[DeadLetterRow]:
    """Every dead letter with its answer ids, whether they live in a JSON column or in a
    table of their own (the schema is changing under this suite)."""
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT id, user_id, spread_sheet_id, sheet_id, status, reason, next_attempt_at"
                " FROM dead_letter"
            )
        ).all()
        ids: dict[int, list[str]] = defaultdict(list)
        if inspect(connection).has_table("dead_letter_answer"):
            query = text("SELECT dead_letter_id, answer_id FROM dead_letter_answer")
            for entry_id, answer_id in connection.execute(query):
                ids[entry_id].append(answer_id)
        else:
            for entry_id, held in connection.execute(
                text("SELECT id, answer_ids FROM dead_letter")
            ):
                ids[entry_id].extend(held or [])
    return [
        DeadLetterRow(
            r.id,
            r.user_id,
            r.spread_sheet_id,
            r.sheet_id,
            r.status,
            r.reason,
            r.next_attempt_at,
            tuple(ids[r.id]),
        )
        for r in rows
    ]


def read_sheets(admin: EmulatorAdmin, sheets: list[Sheet]) -> dict[Sheet, list[list[str]]]:
    """The rows of every sheet, below the header (a blank row a person inserted is [])."""
    return {sheet: admin.sheet_values(*sheet)[1:] for sheet in sheets}


def account(
    *,
    engine: Engine,
    admin: EmulatorAdmin,
    links: list[Link],
    journal: Journal,
    deletions: list[RowDeletion],
    header: str = "Answer ID",
) -> Accounting:
    result = Accounting()
    sheets_of: dict[str, list[Sheet]] = defaultdict(list)
    for link in links:
        if link.sheet not in sheets_of[link.form_id]:
            sheets_of[link.form_id].append(link.sheet)
    all_sheets = sorted({link.sheet for link in links})
    sheet_rows = read_sheets(admin, all_sheets)
    columns = {
        sheet: [row[0] if row else "" for row in found] for sheet, found in sheet_rows.items()
    }
    submitters = {
        (row[0], *sheet): (row[1] if len(row) > 1 else "")
        for sheet, found in sheet_rows.items()
        for row in found
        if row
    }
    with engine.connect() as connection:
        query = text("SELECT id, submission_id FROM submission_answer")
        answers: dict[str, str] = {a: f for a, f in connection.execute(query)}
        ledger = {}
        changes = {}
        for row in connection.execute(
            text(
                "SELECT submission_answer_id, spread_sheet_id, sheet_id, type, error_message,"
                " change FROM sheet_transaction"
            )
        ):
            target = (row.submission_answer_id, row.spread_sheet_id, row.sheet_id)
            ledger[target] = (row.type, row.error_message)
            changes[target] = row.change
    entries: dict[Target, list[DeadLetterRow]] = defaultdict(list)
    for entry in read_dead_letters(engine):
        for answer_id in entry.answer_ids:
            entries[(answer_id, entry.spreadsheet_id, entry.gid)].append(entry)

    deleted: Counter[Target] = Counter()
    deleted_unconfirmed: Counter[Target] = Counter()
    for deletion in deletions:
        for answer_id, state in zip(deletion.answer_ids, deletion.states, strict=True):
            deleted[(answer_id, deletion.spreadsheet_id, deletion.gid)] += 1
            if state != "COMPLETED":
                deleted_unconfirmed[(answer_id, deletion.spreadsheet_id, deletion.gid)] += 1

    rows: dict[Target, list[int]] = defaultdict(list)
    for sheet, column in columns.items():
        for position, value in enumerate(column, start=2):
            if value == "":
                continue  # a blank row a person inserted
            if value in journal.deleted:
                rows[(value, *sheet)].append(position)
                continue
            if answers.get(value) is None or sheet not in sheets_of[answers[value]]:
                result.unexpected_rows.append(f"{sheet[0]}:{sheet[1]} row {position}: {value!r}")
                continue
            rows[(value, *sheet)].append(position)
    if any(header in column for column in columns.values()):
        result.unexpected_rows.append("a header row below row 1")

    now = datetime.now(UTC)
    result.answers = len(answers)
    for answer_id, form_id in sorted(answers.items()):
        for sheet in sheets_of[form_id]:
            target: Target = (answer_id, *sheet)
            result.targets += 1
            outcome, detail = _classify(
                target, rows[target], deleted[target], ledger.get(target), entries[target], now
            )
            if (
                outcome == "duplicated"
                and len(rows[target]) == 1
                and deleted[target] == deleted_unconfirmed[target]
            ):
                outcome = "restored after a deletion"
            if outcome == "landed once" and answer_id in journal.edited:
                shown = submitters.get(target)
                if shown != journal.edited[answer_id]:
                    waiting = _waits(target, changes.get(target), entries[target], now)
                    outcome = "edit pending" if waiting else "stale"
                    detail = f"row shows {shown!r}, the latest is {journal.edited[answer_id]!r}"
            result.outcomes[outcome] += 1
            if outcome == "FAILED":
                result.failed_reasons[_reason(detail)] += 1
            if outcome in BAD_OUTCOMES:
                if outcome == "duplicated":
                    causes = _duplicate_causes(target, form_id, journal, deleted[target])
                    result.duplicate_causes.update(causes)
                    detail = f"{detail}; suspected: {', '.join(causes)}"
                result.findings[outcome].append(Finding(answer_id, sheet, detail))
            mismatch = _mismatch(outcome, ledger.get(target), entries[target])
            if mismatch:
                result.ledger_mismatches.append(Finding(answer_id, sheet, mismatch))
    for answer_id in sorted(journal.deleted):
        form_id = journal.emitted[answer_id][0]
        for sheet in sheets_of[form_id]:
            target = (answer_id, *sheet)
            result.targets += 1
            if not rows[target]:
                result.outcomes["deleted"] += 1
                continue
            if _waits(target, changes.get(target), entries[target], now):
                result.outcomes["deletion pending"] += 1
                continue
            result.outcomes["row of a deleted answer"] += 1
            detail = f"rows {rows[target]}; ledger {ledger.get(target)}, {changes.get(target)}"
            result.findings["row of a deleted answer"].append(Finding(answer_id, sheet, detail))
    return result


def _waits(target: Target, change: str | None, entries: list[DeadLetterRow], now: datetime) -> bool:
    """Whether a change of this (answer, sheet) legitimately waits: it is pending in a
    dead letter whose next attempt is still to come for a reason that still holds."""
    if change is None:
        return False
    return any(
        e.status == "PENDING" and e.reason != "CREDENTIAL" and e.next_attempt_at > now
        for e in entries
    )


def _classify(
    target: Target,
    positions: list[int],
    deleted: int,
    ledger: tuple[str, str | None] | None,
    entries: list[DeadLetterRow],
    now: datetime,
) -> tuple[str, str]:
    appended = len(positions) + deleted
    state, error = ledger or ("none", None)
    if appended > 1:
        where = f"rows {positions}" + (f" and {deleted} deleted by a person" if deleted else "")
        return "duplicated", f"{appended} appends ({where}); ledger {state}"
    if appended == 1:
        return ("landed once", "") if positions else ("deleted by a person", "")
    pending = [e for e in entries if e.status == "PENDING"]
    replaying = [e for e in entries if e.status == "REPLAYING"]
    if state == "ENQUEUED":
        return "stranded", "ledger still ENQUEUED"
    if replaying:
        return "stranded", f"dead letter {replaying[0].id} still REPLAYING"
    for entry in pending:
        if entry.reason == "CREDENTIAL":
            return "stranded", f"CREDENTIAL dead letter {entry.id} PENDING after reconnecting"
        if entry.next_attempt_at <= now:
            return "stranded", f"dead letter {entry.id} due since {entry.next_attempt_at:%T}"
        if entry.reason == "PERMANENT":
            return "refused by Google", f"PERMANENT dead letter {entry.id}"
        return "dead letter", f"{entry.reason} dead letter {entry.id}"
    if state == "FAILED" and any(words in (error or "") for words in _REFUSAL_WORDS):
        return "refused by Google", f"FAILED: {error}"
    if state in ("FAILED", "VALIDATION_FAILED"):
        return "FAILED", f"{state}: {error or '(no reason)'}"
    return "lost", f"no row, not deleted, ledger {state}, no open dead letter"


def _mismatch(
    outcome: str, ledger: tuple[str, str | None] | None, entries: list[DeadLetterRow]
) -> str | None:
    """The ledger (or a dead letter) saying otherwise than where the answer is."""
    state = ledger[0] if ledger else "none"
    open_entries = [e.id for e in entries if e.status in ("PENDING", "REPLAYING")]
    if outcome in ("landed once", "restored after a deletion", "deleted by a person"):
        if state != "COMPLETED":
            return f"{outcome}, but the ledger says {state}"
        if open_entries:
            return f"{outcome}, but still in open dead letter(s) {open_entries}"
    if outcome == "dead letter" and state != "DEAD_LETTERED":
        return f"in a PENDING dead letter, but the ledger says {state}"
    return None


def _duplicate_causes(target: Target, form_id: str, journal: Journal, deleted: int) -> list[str]:
    answer_id, spreadsheet_id, gid = target
    causes = []
    linked_twice_at = journal.duplicate_links.get((form_id, spreadsheet_id, gid))
    emitted_at = journal.emitted.get(answer_id, (form_id, 0.0))[1]
    emits = [emitted_at, *journal.reemits.get(answer_id, [])]
    if linked_twice_at is not None and any(t >= linked_twice_at for t in emits):
        causes.append("duplicate link")
    if answer_id in journal.reemits:
        causes.append("re-emit")
    if deleted:
        causes.append("appended again after a person deleted it")
    return causes or ["pipeline (no app-side cause)"]


def _reason(detail: str) -> str:
    """A FAILED reason with answer ids and numbers masked, to group alike reasons."""
    masked = re.sub(r"ans-\d+-\d+", "<answer>", detail)
    return re.sub(r"\d+", "N", masked)[:160]

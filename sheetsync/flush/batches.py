"""Turn the head of a buffer into rows to append: hydrate, skip, build, cut to size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import tzinfo

from sqlalchemy.orm import Session

from sheetsync.errors import ConfigError, CryptoError, ValidationError
from sheetsync.flush.cells import estimate_bytes, fit_row
from sheetsync.flush.hydrate import fetch_answers
from sheetsync.flush.layout import FormLayout, load_layout
from sheetsync.flush.rows import RowBuilder
from sheetsync.flush.typed import Cell
from sheetsync.ledger import SETTLED, Entry, entries
from sheetsync.models import AnswerChange, TransactionType
from sheetsync.redis_keys import BufferKey
from sheetsync.settings import Settings

#: Reasons recorded on FAILED ledger rows.
MISSING_ANSWER = "answer no longer exists"
OTHER_FORM = "answer belongs to another form"
TOO_LARGE = "its row cannot be cut to fit one request (SHEETSYNC_REQUEST_BYTES_MAX)"


@dataclass
class Batch:
    """Rows for one append, and what the buffer head they came from settles to.

    ``consumed`` is the head of the list this batch covers (the LTRIM count); each id
    in it is either appended (``appended_ids``), failed (``failed``, with the reason),
    rewritten in place (``updates``), removed (``deletions``), recorded DELETED without a
    request (``deleted``: it was never written), or was already settled (skipped).
    """

    consumed: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    appended_ids: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: Landed answers that were edited: their rows at the latest version.
    updates: dict[str, list[Cell]] = field(default_factory=dict)
    #: Landed answers that were deleted: their rows go.
    deletions: list[str] = field(default_factory=list)
    #: Deleted answers that never landed.
    deleted: list[str] = field(default_factory=list)
    #: Edits of answers a dead letter holds: its replay appends the latest version.
    moot: list[str] = field(default_factory=list)
    #: Edits whose row cannot be built (the reason): the row keeps its last version.
    failed_updates: dict[str, str] = field(default_factory=dict)
    #: ``change_seq`` as read, of each appended or updated id that had an UPDATE pending.
    seqs: dict[str, int] = field(default_factory=dict)

    @property
    def has_changes(self) -> bool:
        return bool(self.updates or self.deletions)

    def cut(self, max_bytes: int) -> Batch:
        """The longest prefix whose request stays under ``max_bytes``.

        The cut is between rows, never inside one; ids after the cut stay in the list.
        A first row too large for any request has its longest cells cut to fit
        (:func:`fit_row`), or fails alone when it cannot be: no request is built above
        the budget, so one answer never takes its neighbours' request down with it.
        """
        # 2% and 200 bytes of room for the envelope and escapes the estimate leaves out.
        budget = int(max_bytes * 0.98) - 200
        batch = replace(
            self,
            rows=list(self.rows),
            appended_ids=list(self.appended_ids),
            positions=list(self.positions),
            failed=dict(self.failed),
            updates=dict(self.updates),
            deletions=list(self.deletions),
            deleted=list(self.deleted),
            moot=list(self.moot),
            failed_updates=dict(self.failed_updates),
            seqs=dict(self.seqs),
        )
        used = keep = 0
        while keep < len(batch.rows):
            size = estimate_bytes(batch.rows[keep])
            if size > budget and keep == 0:
                fitted = fit_row(batch.rows[0], budget)
                if fitted is None:
                    batch.failed[batch.appended_ids[0]] = (
                        f"answer {batch.appended_ids[0]}: {TOO_LARGE}"
                    )
                    del batch.rows[0], batch.appended_ids[0], batch.positions[0]
                    continue
                batch.rows[0] = fitted
                size = estimate_bytes(fitted)
            used += size
            if used > budget:
                break
            keep += 1
        return batch.keep_rows(keep)

    def keep_rows(self, keep: int) -> Batch:
        """The first ``keep`` rows (and the head of the list up to them); ids after the
        cut stay in the list for the next batch."""
        if keep >= len(self.rows):
            return self
        end = self.positions[keep]
        consumed = self.consumed[:end]
        kept = set(consumed)
        return replace(
            self,
            consumed=consumed,
            rows=self.rows[:keep],
            appended_ids=self.appended_ids[:keep],
            positions=self.positions[:keep],
            failed={k: v for k, v in self.failed.items() if k in kept},
            updates={k: v for k, v in self.updates.items() if k in kept},
            deletions=[k for k in self.deletions if k in kept],
            deleted=[k for k in self.deleted if k in kept],
            moot=[k for k in self.moot if k in kept],
            failed_updates={k: v for k, v in self.failed_updates.items() if k in kept},
            seqs={k: v for k, v in self.seqs.items() if k in kept},
        )


class BatchBuilder:
    """Builds batches for one buffer; caches the form's layout for the run, and a row
    builder per column layout."""

    def __init__(self, settings: Settings, key: BufferKey) -> None:
        self.settings = settings
        self.key = key
        self._layout: FormLayout | None = None
        self._rows: RowBuilder | None = None

    def layout(self, session: Session) -> FormLayout:
        """The form's own layout (its questions in form order), read once per run."""
        if self._layout is None:
            self._layout = load_layout(session, self.key.submission_id)
        return self._layout

    def _row_builder(self, layout: FormLayout, zone: tzinfo | None) -> RowBuilder:
        rows = self._rows
        if rows is None or rows.layout != layout or (zone is not None and rows.zone != zone):
            typed = layout.positions is not None
            rows = self._rows = RowBuilder(layout, self.settings, zone=zone, typed=typed)
        return rows

    def build(
        self,
        session: Session,
        ids: Sequence[str],
        *,
        skip: frozenset[TransactionType] = SETTLED,
        layout: FormLayout | None = None,
        zone: tzinfo | None = None,
    ) -> Batch:
        """Rows for ``ids`` in order, skipping duplicates and ids whose ledger state is in
        ``skip`` (a replay skips only COMPLETED: its ids are DEAD_LETTERED or FAILED).

        ``layout`` is the link's column map (:func:`sheetsync.flush.header.
        columns_for_batch`), whose rows have typed cells in ``zone``; without one, the
        form's own layout, all text."""
        layout = layout or self.layout(session)
        rows = self._row_builder(layout, zone)
        ledger = entries(session, ids, self.key.spread_sheet_id, self.key.sheet_id)
        plan = {i: _plan(ledger.get(i), skip) for i in dict.fromkeys(ids)}
        wanted = [i for i, step in plan.items() if step in ("append", "update")]
        answers = fetch_answers(session, wanted) if wanted else {}
        batch = Batch(consumed=list(ids))
        seen: set[str] = set()
        for position, answer_id in enumerate(ids):
            step = plan[answer_id]
            if answer_id in seen or step == "skip":
                continue
            seen.add(answer_id)
            entry = ledger.get(answer_id)
            if entry is not None and entry.change is AnswerChange.UPDATE:
                batch.seqs[answer_id] = entry.seq
            answer = answers.get(answer_id)
            if step == "delete" or (step == "update" and answer is None):
                batch.deletions.append(answer_id)  # an answer gone is a deleted one
                continue
            if step == "forget":
                batch.deleted.append(answer_id)
                continue
            if step == "moot":
                batch.moot.append(answer_id)
                continue
            if answer is None:
                batch.failed[answer_id] = MISSING_ANSWER
                continue
            if answer.submission_id != self.key.submission_id:
                batch.failed[answer_id] = OTHER_FORM
                continue
            try:
                row = rows.build(answer.id, answer.user_name, answer.submitted_at, answer.answer)
            except ConfigError:
                raise  # a PII key is missing: the configuration's fault; the run retries
            except (ValidationError, CryptoError) as exc:
                if step == "update":  # its row keeps the last version that could be built
                    batch.failed_updates[answer_id] = str(exc)
                else:
                    batch.failed[answer_id] = str(exc)
                continue
            if step == "update":
                batch.updates[answer_id] = row
                continue
            batch.rows.append(row)
            batch.appended_ids.append(answer_id)
            batch.positions.append(position)
        return batch


def _plan(entry: Entry | None, skip: frozenset[TransactionType]) -> str:
    """What a batch does with an id: ``append`` it, ``update`` or ``delete`` its row,
    ``forget`` it (deleted before it landed: DELETED, no request), clear its edit as
    ``moot``, or ``skip`` it."""
    state = entry.state if entry is not None else None
    change = entry.change if entry is not None else None
    if state is TransactionType.DELETED:
        return "skip"  # whatever asks: a deleted answer is never written again
    if change is AnswerChange.DELETE:
        return "delete" if state is TransactionType.COMPLETED else "forget"
    if change is AnswerChange.UPDATE:
        if state is TransactionType.COMPLETED:
            return "update"
        if state is TransactionType.FAILED:
            return "append"  # the edit may have mended what failed
        if state is TransactionType.DEAD_LETTERED and state in skip:
            return "moot"  # its replay appends the latest version
    return "skip" if state in skip else "append"

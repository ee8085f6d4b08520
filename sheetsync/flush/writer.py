"""The write path of a batch: intent, append, and the rows Google refuses.

Every append goes through :meth:`SheetWriter.append`: a durable intent is committed
first, with the lease just renewed (:meth:`~sheetsync.flush.sheet.SheetAccess.send`,
which fences a run that lost its buffer), and the request may not outlive that lease.
A 400 caused by the rows' content is split until the refused rows are found; the others
land (docs/ARCHITECTURE.md, "One flush run").
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sheetsync.buffers.store import Lease
from sheetsync.errors import (
    ContentRefusedError,
    TransientError,
    UnexplainedRefusalError,
)
from sheetsync.flush import intents
from sheetsync.flush.sheet import ActiveTab
from sheetsync.flush.typed import Cell
from sheetsync.sheets.client import AppendResult, SheetsClient, quote_title
from sheetsync.sheets.google_errors import VALUES_REFUSED

log = logging.getLogger(__name__)

#: No append starts with less than this left of the lease (and every request ends
#: before the lease does: :data:`sheetsync.flush.sheet.DEFAULT_LEASE_MARGIN_S`).
DEFAULT_MIN_REQUEST_S = 0.5
#: Recorded FAILED for a row whose values Google refused.
REFUSED_REASON = "Google refused the row's values (400 INVALID_ARGUMENT)"
#: Recorded FAILED for a row Google refused for another reason: the error's own words
#: (status and codes, never Google's text) follow.
REFUSED_OTHERWISE = "Google refused the row"


@dataclass
class Appended:
    """What one batch's append did: the ids now in the sheet, the refused ones."""

    landed: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    #: The sheet's last row after it; None when Google's reply did not say.
    last_row: int | None = None


class SheetWriter:
    """Writes the batches of one run to its link's active tab."""

    def __init__(self, active: ActiveTab) -> None:
        self.active = active
        self.access = active.access

    def append(
        self,
        rows: Sequence[list[Cell]],
        ids: Sequence[str],
        *,
        after_row: int | None,
    ) -> tuple[int, Appended]:
        """Commit the intent, then append to the active tab. Returns the intent's id and
        what landed.

        The intent stays open when the append may have landed without our knowing
        (an ambiguous failure): the next run resolves it by reading the sheet.
        """
        title = self.active.title()
        appended = Appended()
        intent: list[int] = []  # the intent's id, once recorded (before the first append)
        try:
            self._append_finding_refusals(title, list(rows), list(ids), after_row, intent, appended)
        except TransientError as exc:
            if not intent:
                raise
            intent_id = intent[0]
            if not exc.ambiguous and not appended.landed:
                self._drop_intent(intent_id)
            elif exc.status is not None:
                with self.access.services.sessions.begin() as session:
                    intents.answered(session, intent_id)
            raise
        except Exception:
            if intent and not appended.landed:
                self._drop_intent(intent[0])  # nothing was sent, or nothing landed
            raise
        return intent[0], appended

    def _append_finding_refusals(
        self,
        title: str,
        rows: list[list[Cell]],
        ids: list[str],
        after_row: int | None,
        intent: list[int],
        appended: Appended,
    ) -> None:
        """Append ``rows``; when Google refuses them for their content (a 400 on the
        values, a request too large, any other 4xx that names no credential, access,
        spreadsheet or range), split them until the refused rows are alone. (Row 1 was
        written before: :mod:`sheetsync.flush.header`.)

        The first part records the intent (its id goes into ``intent``) with the lease
        just renewed; each part after it moves the intent's deadline with its own
        renewal, so a successor still waits for the last append that may land. An
        unexplained 4xx that refuses the first two rows sent alone, with nothing landed,
        is the request's fault, not theirs: it is raised for the whole buffer, as before."""
        access = self.access
        key, gid = access.key, self.active.gid

        def record(lease: Lease) -> None:
            with access.services.sessions.begin() as session:
                intent_id = intents.record(session, key, lease, ids, after_row, gid)
            intent.append(intent_id)  # committed: dropped again if nothing lands
            self._check_time_left()

        def extend(lease: Lease) -> None:
            with access.services.sessions.begin() as session:
                intents.extend(session, intent[0], lease.until_ms)
            self._check_time_left()

        a1_range = f"{quote_title(title)}!A:A"
        segments = [(rows, ids)]
        unexplained_alone = 0
        while segments:
            part_rows, part_ids = segments.pop(0)
            try:
                # Column A only: Google's table detection then finds the table by the
                # answer ids, so it starts at A whatever a person typed in row 1 or to
                # the right of the data, and every cell stays under its column.
                result = access.send(
                    "values.append",
                    functools.partial(_append, key.spread_sheet_id, a1_range, part_rows),
                    before=extend if intent else record,
                )
            except ContentRefusedError as refusal:
                if len(part_rows) == 1:
                    if isinstance(refusal, UnexplainedRefusalError):
                        unexplained_alone += 1
                        if unexplained_alone >= 2 and not appended.landed:
                            raise
                    log.warning("flush of %s: Google refused one row", key.base)
                    appended.refused[part_ids[0]] = f"answer {part_ids[0]}: {_reason(refusal)}"
                    continue
                half = len(part_rows) // 2
                segments[:0] = [
                    (part_rows[:half], part_ids[:half]),
                    (part_rows[half:], part_ids[half:]),
                ]
                continue
            appended.landed += part_ids
            appended.last_row = result.last_row

    def _check_time_left(self) -> None:
        deadline = self.access.client.deadline
        assert deadline is not None  # set by every renewal
        if deadline - time.monotonic() < DEFAULT_MIN_REQUEST_S:
            raise TransientError("the database took the lease's time; retrying", ambiguous=False)

    def _drop_intent(self, intent_id: int) -> None:
        with self.access.services.sessions.begin() as session:
            intents.resolve(session, intent_id)


def _append(
    spreadsheet_id: str, a1_range: str, rows: list[list[Cell]], client: SheetsClient
) -> AppendResult:
    return client.append_rows(spreadsheet_id, a1_range, rows)


def _reason(refusal: ContentRefusedError) -> str:
    """Why a lone row was refused, in words that hold no value of it."""
    if str(refusal).endswith(VALUES_REFUSED):
        return REFUSED_REASON
    return f"{REFUSED_OTHERWISE} ({refusal})"

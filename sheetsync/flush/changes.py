"""Edits and deletions of answers whose rows landed: the sheet follows the answer.

An answer's rows are found by its id in column A, read when the change is applied: the
id moves with its row whatever people did to the sheet since (sorted it, inserted or
deleted rows above it, added columns of their own; the header check pauses a link whose
column A moved), in the active tab and in the tabs the link rolled over from. Developer
metadata on each row would survive the same moves, but it costs a request per appended
batch and reads of its own, and column A is already the row's identity: an intent is
resolved by it too (docs/ARCHITECTURE.md, "The sheet follows the answer").

One run's changes cost one read (``values.batchGet`` of column A of the link's tabs; one
more, ``spreadsheets.get``, once the link has rolled over), one ``values.batchUpdate`` for
every edit (the cells sheetsync owns, nothing else in the row) and one ``batchUpdate`` of
``deleteDimension`` ranges for every deletion, bottom up so no deletion moves another.
All of them are idempotent: a run that crashed is repeated, reading column A again.

Google has no "delete this row if it still holds this id", so a person who sorts the
sheet (or inserts or deletes rows) between the read and the deletion can put another
answer's row where the deleted one was. A deletion is therefore checked: column A is
read again after it (a third request), and an answer whose row is still there stays
pending and goes again, while an answer whose row went without being asked (a row the
deletion hit by mistake) is appended again at its latest version (``Followed.restored``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sheetsync.errors import TransientError, WaitForIntent
from sheetsync.flush.cells import estimate_bytes, fit_row
from sheetsync.flush.columns import column_letters
from sheetsync.flush.layout import FIXED_COLUMNS, FormLayout
from sheetsync.flush.rollover import rolled_title
from sheetsync.flush.sheet import ActiveTab
from sheetsync.flush.typed import Cell
from sheetsync.ledger import DELETED_NO_ROW, DELETED_ROW_BLANKED, DELETED_ROW_REMOVED
from sheetsync.sheets.client import quote_title

log = logging.getLogger(__name__)

#: Recorded on an edit too large for any request: the row keeps its version before.
UPDATE_TOO_LARGE = "its edited row cannot be cut to fit one request"
#: Recorded (the change kept pending) when a row is not found and a tab of the link
#: could not be found either: the row may be there, so nothing says it is gone.
TAB_NOT_FOUND = (
    "a roll-over tab of its link was not found by its title (renamed?): "
    "pending until the tab is named as sheetsync named it"
)
#: Recorded (the deletion kept pending, and sent again) when its row was still there
#: after the deletion: a person moved rows between the read and the deletion.
ROW_MOVED = "its row moved while it was deleted: deleted again by the next run"

#: Where an answer's row is: the tab's title and gid, and the row's index (0 is row 1).
Place = tuple[str, int, int]
#: Cells of an edited answer's row to write: (answer id, A1 range, the range's rows).
Range = tuple[str, str, list[list[Cell]]]


@dataclass
class Followed:
    """What applying some of a batch's changes did (handed to the run as it happens)."""

    updated: list[str] = field(default_factory=list)
    #: Deleted answers whose rows are gone: id -> a ``ledger.DELETED_*`` reason.
    deleted: dict[str, str] = field(default_factory=dict)
    #: Edits whose row a person deleted by hand: left so (docs, "Edits and deletions").
    not_found: list[str] = field(default_factory=list)
    #: Edits that could not be written (the reason): their rows keep the version before.
    refused: dict[str, str] = field(default_factory=dict)
    #: Changes whose rows were not found while a tab of the link was not found either:
    #: they stay pending, with the reason.
    unplaced: dict[str, str] = field(default_factory=dict)
    #: Answers whose rows a deletion removed by mistake (a person moved rows in between):
    #: appended again. Ids here and in ``unplaced`` go back into the buffer.
    restored: list[str] = field(default_factory=list)


class ChangeWriter:
    """Applies the edits and deletions of one run's batches to its link's tabs."""

    def __init__(self, active: ActiveTab) -> None:
        self.active = active
        self.access = active.access
        #: The tabs the last read of column A covered (a check reads the same ones).
        self._tabs_read: list[tuple[str, int]] = []

    def apply(
        self,
        updates: dict[str, list[Cell]],
        deletions: Sequence[str],
        layout: FormLayout,
        max_bytes: int,
        record: Callable[[Followed], None],
    ) -> None:
        """Rewrite the rows of ``updates`` and delete those of ``deletions``, handing
        ``record`` what each request (or finding no row) settled as soon as it has: a run
        cut short by the quota between two requests keeps what the first one did."""
        places, complete, seen = self._find([*updates, *deletions])
        if not complete:
            unplaced = [i for i in [*updates, *deletions] if not places.get(i)]
            if unplaced:
                record(Followed(unplaced=dict.fromkeys(unplaced, TAB_NOT_FOUND)))
            updates = {i: row for i, row in updates.items() if places.get(i)}
            deletions = [i for i in deletions if places.get(i)]
        owned = sorted({*range(FIXED_COLUMNS), *layout.cell_indexes})
        data: list[Range] = []
        missing = [answer_id for answer_id in updates if not places.get(answer_id)]
        for answer_id, row in updates.items():
            for title, _gid, index in places.get(answer_id, []):
                data += _cell_ranges(answer_id, title, index, row, owned)
        chunks, too_large = _chunks(data, max_bytes)
        if missing or too_large:
            refused = dict.fromkeys(too_large, UPDATE_TOO_LARGE)
            record(Followed(not_found=missing, refused=refused))
        if missing:
            log.info(
                "flush %s: %d edited answers have no row (deleted by hand); left so",
                self.access.lease.token,
                len(missing),
            )
        left = Counter(answer_id for chunk in chunks for answer_id, _range, _rows in chunk)
        for chunk in chunks:
            self._send_updates([(a1_range, rows) for _id, a1_range, rows in chunk])
            left.subtract(answer_id for answer_id, _range, _rows in chunk)
            done = list(dict.fromkeys(i for i, _range, _rows in chunk if not left[i]))
            record(Followed(updated=done))
        self._delete(deletions, places, seen, layout, record)

    def _delete(
        self,
        deletions: Sequence[str],
        places: dict[str, list[Place]],
        seen: Counter[str],
        layout: FormLayout,
        record: Callable[[Followed], None],
    ) -> None:
        """Delete the rows of ``deletions`` (or blank their personal info, for a link that
        keeps rows), then record them; removed rows are checked (:meth:`_check`)."""
        if not deletions:
            return
        gone = DELETED_ROW_BLANKED if layout.blank_on_delete else DELETED_ROW_REMOVED
        reasons = {
            answer_id: gone if places.get(answer_id) else DELETED_NO_ROW for answer_id in deletions
        }
        doomed = [(i, place) for i in deletions for place in places.get(i, [])]
        if doomed and layout.blank_on_delete:
            blanks = sorted(layout.personal_cell_indexes)
            cleared: list[Range] = []
            for answer_id, (title, _gid, index) in doomed:
                cleared += _cell_ranges(answer_id, title, index, [""] * (max(blanks) + 1), blanks)
            self._send_updates([(a1_range, rows) for _id, a1_range, rows in cleared])
        elif doomed:
            self._send_deletions(_spans(place for _id, place in doomed))
            # Rows moved up: the cached end of the sheet is an intent's hint no more.
            self.access.services.store.forget_sheet(self.access.key, "last_row")
            record(self._check(reasons, seen))
            return
        record(Followed(deleted=reasons))

    def _check(self, reasons: dict[str, str], seen: Counter[str]) -> Followed:
        """Column A again, after a deletion: what it removed as asked is DELETED; a row
        still there stays pending (and goes again); a row of another answer that went
        is appended again. A row a person deleted by hand in between is appended again
        too: nothing tells the two apart, and a lost answer is the worse mistake."""
        after = self._read_ids(self._tabs_read)
        kept = {i for i in reasons if after[i]}
        restored = [i for i, n in seen.items() if i not in reasons and after[i] < n]
        if kept or restored:
            log.warning(
                "flush %s: rows moved during a deletion: %d deleted again, %d appended again",
                self.access.lease.token,
                len(kept),
                len(restored),
            )
        return Followed(
            deleted={i: reason for i, reason in reasons.items() if i not in kept},
            unplaced=dict.fromkeys(sorted(kept), ROW_MOVED),
            restored=restored,
        )

    def _tabs(self) -> tuple[list[tuple[str, int]], bool]:
        """The link's tabs, as (title, gid): the active one, and those it rolled from
        (found by the titles sheetsync gave them); and whether every one was found."""
        tab = self.active.tab
        if tab.number <= 1:
            return [(self.active.title(), tab.gid)], True
        spreadsheet_id = self.access.key.spread_sheet_id
        grid = self.access.send(
            "spreadsheets.get", lambda client: client.sheet_grid(spreadsheet_id)
        )
        gids = {title: gid for gid, (title, _columns) in grid.items()}
        base = grid.get(self.access.key.sheet_id)
        tabs = [(base[0], self.access.key.sheet_id)] if base is not None else []
        if base is not None:
            for number in range(2, tab.number + 1):
                title = rolled_title(base[0], number)
                if title in gids:
                    tabs.append((title, gids[title]))
        if tab.gid not in {gid for _title, gid in tabs}:
            tabs.append((self.active.title(), tab.gid))
        return tabs, len(tabs) == tab.number

    def _find(self, answer_ids: Iterable[str]) -> tuple[dict[str, list[Place]], bool, Counter[str]]:
        """Each answer's rows, by the id in column A of every tab of the link; whether
        every tab of the link was found; and how many rows each id in them has."""
        wanted = set(answer_ids)
        if not wanted:
            return {}, True, Counter()
        tabs, complete = self._tabs()
        self._tabs_read = tabs
        places: dict[str, list[Place]] = defaultdict(list)
        seen: Counter[str] = Counter()
        for (title, gid), column in zip(tabs, self._read_columns(tabs), strict=False):
            for index, cells in enumerate(column):
                if index and cells:  # row 1 is the header
                    seen[cells[0]] += 1
                    if cells[0] in wanted:
                        places[cells[0]].append((title, gid, index))
        return places, complete, seen

    def _read_columns(self, tabs: list[tuple[str, int]]) -> list[list[list[str]]]:
        spreadsheet_id = self.access.key.spread_sheet_id
        ranges = [f"{quote_title(title)}!A:A" for title, _gid in tabs]
        columns: list[list[list[str]]] = self.access.send(
            "values.batchGet", lambda client: client.read_ranges(spreadsheet_id, ranges)
        )
        return columns

    def _read_ids(self, tabs: list[tuple[str, int]]) -> Counter[str]:
        """How many rows each id in column A of ``tabs`` has now."""
        return Counter(
            str(cells[0])
            for column in self._read_columns(tabs)
            for cells in column[1:]
            if cells and cells[0]
        )

    def _send_updates(self, data: list[tuple[str, list[list[Cell]]]]) -> None:
        spreadsheet_id = self.access.key.spread_sheet_id
        self.access.send(
            "values.batchUpdate", lambda client: client.update_ranges(spreadsheet_id, data)
        )

    def _send_deletions(self, spans: list[tuple[int, int, int]]) -> None:
        spreadsheet_id = self.access.key.spread_sheet_id
        try:
            self.access.send(
                "spreadsheets.batchUpdate", lambda client: client.delete_rows(spreadsheet_id, spans)
            )
        except TransientError as exc:
            # It may still apply: rows read before it did would name the wrong rows. The
            # next run reads column A once it no longer can (as for an append's intent).
            left_s = max(0.0, (self.access.client.deadline or time.monotonic()) - time.monotonic())
            settle_s = self.access.services.settings.google_timeout_s
            raise WaitForIntent(
                f"a deletion may still apply ({type(exc).__name__})",
                retry_after_s=left_s + settle_s,
            ) from None


def _cell_ranges(
    answer_id: str, title: str, index: int, row: list[Cell], owned: list[int]
) -> list[Range]:
    """The ranges of one row that sheetsync owns (each run of adjacent columns), with the
    row's cells in them; cells in other columns are never written."""
    ranges: list[Range] = []
    runs: list[list[int]] = []
    for column in owned:
        if runs and runs[-1][-1] == column - 1:
            runs[-1].append(column)
        else:
            runs.append([column])
    quoted, number = quote_title(title), index + 1
    for run in runs:
        first, last = column_letters(run[0]), column_letters(run[-1])
        cells = [row[column] if column < len(row) else "" for column in run]
        ranges.append((answer_id, f"{quoted}!{first}{number}:{last}{number}", [cells]))
    return ranges


def _chunks(data: list[Range], max_bytes: int) -> tuple[list[list[Range]], set[str]]:
    """``data`` in requests under ``max_bytes`` each (a range too large has its longest
    cells cut), and the answers with a range no request holds even cut: none of their
    ranges is sent, so such an edit is refused alone and whole."""
    budget = int(max_bytes * 0.98) - 200
    fitted: list[tuple[Range, int]] = []
    too_large: set[str] = set()
    for answer_id, a1_range, rows in data:
        overhead = len(a1_range) + 40
        row, size = rows[0], estimate_bytes(rows[0]) + overhead
        if size > budget:
            cut = fit_row(row, budget - overhead)
            if cut is None:
                too_large.add(answer_id)
                continue
            row, size = cut, estimate_bytes(cut) + overhead
        fitted.append(((answer_id, a1_range, [row]), size))
    chunks: list[list[Range]] = []
    used = 0
    for item, size in fitted:
        if item[0] in too_large:
            continue
        if not chunks or used + size > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(item)
        used += size
    return chunks, too_large


def _spans(places: Iterable[Place]) -> list[tuple[int, int, int]]:
    """Rows to delete as ``(gid, start, end)`` spans of adjacent rows, each tab's bottom
    up (a deletion never moves the rows of the spans after it)."""
    by_tab: dict[int, set[int]] = defaultdict(set)
    for _title, gid, index in places:
        by_tab[gid].add(index)
    spans: list[tuple[int, int, int]] = []
    for gid, indexes in by_tab.items():
        ordered = sorted(indexes, reverse=True)
        end = start = ordered[0]
        for index in ordered[1:]:
            if index == start - 1:
                start = index
                continue
            spans.append((gid, start, end + 1))
            end = start = index
        spans.append((gid, start, end + 1))
    return spans

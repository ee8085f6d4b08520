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
every edit (the cells sheetsync owns, nothing else in the row), one ``batchUpdate`` of
``deleteDimension`` ranges for every deletion, bottom up so no deletion moves another,
and one more read of column A to check them. All of them are idempotent: a run that
crashed is repeated, reading column A again.

Google has no "write (or delete) this row if it still holds this id", so a person who
sorts the sheet (or inserts or deletes rows) between the read and a write can put another
answer's row where the changed one was. The check after the writes sees it: an answer
with two rows or a deleted one still there stays pending and goes again (the next run
keeps one row and deletes the rest), and an answer whose row went without being asked
(overwritten, or deleted by mistake) is appended again at its latest version
(``Followed.restored``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sheetsync import ledger
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
#: Recorded (the change kept pending, and sent again) when the check after it found its
#: row still there, or twice: a person moved rows between the read and the change.
ROW_MOVED = "its row moved while it was changed: changed again by the next run"

#: Bytes of an id's digest in the note a run keeps until its changes are checked: a lost
#: row goes unseen only if its digest is another id's of the sheet (48 bits: about 1 in
#: 3 * 10^10 for a sheet of 10,000 rows).
DIGEST_BYTES = 6

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
    #: Answers whose rows a change overwrote or removed by mistake (a person moved rows in
    #: between): appended again. Ids here and in ``unplaced`` (ROW_MOVED) go back into the buffer.
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
        ``record`` what they settled: what needs no request at once, the rest once column
        A, read again after the writes (:meth:`_check`), shows where each row is."""
        places, complete, seen = self._find([*updates, *deletions])
        store, key = self.access.services.store, self.access.key
        left = store.unchecked(key)
        if left is not None:
            astray = any(len(places.get(i, [])) > 1 for i in updates) or any(
                places.get(i) for i in deletions
            )
            lost = self._lost_unchecked(left, seen, deletions) if astray else []
            record(Followed(restored=lost))
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
            for title, _gid, index in places.get(answer_id, [])[:1]:
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
        if chunks or any(places.get(i) for i in deletions):
            store.note_unchecked(key, b"".join(sorted(map(_digest, seen))))
        for chunk in chunks:
            self._send_updates([(a1_range, rows) for _id, a1_range, rows in chunk])
        written = [i for i in updates if places.get(i) and i not in too_large]
        self._delete(deletions, places, written, seen, layout, record)
        store.forget_sheet(key, "unchecked")

    def _lost_unchecked(
        self, left: bytes, seen: Counter[str], deletions: Sequence[str]
    ) -> list[str]:
        """A run that died between its changes and their check left the digests of the
        ids column A held before them; the caller saw a mark of a write gone astray (an
        edited answer twice, a deleted one still there): an answer of the sheet whose id
        was there and is no more (and is not being deleted) lost its row to them, and is
        appended again."""
        before = {left[at : at + DIGEST_BYTES] for at in range(0, len(left), DIGEST_BYTES)}
        gone = before - {_digest(i) for i in [*seen, *deletions]}
        if not gone:
            return []
        with self.access.services.sessions() as session:
            completed = ledger.completed_ids(
                session, self.access.key.spread_sheet_id, self.access.key.sheet_id
            )
        lost = [i for i in completed if _digest(i) in gone and not seen[i]]
        if lost:
            log.warning(
                "flush %s: a run died before checking its changes; %d rows went: appended again",
                self.access.lease.token,
                len(lost),
            )
        return lost

    def _delete(
        self,
        deletions: Sequence[str],
        places: dict[str, list[Place]],
        written: list[str],
        seen: Counter[str],
        layout: FormLayout,
        record: Callable[[Followed], None],
    ) -> None:
        """Delete the rows of ``deletions`` (or blank their personal info, for a link that
        keeps rows) and the rows of ``written`` edits beyond their first (a row sheetsync
        wrote twice: see :meth:`_check`), then check where every row went."""
        gone = DELETED_ROW_BLANKED if layout.blank_on_delete else DELETED_ROW_REMOVED
        reasons = {
            answer_id: gone if places.get(answer_id) else DELETED_NO_ROW for answer_id in deletions
        }
        blanked = [i for i in deletions if places.get(i)] if layout.blank_on_delete else []
        kept_one = [*written, *blanked]
        doomed = [place for i in kept_one for place in places[i][1:]]
        if blanked:
            # Column A is written too (the same id): a person who moved rows meanwhile
            # makes it land on another answer's row, which the check then sees.
            blanks = sorted({0, *layout.personal_cell_indexes})
            cleared: list[Range] = []
            for answer_id in blanked:
                title, _gid, index = places[answer_id][0]
                row: list[Cell] = [answer_id, *[""] * max(blanks)]
                cleared += _cell_ranges(answer_id, title, index, row, blanks)
            self._send_updates([(a1_range, rows) for _id, a1_range, rows in cleared])
        elif deletions:
            doomed += [place for i in deletions for place in places.get(i, [])]
        if doomed:
            self._send_deletions(_spans(doomed))
            # Rows moved up: the cached end of the sheet is an intent's hint no more.
            self.access.services.store.forget_sheet(self.access.key, "last_row")
        if not (kept_one or doomed):
            if reasons:
                record(Followed(deleted=reasons))
            return
        record(self._check(reasons, set(kept_one), seen))

    def _check(self, reasons: dict[str, str], kept_one: set[str], seen: Counter[str]) -> Followed:
        """Column A again, after the writes: Google has no "write this row if it still
        holds this id", and a person who sorted (or inserted or deleted rows) between the
        read and a write made it land on another answer's row. Each changed answer should
        now have one row (an edit, a blanked deletion) or none (a removed deletion); one
        that has more, or a removed one still there, is the mark of a write gone astray: it
        stays pending and goes again (its next run keeps one row and deletes the others),
        and the answers whose rows went meanwhile are appended again (a person's deletion
        at that same moment among them: nothing tells the two apart, and a lost answer is
        the worse mistake). Without such a mark, rows that went were a person's doing."""
        after = self._read_ids(self._tabs_read)
        wanted = {i: int(i in kept_one) for i in [*reasons, *kept_one]}
        again = sorted(i for i, n in wanted.items() if after[i] > n)
        vanished = [i for i, n in seen.items() if i not in reasons and n and not after[i]]
        # A write sent astray leaves a mark: the changed answer's id on the row it hit, or
        # the deleted row still there. Without one, rows that went were a person's doing.
        restored = vanished if again else []
        if again or restored:
            log.warning(
                "flush %s: rows moved during a change: %d changed again, %d appended again",
                self.access.lease.token,
                len(again),
                len(restored),
            )
        return Followed(
            updated=[i for i in kept_one if i not in reasons and after[i] == 1],
            not_found=[i for i in kept_one if i not in reasons and not after[i] and not again],
            deleted={
                i: reason if after[i] == wanted[i] else DELETED_NO_ROW
                for i, reason in reasons.items()
                if after[i] <= wanted[i]
            },
            unplaced=dict.fromkeys(again, ROW_MOVED),
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


def _digest(answer_id: str) -> bytes:
    return hashlib.blake2b(answer_id.encode(), digest_size=DIGEST_BYTES).digest()


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

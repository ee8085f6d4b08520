"""The pure parts of applying edits and deletions: which ids a batch appends, rewrites,
removes or forgets; which cells an edit writes; which rows a deletion removes, in what
order."""

from __future__ import annotations

import pytest

from sheetsync.flush.batches import _plan
from sheetsync.flush.changes import _cell_ranges, _chunks, _spans
from sheetsync.ledger import SETTLED, Entry
from sheetsync.models import AnswerChange, TransactionType

S = TransactionType
C = AnswerChange
REPLAY_SKIP = frozenset({S.COMPLETED})


@pytest.mark.parametrize(
    ("state", "change", "skip", "step"),
    [
        (None, None, SETTLED, "append"),
        (S.ENQUEUED, None, SETTLED, "append"),
        (S.COMPLETED, None, SETTLED, "skip"),
        (S.ENQUEUED, C.UPDATE, SETTLED, "append"),  # not landed: appended at its latest
        (S.COMPLETED, C.UPDATE, SETTLED, "update"),
        (S.FAILED, C.UPDATE, SETTLED, "append"),  # the edit may mend it
        (S.DEAD_LETTERED, C.UPDATE, SETTLED, "moot"),  # its replay appends the latest
        (S.DEAD_LETTERED, C.UPDATE, REPLAY_SKIP, "append"),  # the replay itself
        (S.COMPLETED, C.DELETE, SETTLED, "delete"),
        (S.COMPLETED, C.DELETE, REPLAY_SKIP, "delete"),
        (S.ENQUEUED, C.DELETE, SETTLED, "forget"),
        (S.DEAD_LETTERED, C.DELETE, REPLAY_SKIP, "forget"),
        (S.FAILED, C.DELETE, SETTLED, "forget"),
        (S.DELETED, None, REPLAY_SKIP, "skip"),  # never written again, whoever asks
        (S.DELETED, None, frozenset(), "skip"),
    ],
)
def test_what_a_batch_does_with_each_id(state, change, skip, step):
    entry = None if state is None else Entry(state, change, 3)
    assert _plan(entry, skip) == step


def test_an_edit_writes_only_the_columns_sheetsync_owns():
    row = ["ans_1", "Kim", 45000.5, "", "", "red", "", "blue"]
    ranges = _cell_ranges("ans_1", "It's", 6, row, [0, 1, 2, 5, 7])
    assert ranges == [
        ("ans_1", "'It''s'!A7:C7", [["ans_1", "Kim", 45000.5]]),
        ("ans_1", "'It''s'!F7:F7", [["red"]]),
        ("ans_1", "'It''s'!H7:H7", [["blue"]]),
    ]


def test_deletions_go_bottom_up_in_spans_of_adjacent_rows_per_tab():
    places = [("T", 0, 3), ("T", 0, 4), ("T", 0, 9), ("T (2)", 7, 1), ("T", 0, 5), ("T", 0, 1)]
    spans = _spans(places)
    assert spans == [(0, 9, 10), (0, 3, 6), (0, 1, 2), (7, 1, 2)]
    assert _spans([("T", 0, 4), ("T", 0, 4)]) == [(0, 4, 5)]  # a row copied twice: once


def test_edits_are_cut_into_requests_under_the_size_limit():
    data = [(f"a{n}", f"'T'!A{n}:B{n}", [["x" * 300, "y"]]) for n in range(1, 31)]
    chunks, too_large = _chunks(data, 4000)
    assert not too_large
    assert [item for chunk in chunks for item in chunk] == data
    assert len(chunks) > 1 and all(len(chunk) <= 12 for chunk in chunks)


def test_an_edit_too_large_even_cut_is_refused_alone_and_whole():
    data = [
        ("big", "'T'!A2:C2", [["big", "x" * 5000, "y" * 5000]]),
        ("big", "'T'!E2:E2", [["z"]]),
        ("ok", "'T'!A3:C3", [["ok", "1", "2"]]),
    ]
    chunks, too_large = _chunks(data, 600)
    assert too_large == {"big"}
    assert [item[0] for chunk in chunks for item in chunk] == ["ok"]

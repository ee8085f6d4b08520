"""Narrow checks of the roll-over's pure parts (the flow is in end_to_end/test_rollover)."""

from __future__ import annotations

from sheetsync.flush.batches import Batch
from sheetsync.flush.rollover import TITLE_CHARS_MAX, rolled_title


def test_a_rolled_title_numbers_the_tab_and_stays_within_googles_length():
    assert rolled_title("Responses", 2) == "Responses (2)"
    long = rolled_title("x" * TITLE_CHARS_MAX, 12)
    assert len(long) == TITLE_CHARS_MAX and long.endswith(" (12)")


def test_keeping_rows_keeps_the_list_head_they_came_from():
    batch = Batch(
        consumed=["a", "b", "c", "d"],
        rows=[["a"], ["c"], ["d"]],
        appended_ids=["a", "c", "d"],
        positions=[0, 2, 3],
        failed={"b": "broken"},
    )
    kept = batch.keep_rows(2)
    assert kept.appended_ids == ["a", "c"] and kept.consumed == ["a", "b", "c"]
    assert kept.failed == {"b": "broken"}
    assert batch.keep_rows(3) is batch

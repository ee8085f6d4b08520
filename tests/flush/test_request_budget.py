"""No request above the budget: cells cut as Google counts them (UTF-16 code units), lone
surrogates replaced, and a row too large for one request cut to fit or failed alone; and
formula-like text escaped for links that ask."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from sheetsync.flush.batches import TOO_LARGE, Batch
from sheetsync.flush.cells import estimate_bytes, fit_cell, fit_row, utf16_length
from sheetsync.flush.layout import FormLayout, FormQuestion
from sheetsync.flush.rows import FORMULA_STARTS, RowBuilder
from sheetsync.flush.typed import Cell
from sheetsync.models import QuestionType
from sheetsync.settings import Settings

EURO = "€"  # one UTF-16 unit, 6 bytes in the request (\u20ac)
EMOJI = "😀"  # two UTF-16 units (a surrogate pair), 12 bytes in the request
SUBMITTED = datetime(2024, 5, 1, 3, 4, 5, tzinfo=UTC)


def body_bytes(rows: list[list[Cell]]) -> int:
    """The request body's size as google-api-python-client writes it (ASCII JSON)."""
    return len(json.dumps({"values": rows}).encode())


@pytest.mark.parametrize("text", [EMOJI * 60_000, "a" + EMOJI * 30_000, "가" * 60_000])
def test_a_cell_is_cut_to_googles_limit_in_utf16_units(text: str) -> None:
    cell = fit_cell(text, 50_000)
    assert utf16_length(cell) <= 50_000
    assert cell.endswith("chars]")
    kept = cell[: cell.index("…")]
    assert text.startswith(kept)  # a prefix of whole characters: no half of a pair
    assert cell.endswith(f"[truncated {len(text) - len(kept):,} chars]")


def test_sixty_thousand_emoji_were_cut_by_code_points_before() -> None:
    # 60,000 emoji are 120,000 units; a cut by code points kept 49,974 of them (99,974
    # units), twice what Google takes.
    assert utf16_length(fit_cell(EMOJI * 60_000, 50_000)) <= 50_000


def test_a_lone_surrogate_is_replaced_and_a_pair_kept() -> None:
    text = "a\ud800b\udfffc" + EMOJI
    cell = fit_cell(text, 100)
    assert cell == "a\ufffdb\ufffdc" + EMOJI
    cell.encode("utf-8")  # a lone surrogate cannot be encoded: this would raise


def test_a_row_within_the_budget_is_left_alone() -> None:
    row: list[Cell] = ["ans_1", "someone", "2024-01-01 00:00:00", "x" * 100, 3.5]
    assert fit_row(row, 10_000) is row


def test_a_row_above_the_budget_has_its_longest_cells_cut_evenly() -> None:
    row: list[Cell] = ["ans_1", "someone", "t", EURO * 50_000, "short", "x" * 50_000, 42]
    fitted = fit_row(row, 40_000)
    assert fitted is not None
    assert estimate_bytes(fitted) <= 40_000
    assert body_bytes([fitted]) <= 40_000
    assert fitted[0] == "ans_1" and fitted[4] == "short" and fitted[6] == 42
    assert fitted[3] != row[3] and fitted[3].endswith("chars]")  # type: ignore[union-attr]
    assert fitted[5] != row[5] and fitted[5].endswith("chars]")  # type: ignore[union-attr]
    # Even: the two large cells end up about the same size in the request.
    sizes = [estimate_bytes([fitted[3]]), estimate_bytes([fitted[5]])]
    assert max(sizes) - min(sizes) < 0.1 * max(sizes)


def test_a_row_that_cannot_be_cut_to_fit_is_none() -> None:
    row: list[Cell] = ["ans_1", "", "t", *(["x" * 1_000] * 100)]
    assert fit_row(row, 10_000) is None


def test_the_estimate_is_never_below_the_body() -> None:
    cells = ["plain", 'quote " back \\ slash', EURO * 10, EMOJI * 10, "가나다", "\t\n", 1.5, 7]
    for n in range(1, len(cells) + 1):
        row: list[Cell] = ["ans_1", *cells[:n]]
        # The budget's 2% and 200 bytes cover the few escapes the estimate leaves out.
        assert body_bytes([row]) <= estimate_bytes(row) * 1.02 + 200


def batch_of(rows: list[list[Cell]]) -> Batch:
    ids = [str(row[0]) for row in rows]
    return Batch(consumed=ids, rows=rows, appended_ids=ids, positions=list(range(len(rows))))


def test_no_cut_builds_a_request_above_the_budget() -> None:
    """A 40-question answer with 50,000 euro signs a cell (12 MB) among small ones: the
    old cut always sent at least one row, however large."""
    big: list[Cell] = ["big", "", "t", *([EURO * 50_000] * 40)]
    rows = [["a0", "", "t", "hello"], big, ["a2", "", "t", "hi"]]
    max_bytes = 2_000_000
    sent: list[str] = []
    while rows:
        part = batch_of(rows).cut(max_bytes)
        assert part.consumed, "a cut must make progress"
        assert body_bytes(part.rows) <= max_bytes
        sent += part.appended_ids
        rows = rows[len(part.consumed) :]
    assert sent == ["a0", "big", "a2"]


def test_a_first_row_that_cannot_fit_fails_alone_and_the_rest_goes() -> None:
    huge: list[Cell] = ["huge", "", "t", *(["x" * 1_000] * 100)]
    batch = batch_of([huge, ["a1", "", "t", "fine"], ["a2", "", "t", "fine"]])
    part = batch.cut(10_000)
    assert part.appended_ids == ["a1", "a2"]
    assert part.failed == {"huge": f"answer huge: {TOO_LARGE}"}
    assert part.consumed == ["huge", "a1", "a2"]


ESCAPING = FormLayout(
    "form_1",
    (
        FormQuestion("text", "Text", QuestionType.SHORT_TEXT),
        FormQuestion("count", "Count", QuestionType.NUMBER),
    ),
    positions=(3, 4),
    escape_formulas=True,
)


@pytest.mark.parametrize("escape", [True, False])
def test_a_link_that_escapes_formulas_writes_them_after_an_apostrophe(escape: bool) -> None:
    layout = replace(ESCAPING, escape_formulas=escape)
    builder = RowBuilder(layout, Settings.load(cell_chars_max=100), typed=True)
    texts = ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "fine", "a=b"]
    for text in texts:
        items = [{"questionId": "text", "value": text}, {"questionId": "count", "value": "-5"}]
        row = builder.build("=ans", "=cmd|' /C calc'!A0", SUBMITTED, items)
        assert row[0] == "=ans"  # the answer id is the row's identity: never changed
        assert row[4] == -5  # a number is no formula
        formula_like = text.startswith(FORMULA_STARTS)
        assert row[3] == ("'" + text if escape and formula_like else text)
        assert row[1] == ("'=cmd|' /C calc'!A0" if escape else "=cmd|' /C calc'!A0")


def test_an_escaped_cell_still_fits_the_cell_limit() -> None:
    builder = RowBuilder(ESCAPING, Settings.load(cell_chars_max=100))
    row = builder.build("a", "", SUBMITTED, [{"questionId": "text", "value": "=" + "x" * 99}])
    assert isinstance(row[3], str) and row[3].startswith("'=") and len(row[3]) <= 100

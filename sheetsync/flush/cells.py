"""What Google takes in a cell and a request: a cell's length in UTF-16 code units (as
Google counts it), text without lone surrogates, a row's size in a request body, and the
cuts that make a cell or a row fit (docs/ARCHITECTURE.md, "One flush run")."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sheetsync.flush.typed import Cell

#: A row too large for one request has its longest cells cut, none below this size.
MIN_CUT_CELL_BYTES = 200
#: A UTF-16 surrogate on its own: JSON can carry it, Google cannot store it.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a lone surrogate becomes.
REPLACEMENT_CHARACTER = "\ufffd"


def utf16_length(text: str) -> int:
    """``text``'s length as Google counts a cell's: in UTF-16 code units (an emoji is 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def fit_cell(text: str, limit: int) -> str:
    """``text`` as a cell Google takes: lone surrogates replaced by U+FFFD, and cut to
    ``limit`` UTF-16 code units (Google's measure) with a visible marker.

    The marker says how many characters were cut, e.g. ``… [truncated 12,345 chars]``,
    and the result is never longer than ``limit`` units. The cut never splits a pair.
    """
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(REPLACEMENT_CHARACTER, text)
    if len(text) <= limit // 2 or utf16_length(text) <= limit:
        return text
    units = text.encode("utf-16-le")
    keep = limit
    marker = ""
    # The marker's length depends on the count it reports; settle in a step or two.
    for _ in range(4):
        kept = _utf16_prefix(units, keep)
        marker = f"… [truncated {len(text) - len(kept):,} chars]"
        new_keep = max(limit - len(marker), 0)
        if new_keep == keep:
            break
        keep = new_keep
    kept = _utf16_prefix(units, keep)
    return kept + marker[: limit - utf16_length(kept)]


def _utf16_prefix(units: bytes, count: int) -> str:
    """The first ``count`` UTF-16 code units of ``units`` (UTF-16-LE), less a high
    surrogate its pair would be cut from."""
    end = 2 * count
    if 0 < end < len(units) and 0xD8 <= units[end - 1] <= 0xDB:
        end -= 2
    return units[:end].decode("utf-16-le")


def estimate_bytes(row: Sequence[Cell]) -> int:
    """A row's size in the JSON request body, as the client writes it.

    The client escapes every non-ASCII UTF-16 code unit as ``\\uXXXX`` (6 bytes), so a
    cell costs its ASCII characters plus 6 per other code unit, plus quotes and a comma
    (escaped quotes and control characters are a few bytes more; the budget leaves room).
    """
    return 2 + sum(_cell_bytes(cell) for cell in row)


def _cell_bytes(cell: Cell) -> int:
    if not isinstance(cell, str):
        return len(repr(cell)) + 1
    if cell.isascii():
        return len(cell) + 3
    ascii_chars = len(cell.encode("ascii", "ignore"))
    return ascii_chars + 6 * (utf16_length(cell) - ascii_chars) + 3


def fit_row(row: list[Cell], budget: int) -> list[Cell] | None:
    """``row`` with its longest text cells cut (each with its visible marker) so that
    the row alone takes at most ``budget`` bytes of a request; None when even cells of
    :data:`MIN_CUT_CELL_BYTES` would not fit.

    The cut is even: every cell above one size is cut to that size, the largest such
    size that fits (water-filling), so one huge answer does not empty its neighbours.
    The answer id (column A) is never cut: it is the row's identity.
    """
    sizes = [_cell_bytes(cell) for cell in row]
    total = 2 + sum(sizes)
    if total <= budget:
        return row
    cuttable = [i for i, cell in enumerate(row) if i > 0 and isinstance(cell, str)]
    fixed = total - sum(sizes[i] for i in cuttable)

    def used(cap: int) -> int:
        return fixed + sum(min(sizes[i], cap) for i in cuttable)

    low, high = 0, max((sizes[i] for i in cuttable), default=0)
    while low < high:  # the largest cap whose row fits
        middle = (low + high + 1) // 2
        if used(middle) <= budget:
            low = middle
        else:
            high = middle - 1
    if low < MIN_CUT_CELL_BYTES:
        return None
    fitted = list(row)
    for i in cuttable:
        if sizes[i] > low:
            text = fitted[i]
            assert isinstance(text, str)
            # Quotes and a comma, and the marker's non-ASCII "…" (6 bytes for 1 unit);
            # a cell with other non-ASCII text may cost 6 bytes a unit.
            units = low - 8 if text.isascii() else (low - 3) // 6
            fitted[i] = fit_cell(text, units)
    return fitted

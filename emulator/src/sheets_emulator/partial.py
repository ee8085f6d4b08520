"""Google's partial responses: the ``fields`` query parameter of every API call.

``fields=sheets.properties(title,sheetId),spreadsheetId`` keeps only those parts of the
answer; ``/`` works as ``.``, ``*`` keeps everything at its level, and a field inside a
list applies to each of its items. A name the answer lacks is simply absent, as Google
leaves it out when it has no value.
"""

from __future__ import annotations

from typing import Any

from sheets_emulator.api_errors import ApiError

#: A parsed mask: each name maps to its own mask (an empty dict keeps the whole value).
Mask = dict[str, "Mask"]


def parse_fields(text: str) -> Mask:
    """Parse a ``fields`` mask; 400 when its parentheses do not match."""
    mask, position = _parse_list(text.replace(" ", ""), 0)
    if position != len(text.replace(" ", "")):
        raise ApiError.invalid_argument(f"Invalid field selection {text}")
    return mask


def select(value: Any, mask: Mask) -> Any:
    """``value`` with only the parts ``mask`` names."""
    if not mask or "*" in mask:
        return value
    if isinstance(value, list):
        return [select(item, mask) for item in value]
    if not isinstance(value, dict):
        return value
    return {name: select(value[name], inner) for name, inner in mask.items() if name in value}


def _parse_list(text: str, position: int) -> tuple[Mask, int]:
    mask: Mask = {}
    while position < len(text):
        position = _parse_path(text, position, mask)
        if position < len(text) and text[position] == ",":
            position += 1
            continue
        break
    return mask, position


def _parse_path(text: str, position: int, mask: Mask) -> int:
    start = position
    while position < len(text) and text[position] not in ",()":
        position += 1
    names = [name for name in text[start:position].replace("/", ".").split(".") if name]
    if not names:
        raise ApiError.invalid_argument(f"Invalid field selection {text}")
    node = mask
    for name in names:
        node = node.setdefault(name, {})
    if position < len(text) and text[position] == "(":
        inner, position = _parse_list(text, position + 1)
        if position >= len(text) or text[position] != ")":
            raise ApiError.invalid_argument(f"Invalid field selection {text}")
        position += 1
        _merge(node, inner)
    return position


def _merge(target: Mask, extra: Mask) -> None:
    for name, inner in extra.items():
        _merge(target.setdefault(name, {}), inner)

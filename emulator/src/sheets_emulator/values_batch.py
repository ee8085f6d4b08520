"""spreadsheets.values batchUpdate and batchClear: several values.update or values.clear
in one request, answered as Google answers them, and all applied or none (a range that
fails leaves every sheet as it was).

Google's totals: ``totalUpdatedCells`` adds up the cells set; rows, columns and sheets
are counted once however many ranges set them (two ranges on rows 1 and 4 of columns
A:D give 2 rows, 4 columns, 8 cells, 1 sheet).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sheets_emulator.api_errors import ApiError
from sheets_emulator.cells import KEEP
from sheets_emulator.request_fields import Undo, restore_point
from sheets_emulator.sheets import Spreadsheet
from sheets_emulator.values import clear_values, parse_values, update_values


def batch_update_values(spreadsheet: Spreadsheet, body: dict[str, Any]) -> dict[str, Any]:
    """values.batchUpdate: ``body["data"]`` is a list of ``{range, majorDimension, values}``
    written with ``body["valueInputOption"]``."""
    data = body.get("data") or []
    input_option = body.get("valueInputOption")
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ApiError.invalid_argument("Invalid value at 'data': data must be a list of objects.")
    responses: list[dict[str, Any]] = []
    rows: set[tuple[int, int]] = set()
    columns: set[tuple[int, int]] = set()
    cells = 0
    with _all_or_nothing(spreadsheet):
        for item in data:
            range_text = item.get("range")
            if not isinstance(range_text, str):
                raise ApiError.invalid_argument("Invalid data[].range: a range is required.")
            values = {
                "values": item.get("values"),
                "majorDimension": item.get("majorDimension"),
                "includeValuesInResponse": body.get("includeValuesInResponse"),
            }
            response = update_values(spreadsheet, range_text, values, input_option)
            responses.append(response)
            if "updatedCells" not in response:
                continue
            sheet, parsed = spreadsheet.resolve(response["updatedRange"])
            block, _ = parse_values(values, str(input_option))
            for row_offset, row in enumerate(block):
                for col_offset, value in enumerate(row):
                    if value is not KEEP:
                        rows.add((sheet.sheet_id, parsed.start_row + row_offset))
                        columns.add((sheet.sheet_id, parsed.start_col + col_offset))
            cells += response["updatedCells"]
    totals = {
        "totalUpdatedRows": len(rows),
        "totalUpdatedColumns": len(columns),
        "totalUpdatedCells": cells,
        "totalUpdatedSheets": len({sheet_id for sheet_id, _ in rows}),
    }
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    result.update({name: count for name, count in totals.items() if count})  # proto3 JSON
    if responses:
        result["responses"] = responses
    return result


def batch_clear_values(spreadsheet: Spreadsheet, body: dict[str, Any]) -> dict[str, Any]:
    """values.batchClear: empty every range of ``body["ranges"]`` (formats stay)."""
    ranges = body.get("ranges") or []
    if not isinstance(ranges, list) or not all(isinstance(item, str) for item in ranges):
        raise ApiError.invalid_argument("Invalid value at 'ranges': ranges must be strings.")
    with _all_or_nothing(spreadsheet):
        cleared = [clear_values(spreadsheet, range_text)["clearedRange"] for range_text in ranges]
    result: dict[str, Any] = {"spreadsheetId": spreadsheet.spreadsheet_id}
    if cleared:
        result["clearedRanges"] = cleared
    return result


@contextmanager
def _all_or_nothing(spreadsheet: Spreadsheet) -> Iterator[None]:
    """Puts every sheet back as it was when the block raises :class:`ApiError`."""
    undo: list[Undo] = [restore_point(sheet) for sheet in spreadsheet.sheets]
    try:
        yield
    except ApiError:
        for step in undo:
            step()
        raise
